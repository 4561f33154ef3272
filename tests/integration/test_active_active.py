"""Active-active on real clusters with the Spark job (at-least-once): two flows in opposite
directions (DefaultReplicationPolicy), one direction failed over and back.

A group on ``east`` reads its local ``aa-orders`` and the remote ``west.aa-orders`` (the reverse
flow's copy of west's ``aa-orders``). Failing ``east-to-west`` over must leave it on west at the
exact next record of ``east.aa-orders`` and of west's own ``aa-orders``; failing back, at the exact
next record of east's ``aa-orders`` and ``west.aa-orders``. Judged by reading both clusters.

The one Spark job runs both flows: failing ``east-to-west`` over pauses only its query, so
``west-to-east`` mirrors on through the incident, and the failback resumes it in the same job.
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


def _behind(pair, source: str, target: str) -> list[str]:
    """Partitions of ``source``'s aa-orders whose last record is not the last of its copy on ``target``."""
    copy = f"{source}.{TOPIC}"
    if copy not in AdminClient({"bootstrap.servers": _bootstrap(pair, target)}).list_topics(timeout=30).topics:
        return [f"{copy} not on {target} yet"]
    with RecordReader(_cluster(pair, source)) as src, RecordReader(_cluster(pair, target)) as dst:
        return [f"{copy}-{p}" for p in range(PARTITIONS)
                if (last := src.last_record(TOPIC, p)) is not None
                and ((mirrored := dst.last_record(copy, p)) is None or mirrored.content() != last.content())]


def _ends(pair, alias: str, topic: str) -> dict[int, int]:
    with RecordReader(_cluster(pair, alias)) as reader:
        return {p: reader.watermarks(topic, p)[1] for p in range(PARTITIONS)}


def _flow_states(state_dir) -> dict[str, str]:
    return {name: figures.get("state") for name, figures in mirror.status(state_dir).flows.items()}


def _offsets(pair, alias: str) -> dict:
    return dict(GroupOffsets(_cluster(pair, alias)).describe([GROUP])[GROUP].offsets)


def _assert_exact(pair, left: str, left_topic: str, committed: dict, arrived: str, arrived_topic: str) -> None:
    """The group left ``left`` at ``committed`` on ``left_topic`` and resumes on ``arrived``'s
    ``arrived_topic``: the record before its new position is the last it consumed, the one at it the
    next it had not (or both logs end there)."""
    now = _offsets(pair, arrived)
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


def test_one_direction_fails_over_and_back_with_local_and_remote_topics_exact(kafka_pair, tmp_path, capsys):
    pair, state_dir = kafka_pair, str(tmp_path / "spark")
    for alias in ("east", "west"):
        admin = AdminClient({"bootstrap.servers": _bootstrap(pair, alias)})
        for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, -1)]).values():
            future.result(30)
        _produce(_bootstrap(pair, alias), TOPIC, 0, SEED, alias)
    spec = _spec(tmp_path, pair)
    job = mirror.start(spark_job_config(load_desired_state(spec, None)), state_dir=tmp_path / "spark",
                       wait_running=START_TIMEOUT)
    try:
        _wait(lambda: _behind(pair, "east", "west") + _behind(pair, "west", "east"), CATCH_UP_TIMEOUT,
              "both directions to mirror the seed records", job)
        rng = random.Random(27)
        local = {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)}
        remote = {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)}
        _commit(pair, "primary", TOPIC, GROUP, local)
        _commit(pair, "primary", f"west.{TOPIC}", GROUP, remote)

        # Both directions in one run: refused, nothing changed.
        code, out = _run(capsys, "failover", str(spec), "--state-dir", state_dir, "--yes")
        assert code == 1 and "active-active" in out and "nothing was changed" in out, out
        assert mirror.status(tmp_path / "spark").running

        code, out = _run(capsys, "failover", str(spec), "--state-dir", state_dir, "--yes", "--format", "json",
                         "--limit", "flow=east-to-west")
        assert code == 0, out
        report = _report(out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
        moved = {(t["topic"], t["targetTopic"], t.get("remote")) for t in report["translations"]}
        assert moved == {(TOPIC, f"east.{TOPIC}", None), (f"west.{TOPIC}", TOPIC, "west-to-east")}, moved
        _assert_exact(pair, "east", TOPIC, local, "west", f"east.{TOPIC}")
        _assert_exact(pair, "east", f"west.{TOPIC}", remote, "west", TOPIC)
        # The state is per direction: east-to-west failed over (on west), west-to-east not (on east).
        assert read_states(_cluster(pair, "west"), NAME)["east-to-west"].phase == "failed-over"
        assert read_states(_cluster(pair, "west"), NAME)["east-to-west"].groups == (GROUP,)
        assert "west-to-east" not in read_states(_cluster(pair, "east"), NAME)
        # Only east-to-west's query paused: the job runs on (same driver) and so does west-to-east.
        assert "not failed over by this run" not in out, out
        assert mirror.status(tmp_path / "spark").pid == job.pid
        assert _flow_states(tmp_path / "spark") == {"east-to-west": "paused", "west-to-east": "running"}

        # On west the group reads on: west's own topic grows and it consumes part of it; the other
        # direction copies those records to east while east-to-west is failed over.
        _produce(pair.dr.bootstrap, TOPIC, SEED, 60, "west-later")
        _wait(lambda: _behind(pair, "west", "east"), CATCH_UP_TIMEOUT,
              "west-to-east to mirror west's new records during the failover", job)
        assert _flow_states(tmp_path / "spark")["east-to-west"] == "paused"
        on_west = _offsets(pair, "west")
        further = {p: on_west[(TOPIC, p)] + 10 + p for p in range(PARTITIONS)}
        _commit(pair, "dr", TOPIC, GROUP, further)
        back_on_copy = {p: on_west[(f"east.{TOPIC}", p)] for p in range(PARTITIONS)}

        code, out = _run(capsys, "failback", str(spec), "--state-dir", state_dir, "--yes", "--format", "json",
                         "--limit", "flow=east-to-west")
        assert code == 0, out
        report = _report(out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
        assert any(t.get("remote") == "west-to-east" and t["targetTopic"] == f"west.{TOPIC}"
                   for t in report["translations"]), report["translations"]
        _assert_exact(pair, "west", f"east.{TOPIC}", back_on_copy, "east", TOPIC)
        _assert_exact(pair, "west", TOPIC, further, "east", f"west.{TOPIC}")
        assert "east-to-west" not in read_states(_cluster(pair, "west"), NAME)
        # Resumed in the same job, from east's end: east's next records arrive once each.
        assert mirror.status(tmp_path / "spark").pid == job.pid, "no job restart"
        assert _flow_states(tmp_path / "spark") == {"east-to-west": "running", "west-to-east": "running"}
        before = _ends(pair, "west", f"east.{TOPIC}")
        _produce(pair.primary.bootstrap, TOPIC, 10_000, 4 * PARTITIONS, "east-after")
        _wait(lambda: _behind(pair, "east", "west"), CATCH_UP_TIMEOUT, "the resumed east-to-west to mirror", job)
        assert _ends(pair, "west", f"east.{TOPIC}") == {p: n + 4 for p, n in before.items()}
    finally:
        mirror.stop(tmp_path / "spark")
