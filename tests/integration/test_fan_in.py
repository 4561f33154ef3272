"""Fan-in on real clusters with the Spark job (at-least-once): two sources mirrored into one DR
(DefaultReplicationPolicy), one source failed over while the other keeps mirroring.

``north`` (``kafka_pair``'s primary, PLAINTEXT) and ``south`` (``secure_kafka_pair``'s primary,
SASL/SCRAM, its password from an environment variable) both mirror ``fi-orders`` into ``hub``
(``kafka_pair``'s dr), which then holds ``north.fi-orders`` and ``south.fi-orders``; one Spark job
runs both flows. No cluster is started for this test: the pairs are the session's.

Failing ``north-to-hub`` over must leave north's group on hub at the exact next record of
``north.fi-orders`` (judged by reading both clusters), record ``north-to-hub`` failed over on hub and
nothing for ``south-to-hub``, pause only north's query (south's records written during and after the
failover reach hub), and a second run must change nothing. The failback brings the group back to
north exactly and resumes north's query in the same job.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from mm2spec.dev import ADMIN_PASSWORD
from mm2spec.live.dr_state import read_states
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import DesiredState

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import ADMIN_SECRET, spec_for
from test_failover import _report, _run, _wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
TOPIC = "fi-orders"
PARTITIONS = 3
SEED = 150
GROUPS = {"north": "fi-north-app", "south": "fi-south-app"}
NAME = "it-fan-in"
FLOW = {"replicationPolicy": "default", "topics": [TOPIC], "groups": ["fi-.*"], "tasksMax": 1, "offsetLagMax": 10,
        "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False, "refreshTopicsIntervalSeconds": 5,
        "refreshGroupsIntervalSeconds": 5}


def _spec(tmp: Path, pair, secure_pair) -> Path:
    # Aliases of their own: MM2's internal topics on hub (<source>.checkpoints.internal) are named
    # after them, apart from other tests' on the same clusters.
    spec = spec_for(pair, [TOPIC], name=NAME, aliases=("north", "hub"), mirror={"name": "north-to-hub", **FLOW})
    # The secure source as its super user (the fixture's mm2 user has no ACLs), by secret name.
    spec["clusters"]["south"] = {
        "bootstrapServers": [secure_pair.primary.bootstrap],
        "security": {"protocol": "SASL_PLAINTEXT", "saslMechanism": "SCRAM-SHA-512", "username": "admin",
                     "passwordSecret": ADMIN_SECRET}}
    spec["mirrors"].append({"name": "south-to-hub", "source": "south", "target": "hub", **FLOW})
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint")}
    path = tmp / "fan-in.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _produce(state: DesiredState, alias: str, start: int, count: int) -> None:
    cluster = state.cluster(alias)
    conf = {"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if cluster.security.protocol != "PLAINTEXT":
        conf |= {"security.protocol": cluster.security.protocol, "sasl.mechanism": cluster.security.sasl_mechanism,
                 "sasl.username": cluster.security.username, "sasl.password": ADMIN_PASSWORD}
    producer = Producer(conf)
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        # Both sources write the same keys and values: only the seq header (with its source) tells them apart.
        producer.produce(TOPIC, key=f"k{i % 7}".encode(), value=f"v{i % 5}".encode(), partition=i % PARTITIONS,
                         headers=[("seq", f"{alias}{i}".encode())], timestamp=now - 60_000 + i)
    assert producer.flush(60) == 0


def _behind(state: DesiredState, source: str) -> list[str]:
    """Partitions of ``source``'s fi-orders whose last record is not the last of its copy on hub."""
    copy = f"{source}.{TOPIC}"
    if not KafkaAdmin(state.cluster("hub")).topics([copy], with_configs=False):
        return [f"{copy} not on hub yet"]
    with RecordReader(state.cluster(source)) as src, RecordReader(state.cluster("hub")) as dst:
        return [f"{copy}-{p}" for p in range(PARTITIONS)
                if (last := src.last_record(TOPIC, p)) is not None
                and ((mirrored := dst.last_record(copy, p)) is None or mirrored.content() != last.content())]


def _ends(state: DesiredState, alias: str, topic: str) -> dict[int, int]:
    with RecordReader(state.cluster(alias)) as reader:
        return {p: reader.watermarks(topic, p)[1] for p in range(PARTITIONS)}


def _offsets(state: DesiredState, alias: str, group: str) -> dict:
    return dict(GroupOffsets(state.cluster(alias)).describe([group])[group].offsets)


def _flow_states(state_dir: Path) -> dict[str, str]:
    return {name: figures.get("state") for name, figures in mirror.status(state_dir).flows.items()}


def _assert_exact(state: DesiredState, group: str, left: str, left_topic: str, committed: dict, arrived: str,
                  arrived_topic: str) -> None:
    """``group`` left ``left`` at ``committed`` on ``left_topic`` and resumes on ``arrived``'s
    ``arrived_topic``: the record before its new position is the last it consumed, the one at it the
    next it had not."""
    now = _offsets(state, arrived, group)
    with RecordReader(state.cluster(left)) as old, RecordReader(state.cluster(arrived)) as new:
        for partition, offset in committed.items():
            resume = now[(arrived_topic, partition)]
            where = (group, left_topic, arrived_topic, partition, offset, resume)
            assert new.read(arrived_topic, partition, resume - 1, resume)[0].content() == \
                old.read(left_topic, partition, offset - 1, offset)[0].content(), where
            assert new.read(arrived_topic, partition, resume, resume + 1)[0].content() == \
                old.read(left_topic, partition, offset, offset + 1)[0].content(), where


class _Writer(threading.Thread):
    """Writes to ``alias`` in small batches until stopped: south's producers through north's incident."""

    def __init__(self, state: DesiredState, alias: str, start: int):
        super().__init__(daemon=True)
        self.state, self.alias, self.next = state, alias, start
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.done.wait(0.3):
                _produce(self.state, self.alias, self.next, PARTITIONS)
                self.next += PARTITIONS
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc

    def stop(self) -> int:
        self.done.set()
        self.join(60)
        assert self.error is None, self.error
        return self.next


def test_one_source_fails_over_while_the_other_keeps_mirroring(kafka_pair, secure_kafka_pair, tmp_path, capsys,
                                                              monkeypatch):
    monkeypatch.setenv(ADMIN_SECRET, ADMIN_PASSWORD)  # the CLI's runs read south's password from it
    spec, state_dir = _spec(tmp_path, kafka_pair, secure_kafka_pair), tmp_path / "spark"
    state = load_desired_state(spec, None)
    for alias in ("north", "south"):
        KafkaAdmin(state.cluster(alias)).create_topic(TOPIC, PARTITIONS, -1, {})
        _produce(state, alias, 0, SEED)
    job = mirror.start(spark_job_config(state), state_dir=state_dir, env={ADMIN_SECRET: ADMIN_PASSWORD},
                       wait_running=START_TIMEOUT)
    try:
        _wait(lambda: _behind(state, "north") + _behind(state, "south"), CATCH_UP_TIMEOUT,
              "both sources to mirror their seed records into hub", job)
        rng = random.Random(27)
        committed = {}
        for alias, group in GROUPS.items():
            # Room after each position: the group reads on by up to PARTITIONS records on hub.
            committed[alias] = {p: rng.randrange(2, SEED // PARTITIONS - PARTITIONS - 1) for p in range(PARTITIONS)}
            GroupOffsets(state.cluster(alias)).commit(group, {(TOPIC, p): o for p, o in committed[alias].items()})

        args = ("failover", str(spec), "--state-dir", str(state_dir), "--yes", "--limit", "flow=north-to-hub")
        writer = _Writer(state, "south", SEED)
        writer.start()
        try:
            code, out = _run(capsys, *args, "--format", "json")
        finally:
            south_written = writer.stop()
        assert code == 0, out
        report = _report(out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
        moved = {(t["group"], t["topic"], t["targetTopic"]) for t in report["translations"]}
        assert moved == {(GROUPS["north"], TOPIC, f"north.{TOPIC}")}, moved
        _assert_exact(state, GROUPS["north"], "north", TOPIC, committed["north"], "hub", f"north.{TOPIC}")
        assert _offsets(state, "hub", GROUPS["south"]) == {}, "south's group was not to move"
        # The state says which source is failed over: north-to-hub on hub, nothing for south-to-hub.
        recorded = read_states(state.cluster("hub"), NAME)
        assert recorded["north-to-hub"].phase == "failed-over" and recorded["north-to-hub"].groups == (GROUPS["north"],)
        assert "south-to-hub" not in recorded, recorded
        code, out = _run(capsys, "plan", str(spec))
        assert "flow north-to-hub failed over to hub" in out and "flow south-to-hub failed over" not in out, out
        # Only north's query paused, in the same job; south's records written during the failover
        # and after it reach hub.
        assert "not failed over by this run" not in out, out
        assert mirror.status(state_dir).pid == job.pid
        assert _flow_states(state_dir) == {"north-to-hub": "paused", "south-to-hub": "running"}
        assert south_written > SEED, "nothing was written to south during the failover"
        _produce(state, "south", south_written, 2 * PARTITIONS)
        _wait(lambda: _behind(state, "south"), CATCH_UP_TIMEOUT, "south-to-hub to mirror through north's failover", job)
        north_copy = _ends(state, "hub", f"north.{TOPIC}")

        # On hub the group reads on within north's copy. The same failover again (a retried job)
        # changes nothing: the group is not moved back, the state and the queries stay.
        further = {p: o + 1 + p for (_topic, p), o in _offsets(state, "hub", GROUPS["north"]).items()}
        GroupOffsets(state.cluster("hub")).commit(GROUPS["north"], {(f"north.{TOPIC}", p): o for p, o in further.items()})
        code, out = _run(capsys, *args, "--format", "json")
        assert code == 0, out
        assert {t["status"] for t in _report(out)["tasks"]} <= {"ok", "skipped"}, _report(out)["tasks"]
        assert _offsets(state, "hub", GROUPS["north"]) == {(f"north.{TOPIC}", p): o for p, o in further.items()}
        assert read_states(state.cluster("hub"), NAME)["north-to-hub"] == recorded["north-to-hub"]
        assert _flow_states(state_dir) == {"north-to-hub": "paused", "south-to-hub": "running"}

        # The failback brings the group back to north exactly, and north's query resumes.
        code, out = _run(capsys, "failback", str(spec), "--state-dir", str(state_dir), "--yes", "--format", "json",
                         "--limit", "flow=north-to-hub")
        assert code == 0, out
        report = _report(out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
        _assert_exact(state, GROUPS["north"], "hub", f"north.{TOPIC}", further, "north", TOPIC)
        assert read_states(state.cluster("hub"), NAME) == {}
        assert mirror.status(state_dir).pid == job.pid, "no job restart"
        assert _flow_states(state_dir) == {"north-to-hub": "running", "south-to-hub": "running"}
        # Resumed from north's end: north's next records arrive once each.
        _produce(state, "north", 10_000, 2 * PARTITIONS)
        _wait(lambda: _behind(state, "north"), CATCH_UP_TIMEOUT, "the resumed north-to-hub to mirror", job)
        assert _ends(state, "hub", f"north.{TOPIC}") == {p: n + 2 for p, n in north_copy.items()}
    finally:
        mirror.stop(state_dir)
