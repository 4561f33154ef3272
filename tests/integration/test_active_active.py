"""Active-active on real clusters with the Spark job (at-least-once): two flows in opposite
directions (DefaultReplicationPolicy), one direction failed over and back.

A group on ``east`` reads its local ``aa-orders`` and the remote ``west.aa-orders`` (the reverse
flow's copy of west's ``aa-orders``). Failing ``east-to-west`` over must leave it on west at the
exact next record of ``east.aa-orders`` and of west's own ``aa-orders``; failing back, at the exact
next record of east's ``aa-orders`` and ``west.aa-orders``. Judged by reading both clusters.

The one Spark job runs both flows: failing ``east-to-west`` over pauses only its query, so
``west-to-east`` mirrors on through the incident, and the failback resumes it in the same job.

The scenario (``fail_one_direction_over_and_back``) is the one ``test_active_active_connect.py``
runs with engine ``connect``: an engine brings its deployment and its checks (``Mirroring``).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.dev.process import pick_free_ports
from mm2spec.live.dr_state import read_states
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_failback import PARTITIONS, _commit, _produce
from test_failover import _report, _run, _wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
TOPIC = "aa-orders"
SEED = 150
GROUP = "aa-app"
NAME = "it-active-active"


def _spec(tmp: Path, pair) -> Path:
    flow = {"replicationPolicy": "default", "topics": [TOPIC], "groups": ["aa-app.*"], "tasksMax": 1,
            "offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False,
            "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5}
    spec = {"apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": NAME},
            # Aliases of their own: MM2's internal topics are named after them, apart from other tests'.
            "clusters": {"east": {"bootstrapServers": [pair.primary.bootstrap]},
                         "west": {"bootstrapServers": [pair.dr.bootstrap]}},
            "mirrors": [{"name": "east-to-west", "source": "east", "target": "west", **flow},
                        {"name": "west-to-east", "source": "west", "target": "east", **flow}],
            "engine": "spark", "acls": {"manage": False, "principal": "User:mm2"},
            "spark": {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint"),
                      # a free /metrics port: the default (9405) would be held by any other Spark job on this host
                      "metrics": {"port": pick_free_ports(1)[0]}}}
    path = tmp / "aa.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _bootstrap(pair, alias: str) -> str:
    return (pair.primary if alias == "east" else pair.dr).bootstrap


def _cluster(pair, alias: str) -> Cluster:
    return Cluster(alias, (_bootstrap(pair, alias),))


def seed(pair, topic: str) -> None:
    """``topic`` on east and on west, with ``SEED`` records of each cluster's own."""
    for alias in ("east", "west"):
        admin = AdminClient({"bootstrap.servers": _bootstrap(pair, alias)})
        for future in admin.create_topics([NewTopic(topic, PARTITIONS, -1)]).values():
            future.result(30)
        _produce(_bootstrap(pair, alias), topic, 0, SEED, alias)


def _behind(pair, source: str, target: str, topic: str) -> list[str]:
    """Partitions of ``source``'s ``topic`` whose last record is not the last of its copy on ``target``."""
    copy = f"{source}.{topic}"
    if copy not in AdminClient({"bootstrap.servers": _bootstrap(pair, target)}).list_topics(timeout=30).topics:
        return [f"{copy} not on {target} yet"]
    with RecordReader(_cluster(pair, source)) as src, RecordReader(_cluster(pair, target)) as dst:
        return [f"{copy}-{p}" for p in range(PARTITIONS)
                if (last := src.last_record(topic, p)) is not None
                and ((mirrored := dst.last_record(copy, p)) is None or mirrored.content() != last.content())]


def _ends(pair, alias: str, topic: str) -> dict[int, int]:
    with RecordReader(_cluster(pair, alias)) as reader:
        return {p: reader.watermarks(topic, p)[1] for p in range(PARTITIONS)}


def _offsets(pair, alias: str, group: str) -> dict:
    return dict(GroupOffsets(_cluster(pair, alias)).describe([group])[group].offsets)


def _assert_exact(pair, group: str, left: str, left_topic: str, committed: dict, arrived: str,
                  arrived_topic: str) -> None:
    """``group`` left ``left`` at ``committed`` on ``left_topic`` and resumes on ``arrived``'s
    ``arrived_topic``: the record before its new position is the last it consumed, the one at it the
    next it had not (or both logs end there)."""
    now = _offsets(pair, arrived, group)
    with RecordReader(_cluster(pair, left)) as old, RecordReader(_cluster(pair, arrived)) as new:
        for partition, offset in committed.items():
            resume = now[(arrived_topic, partition)]
            where = (left_topic, arrived_topic, partition, offset, resume)
            assert new.read(arrived_topic, partition, resume - 1, resume)[0].content() == \
                old.read(left_topic, partition, offset - 1, offset)[0].content(), where
            following = old.read(left_topic, partition, offset, min(offset + 1, old.watermarks(left_topic, partition)[1]))
            after = new.read(arrived_topic, partition, resume,
                             min(resume + 1, new.watermarks(arrived_topic, partition)[1]))
            assert [r.content() for r in after] == [r.content() for r in following], where


class Mirroring:
    """What the scenario needs of the engine that runs both flows, and the checks only that engine
    makes at each step (none by default)."""

    args: tuple[str, ...]
    """The CLI's words that find the deployment (``--state-dir ...`` or ``--connect-url ...``) and ``--yes``."""
    progress: object
    """What ``_wait`` shows the log of when it times out (anything with a ``log_file``)."""
    stopped: str
    """The state ``flow_states`` gives a failed-over flow."""

    def flow_states(self) -> dict[str, str]:
        """Each flow's state: ``running``, ``stopped`` or what the engine says."""
        raise NotImplementedError

    def mirrored(self) -> None:
        """Both directions have mirrored the seed records."""

    def refused(self) -> None:
        """A failover of both directions in one run was refused."""

    def failed_over(self, out: str) -> None:
        """``east-to-west`` failed over (``out``: the run's output)."""

    def failed_back(self) -> None:
        """``east-to-west`` failed back."""


def fail_one_direction_over_and_back(pair, capsys, spec: Path, engine: Mirroring, topic: str, group: str,
                                     name: str) -> None:
    """The scenario on clusters ``seed``ed with ``topic``, both flows of ``spec`` (named ``name``)
    mirroring through ``engine``; ``group`` (matched by the flows' groups) has no offsets yet."""
    args = engine.args
    _wait(lambda: _behind(pair, "east", "west", topic) + _behind(pair, "west", "east", topic), CATCH_UP_TIMEOUT,
          "both directions to mirror the seed records", engine.progress)
    engine.mirrored()
    rng = random.Random(27)
    local = {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)}
    remote = {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)}
    # The group reads east's topic and west's copy on east, which must exist before it commits there.
    _commit(pair, "primary", topic, group, local)
    _commit(pair, "primary", f"west.{topic}", group, remote)

    # Both directions in one run: refused, nothing changed.
    code, out = _run(capsys, "failover", str(spec), *args)
    assert code == 1 and "active-active" in out and "nothing was changed" in out, out
    engine.refused()

    code, out = _run(capsys, "failover", str(spec), *args, "--format", "json", "--limit", "flow=east-to-west")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
    moved = {(t["topic"], t["targetTopic"], t.get("remote")) for t in report["translations"]}
    assert moved == {(topic, f"east.{topic}", None), (f"west.{topic}", topic, "west-to-east")}, moved
    _assert_exact(pair, group, "east", topic, local, "west", f"east.{topic}")
    _assert_exact(pair, group, "east", f"west.{topic}", remote, "west", topic)
    # The state is per direction: east-to-west failed over (on west), west-to-east not (on east).
    assert read_states(_cluster(pair, "west"), name)["east-to-west"].phase == "failed-over"
    assert read_states(_cluster(pair, "west"), name)["east-to-west"].groups == (group,)
    assert "west-to-east" not in read_states(_cluster(pair, "east"), name)
    # Only east-to-west stopped mirroring; west-to-east runs on in the same deployment.
    engine.failed_over(out)
    assert engine.flow_states() == {"east-to-west": engine.stopped, "west-to-east": "running"}

    # On west the group reads on: west's own topic grows and it consumes part of it; the other
    # direction copies those records to east while east-to-west is failed over.
    _produce(pair.dr.bootstrap, topic, SEED, 60, "west-later")
    _wait(lambda: _behind(pair, "west", "east", topic), CATCH_UP_TIMEOUT,
          "west-to-east to mirror west's new records during the failover", engine.progress)
    assert engine.flow_states()["east-to-west"] == engine.stopped
    on_west = _offsets(pair, "west", group)
    further = {p: on_west[(topic, p)] + 10 + p for p in range(PARTITIONS)}
    _commit(pair, "dr", topic, group, further)
    back_on_copy = {p: on_west[(f"east.{topic}", p)] for p in range(PARTITIONS)}

    code, out = _run(capsys, "failback", str(spec), *args, "--format", "json", "--limit", "flow=east-to-west")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
    assert any(t.get("remote") == "west-to-east" and t["targetTopic"] == f"west.{topic}"
               for t in report["translations"]), report["translations"]
    _assert_exact(pair, group, "west", f"east.{topic}", back_on_copy, "east", topic)
    _assert_exact(pair, group, "west", topic, further, "east", f"west.{topic}")
    assert "east-to-west" not in read_states(_cluster(pair, "west"), name)
    # Resumed from east's end: east's next records arrive once each, and nothing else does.
    engine.failed_back()
    assert engine.flow_states() == {"east-to-west": "running", "west-to-east": "running"}
    before = _ends(pair, "west", f"east.{topic}")
    _produce(pair.primary.bootstrap, topic, 10_000, 4 * PARTITIONS, "east-after")
    _wait(lambda: _behind(pair, "east", "west", topic), CATCH_UP_TIMEOUT, "the resumed east-to-west to mirror",
          engine.progress)
    assert _ends(pair, "west", f"east.{topic}") == {p: n + 4 for p, n in before.items()}


class _SparkJob(Mirroring):
    """The one Spark job of both flows: a failed-over flow's query pauses, in the same driver."""

    stopped = "paused"

    def __init__(self, state_dir: Path, job):
        self.state_dir, self.job = state_dir, job
        self.args, self.progress = ("--state-dir", str(state_dir), "--yes"), job

    def flow_states(self) -> dict[str, str]:
        return {name: figures.get("state") for name, figures in mirror.status(self.state_dir).flows.items()}

    def refused(self) -> None:
        assert mirror.status(self.state_dir).running

    def failed_over(self, out: str) -> None:
        # Only east-to-west's query paused: the job runs on (same driver) and so does west-to-east.
        assert "not failed over by this run" not in out, out
        assert mirror.status(self.state_dir).pid == self.job.pid

    def failed_back(self) -> None:
        # Resumed in the same job.
        assert mirror.status(self.state_dir).pid == self.job.pid, "no job restart"


def test_one_direction_fails_over_and_back_with_local_and_remote_topics_exact(kafka_pair, tmp_path, capsys):
    seed(kafka_pair, TOPIC)
    spec = _spec(tmp_path, kafka_pair)
    job = mirror.start(spark_job_config(load_desired_state(spec, None)), state_dir=tmp_path / "spark",
                       wait_running=START_TIMEOUT)
    try:
        fail_one_direction_over_and_back(kafka_pair, capsys, spec, _SparkJob(tmp_path / "spark", job),
                                         TOPIC, GROUP, NAME)
    finally:
        mirror.stop(tmp_path / "spark")
