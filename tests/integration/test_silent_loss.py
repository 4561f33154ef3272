"""Silent loss on real clusters and a real Spark mirror: records the source deletes before the
mirror copied them, and a source topic deleted and created again under the same name. The mirror
copies on without a word; ``mm2spec verify`` must exit 1 naming the partition and the count.

The expected count is judged independently of verify: DR's last record is, by content, the
source's record at some offset, so the mirror had copied the offsets below the next one
(``position``) and ``log start - position`` records were deleted before they were mirrored.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.cli import main
from mm2spec.errors import KafkaOperationFailed
from mm2spec.live.dr_state import read_topic_ids
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.records import RecordReader
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for
from test_failover import _cluster, _report, _run, _wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
#: A topic deleted on a KRaft cluster is gone from every broker within seconds; a loaded machine needs more.
RECREATE_TIMEOUT = 120.0
DELETED = "sl-orders"
RECREATED = "sl-ledger"
PARTITIONS = 2
RECORDS = 100


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS,
                         headers=[("seq", str(i).encode())], timestamp=now + i)
    assert producer.flush(60) == 0


def _lagging(pair) -> list[str]:
    behind = []
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        for topic in (DELETED, RECREATED):
            if not KafkaAdmin(_cluster(pair, "dr")).topics([topic], with_configs=False):
                behind.append(f"{topic} not on dr yet")
                continue
            for p in range(PARTITIONS):
                last, copy = src.last_record(topic, p), dr.last_record(topic, p)
                if copy is None or copy.content() != last.content():
                    behind.append(f"{topic}-{p}: source ends {last}, dr ends {copy}")
    return behind


def _verify(capsys, spec: Path, state_dir: Path) -> tuple[int, dict, str]:
    """verify's exit code, its verify.loss task and the whole output."""
    code, out = _run(capsys, "verify", str(spec), "--state-dir", str(state_dir), "--format", "json")
    (task,) = [t for t in _report(out)["tasks"] if t["module"] == "verify.loss"]
    return code, task, out


@pytest.fixture(scope="module")
def stopped_mirror(kafka_pair, tmp_path_factory):
    """Both topics mirrored by a Spark job, one verify run (it records the topic IDs on DR), then
    the mirror stopped: what the source does from here on never reaches DR."""
    tmp = tmp_path_factory.mktemp("silent-loss")
    admin = AdminClient({"bootstrap.servers": kafka_pair.primary.bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, -1) for t in (DELETED, RECREATED)]).values():
        future.result(30)
    for topic in (DELETED, RECREATED):
        _produce(kafka_pair.primary.bootstrap, topic, 0, RECORDS)
    spec = spec_for(kafka_pair, [DELETED, RECREATED], name="it-silent-loss",
                    # A flow name of its own: its probe topic (mm2spec-probe-<flow>) is then not one
                    # another test created on the shared clusters, and the mirrored set is exactly these two.
                    mirror={"name": "silent-loss", "offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1,
                            "syncGroupOffsets": False, "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5})
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint")}
    path = tmp / "dr.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    state = load_desired_state(path, None)
    job = mirror.start(spark_job_config(state), state_dir=tmp / "spark", wait_running=START_TIMEOUT)
    try:
        _wait(lambda: _lagging(kafka_pair), CATCH_UP_TIMEOUT, "the mirror to copy the seed records", job)
        main(["verify", str(path), "--state-dir", str(tmp / "spark"), "--quiet"])
        recorded = read_topic_ids(state.cluster("dr"), state.name, state.mirrors[0].name)
        assert sorted(recorded) == sorted([DELETED, RECREATED]), recorded
        mirror.stop(tmp / "spark")
        yield kafka_pair, path, tmp / "spark"
    finally:
        mirror.stop(tmp / "spark")


def test_records_deleted_before_they_were_mirrored_fail_verify_with_partition_and_count(stopped_mirror, capsys):
    pair, spec, state_dir = stopped_mirror
    code, task, out = _verify(capsys, spec, state_dir)
    assert task["status"] == "ok", out  # nothing lost yet (the stopped mirror fails verify.mirror)

    _produce(pair.primary.bootstrap, DELETED, RECORDS, RECORDS)  # 50 more per partition, never mirrored
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        last_copy = dr.last_record(DELETED, 0)
        source_end = src.watermarks(DELETED, 0)[1]
        (original,) = [r for r in src.read(DELETED, 0, 0, source_end) if r.content() == last_copy.content()]
    position = original.offset + 1  # the mirror copied the source's offsets below this one
    log_start = source_end - 10  # deletes everything the mirror had not copied but the last 10 records
    admin = AdminClient({"bootstrap.servers": pair.primary.bootstrap})
    for future in admin.delete_records([TopicPartition(DELETED, 0, log_start)]).values():
        future.result(30)
    expected = log_start - position
    assert expected > 0

    code, task, out = _verify(capsys, spec, state_dir)
    assert code == 1, out
    assert task["status"] == "failed", out
    message = " ".join(o["message"] for o in task["outcomes"])
    assert f"{DELETED}-0: {expected} records (offsets {position}-{log_start - 1}) deleted before they were mirrored" in message
    assert f"{DELETED}-1" not in message, "nothing was deleted there"
    lost = [x for x in _report(out)["loss"] if x["topic"] == DELETED]
    assert [(x["kind"], x["partition"], x["records"]) for x in lost] == [("deleted", 0, expected)]


def test_a_recreated_source_topic_fails_verify_naming_it(stopped_mirror, capsys):
    pair, spec, state_dir = stopped_mirror
    admin = KafkaAdmin(_cluster(pair, "primary"))
    admin.delete_topic(RECREATED)

    def recreate() -> list[str]:
        try:
            admin.create_topic(RECREATED, PARTITIONS, -1, {})
            return []
        except KafkaOperationFailed as exc:  # TOPIC_ALREADY_EXISTS while the deletion is still under way
            return [str(exc)]
    _wait(recreate, RECREATE_TIMEOUT, f"{RECREATED} to be created again")
    _produce(pair.primary.bootstrap, RECREATED, 0, 10)

    code, task, out = _verify(capsys, spec, state_dir)
    assert code == 1, out
    assert task["status"] == "failed", out
    assert f"{RECREATED} deleted and recreated on primary" in out and "topic ID" in out, out
    lost = [x for x in _report(out)["loss"] if x["topic"] == RECREATED]
    assert [(x["kind"], x["partition"]) for x in lost] == [("recreated", None)]
