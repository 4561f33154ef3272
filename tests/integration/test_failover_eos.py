"""The failover playbook over an exactly-once Spark mirror: DR's partitions hold transaction markers
(offsets with no record) after every batch and end in one, which the drain and the translation
read past (each cluster read for all partitions at once: ``RecordReader.read_many``). Every group
must resume on DR at exactly the next record, judged by reading both clusters (read committed on DR).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.cli import main
from mm2spec.live.records import GroupOffsets, RecordReader, retrying
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
ALIASES = ("eos-primary", "eos-dr")  # MM2's internal topics apart from the other modules'
TOPIC = "foe-orders"
PARTITIONS = 3
RECORDS = 300
GROUPS = [f"foe-app-{i}" for i in range(4)]
LOOK = 8  # offsets looked at around a resume point: past the markers there


def _cluster(pair, alias: str) -> Cluster:
    return Cluster(alias, ((pair.primary if alias == ALIASES[0] else pair.dr).bootstrap,))


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    now = int(time.time() * 1000)
    for i in range(RECORDS):
        # Repeating keys and values: the seq header and the timestamp tell records apart.
        producer.produce(TOPIC, key=f"k{i % 7}".encode(), value=f"v{i % 5}".encode(), partition=i % PARTITIONS,
                         headers=[("seq", str(i).encode())], timestamp=now - 60_000 + i)
    assert producer.flush(60) == 0


def _lagging(pair) -> list[str]:
    if TOPIC not in AdminClient({"bootstrap.servers": pair.dr.bootstrap}).list_topics(timeout=30).topics:
        return [f"{TOPIC} not on dr yet"]
    with RecordReader(_cluster(pair, ALIASES[0])) as src, \
            RecordReader(_cluster(pair, ALIASES[1]), read_committed=True) as dr:
        return [f"{TOPIC}-{p}" for p in range(PARTITIONS)
                if (copy := dr.last_record(TOPIC, p)) is None or copy.content() != src.last_record(TOPIC, p).content()]


def test_an_exactly_once_mirror_fails_over_exactly(kafka_pair, tmp_path, capsys):
    admin = AdminClient({"bootstrap.servers": kafka_pair.primary.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, -1)]).values():
        future.result(30)
    _produce(kafka_pair.primary.bootstrap)
    rng = random.Random(11)
    committed = {g: {(TOPIC, p): rng.randrange(1, RECORDS // PARTITIONS) for p in range(PARTITIONS)} for g in GROUPS}
    for group, offsets in committed.items():
        # A consumer's commit, retried: a fresh cluster's group coordinator may still be loading.
        consumer = Consumer({"bootstrap.servers": kafka_pair.primary.bootstrap, "group.id": group,
                             "enable.auto.commit": False})
        try:
            retrying(lambda: consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                             asynchronous=False), f"commit {group}", _cluster(kafka_pair, ALIASES[0]))
        finally:
            consumer.close()
    spec = spec_for(kafka_pair, [TOPIC], ["foe-app-.*"], name="it-failover-eos", aliases=ALIASES,
                    mirror={"offsetLagMax": 10, "syncGroupOffsets": False, "exactlyOnce": True,
                            "emitCheckpointsIntervalSeconds": 1})
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp_path / "cp")}
    path = tmp_path / "dr.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    state_dir = tmp_path / "spark"
    mirror.start(spark_job_config(load_desired_state(path, None)), state_dir=state_dir, wait_running=START_TIMEOUT)
    try:
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while lagging := _lagging(kafka_pair):
            assert time.monotonic() < deadline, f"the mirror did not copy the seed records: {lagging}"
            time.sleep(0.5)

        code = main(["failover", str(path), "--state-dir", str(state_dir), "--yes", "--format", "json"])
        out = capsys.readouterr()
        assert code == 0, out.out[-3000:] + out.err[-3000:]
        report = json.loads(out.out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0
        assert report["totals"]["partitions"] == len(GROUPS) * PARTITIONS
    finally:
        mirror.stop(state_dir)

    resumes = GroupOffsets(_cluster(kafka_pair, ALIASES[1])).describe(GROUPS)
    with RecordReader(_cluster(kafka_pair, ALIASES[0])) as src, \
            RecordReader(_cluster(kafka_pair, ALIASES[1]), read_committed=True) as dr:
        markers = 0
        for group, offsets in committed.items():
            for (topic, partition), offset in offsets.items():
                resume = resumes[group].offsets[(topic, partition)]
                consumed = src.read(topic, partition, offset - 1, offset)[0]
                following = src.read(topic, partition, offset, offset + 1)[0]
                before = dr.read(topic, partition, max(0, resume - LOOK), resume)
                after = dr.read(topic, partition, resume, resume + LOOK)
                assert before[-1].content() == consumed.content(), (group, partition, offset, resume)
                assert after[0].content() == following.content(), (group, partition, offset, resume)
        for partition in range(PARTITIONS):
            low, high = dr.watermarks(TOPIC, partition)
            markers += (high - low) - len(dr.read(TOPIC, partition, low, high))
        assert markers > 0, "an exactly-once mirror writes transaction markers on DR"
