"""The failback playbook on real clusters and a real Spark mirror.

After a failover, clients write to DR and consume there; failback must bring exactly those new
records back to the primary (not the history), move every group to exactly the next record on
the primary, and restart the forward mirror from the primary's end so nothing loops back. Judged
independently of the playbook: by reading both clusters' records.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.live.dr_state import read_states
from mm2spec.live.records import GroupOffsets, RecordReader, retrying
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for
from test_failover import _report, _run, _wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
PARTITIONS = 3
SEED = 300
ON_DR = 240
MORE_ON_DR = 60
GROUPS = [f"fb-app-{i}" for i in range(4)]
NAME = "it-failback"


def _spec(tmp: Path, pair, topic: str, name: str = NAME) -> Path:
    spec = spec_for(pair, [topic], ["fb-app-.*"], name=name,
                    mirror={"offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False,
                            "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5})
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint")}
    path = tmp / "dr.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cluster(pair, alias: str) -> Cluster:
    return Cluster(alias, (getattr(pair, alias).bootstrap,))


def _produce(bootstrap: str, topic: str, start: int, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=f"{tag}{i % 5}".encode(), partition=i % PARTITIONS,
                         headers=[("seq", f"{tag}{i}".encode())], timestamp=now - 60_000 + i)
    assert producer.flush(60) == 0


def _commit(pair, alias: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": getattr(pair, alias).bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        retrying(lambda: consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                         asynchronous=False), f"commit {group}", _cluster(pair, alias))
    finally:
        consumer.close()


def _records(pair, alias: str, topic: str, partition: int, start: int = 0) -> list:
    with RecordReader(_cluster(pair, alias)) as reader:
        low, high = reader.watermarks(topic, partition)
        return reader.read(topic, partition, max(low, start), high)


def _ends(pair, alias: str, topic: str) -> list[int]:
    with RecordReader(_cluster(pair, alias)) as reader:
        return [reader.watermarks(topic, p)[1] for p in range(PARTITIONS)]


def _offsets(pair, alias: str) -> dict:
    return {g: dict(s.offsets) for g, s in GroupOffsets(_cluster(pair, alias)).describe(GROUPS).items()}


def _caught_up(pair, topic: str) -> list[str]:
    if topic not in AdminClient({"bootstrap.servers": pair.dr.bootstrap}).list_topics(timeout=30).topics:
        return [f"{topic} not on dr yet"]
    behind = []
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        for p in range(PARTITIONS):
            last, copy = src.last_record(topic, p), dr.last_record(topic, p)
            if last is not None and (copy is None or copy.content() != last.content()):
                behind.append(f"{topic}-{p}")
    return behind


def _setup(pair, tmp: Path, topic: str, name: str = NAME):
    admin = AdminClient({"bootstrap.servers": pair.primary.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, -1)]).values():
        future.result(30)
    _produce(pair.primary.bootstrap, topic, 0, SEED, "seed")
    rng = random.Random(11)
    for group in GROUPS:
        _commit(pair, "primary", topic, group, {p: rng.randrange(1, SEED // PARTITIONS) for p in range(PARTITIONS)})
    spec = _spec(tmp, pair, topic, name)
    job = mirror.start(spark_job_config(load_desired_state(spec, None)), state_dir=tmp / "spark",
                       wait_running=START_TIMEOUT)
    _wait(lambda: _caught_up(pair, topic), CATCH_UP_TIMEOUT, "the mirror to copy the seed records", job)
    return spec


def _clients_on_dr(pair, topic: str, rng: random.Random) -> None:
    """After the failover: producers write to DR, consumers read some of it and commit there."""
    _produce(pair.dr.bootstrap, topic, 0, ON_DR, "dr")
    ends = _ends(pair, "dr", topic)
    for group in GROUPS[:-1]:  # the last group consumed nothing on DR: it stays where failover put it
        _commit(pair, "dr", topic, group, {p: rng.randrange(ends[p] - ON_DR // PARTITIONS + 1, ends[p] + 1)
                                           for p in range(PARTITIONS)})


def _next(reader: RecordReader, topic: str, partition: int, offset: int) -> list:
    """The record at ``offset``, or none at the partition's end."""
    return reader.read(topic, partition, offset, min(offset + 1, reader.watermarks(topic, partition)[1]))


def _assert_groups_resume_exactly(pair, topic: str, dr_offsets: dict) -> None:
    source = _offsets(pair, "primary")
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        for group, offsets in dr_offsets.items():
            for (t, partition), offset in offsets.items():
                if t != topic:  # the groups also consumed the other test's topic
                    continue
                resume = source[group][(t, partition)]
                consumed = dr.read(topic, partition, offset - 1, offset)
                assert src.read(topic, partition, resume - 1, resume)[0].content() == consumed[0].content(), (group, partition)
                following = _next(dr, topic, partition, offset)
                after = _next(src, topic, partition, resume)
                assert [r.content() for r in after] == [r.content() for r in following], (group, partition)


def test_planned_failback_copies_only_new_records_and_moves_groups_exactly(kafka_pair, tmp_path, capsys, request):
    pair, topic = kafka_pair, "fb-orders"
    state_dir = str(tmp_path / "spark")
    request.addfinalizer(lambda: mirror.stop(state_dir))  # the job the failback restarts, also when a check fails
    spec = _setup(pair, tmp_path, topic)
    code, out = _run(capsys, "failover", str(spec), "--state-dir", state_dir, "--yes")
    assert code == 0, out
    switch_primary, switch_dr = _ends(pair, "primary", topic), _ends(pair, "dr", topic)
    _clients_on_dr(pair, topic, random.Random(5))
    dr_offsets = _offsets(pair, "dr")
    args = ("failback", str(spec), "--state-dir", state_dir, "--yes")

    # --check: says what would be copied, writes nothing.
    code, out = _run(capsys, *args, "--check", "--format", "json")
    assert code == 2, out
    assert f"would copy {ON_DR} records back" in out, out
    assert _ends(pair, "primary", topic) == switch_primary
    assert read_states(_cluster(pair, "dr"), NAME)["primary-to-dr"].phase == "failed-over"
    assert not mirror.status(state_dir).running

    # Interrupted after the first copy (a playbook that stops there), while clients still write
    # on DR: the full run resumes from the source's end and copies each record once.
    partial = tmp_path / "partial.yaml"
    partial.write_text(yaml.safe_dump({"name": "partial", "tasks": [
        {"name": "preflight", "failback.preflight": {}}, {"name": "stranded", "failback.stranded": {}},
        {"name": "begin", "failback.begin": {}}, {"name": "copy", "failback.copy": {}}]}))
    code, out = _run(capsys, "playbook", "run", str(partial), str(spec), "--state-dir", state_dir, "--yes")
    assert code == 0, out
    assert sum(_ends(pair, "primary", topic)) - sum(switch_primary) == ON_DR
    _produce(pair.dr.bootstrap, topic, ON_DR, MORE_ON_DR, "dr")
    dr_before = _ends(pair, "dr", topic)

    code, out = _run(capsys, *args, "--format", "json", "--diff")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]

    # The primary holds its history plus exactly DR's records since the switch, in order.
    for p in range(PARTITIONS):
        came_back = [r.content() for r in _records(pair, "primary", topic, p, switch_primary[p])]
        written_on_dr = [r.content() for r in _records(pair, "dr", topic, p, switch_dr[p])]
        assert came_back == written_on_dr and came_back, p
    assert sum(_ends(pair, "primary", topic)) - sum(switch_primary) == ON_DR + MORE_ON_DR
    _assert_groups_resume_exactly(pair, topic, dr_offsets)
    assert "primary-to-dr" not in read_states(_cluster(pair, "dr"), NAME)
    assert mirror.status(state_dir).running

    # The forward mirror resumed at the primary's end: new primary records reach DR once, and the
    # records that came back are not mirrored again (no loop).
    _produce(pair.primary.bootstrap, topic, 0, 30, "after")
    _wait(lambda: _caught_up(pair, topic), CATCH_UP_TIMEOUT, "the forward mirror to copy new records",
          SimpleNamespace(log_file=Path(state_dir) / "driver.log"))
    assert sum(_ends(pair, "dr", topic)) == sum(dr_before) + 30
    for p in range(PARTITIONS):
        mirrored = [r.content() for r in _records(pair, "dr", topic, p, dr_before[p])]
        assert mirrored == [r.content() for r in _records(pair, "primary", topic, p, _ends(pair, "primary", topic)[p]
                                                          - len(mirrored))]

    # Run again: nothing to do.
    code, out = _run(capsys, *args, "--format", "json")
    assert code == 0, out
    assert {t["status"] for t in _report(out)["tasks"]} <= {"ok", "skipped"}, _report(out)["tasks"]
    mirror.stop(state_dir)


def _strand(pair, spec: Path, state_dir: str, topic: str, capsys) -> list[int]:
    """Stop the mirror, write records on the primary that never reach DR, fail over unplanned."""
    mirror.stop(state_dir)
    primary_before = _ends(pair, "primary", topic)
    _produce(pair.primary.bootstrap, topic, 0, 30, "stranded")
    code, out = _run(capsys, "failover", str(spec), "--state-dir", state_dir, "--source-unreachable", "--yes")
    assert code == 0, out
    return [e - b for e, b in zip(_ends(pair, "primary", topic), primary_before)]


def test_stranded_records_refused_then_kept_then_rebuilt(kafka_pair, tmp_path, capsys, request):
    pair, topic = kafka_pair, "fb-stranded"
    state_dir = str(tmp_path / "spark")
    request.addfinalizer(lambda: mirror.stop(state_dir))
    spec = _setup(pair, tmp_path, topic, name=f"{NAME}-stranded")
    args = ("failback", str(spec), "--state-dir", state_dir, "--yes")
    stranded = _strand(pair, spec, state_dir, topic, capsys)
    _clients_on_dr(pair, topic, random.Random(6))

    # Default: refused with the counts, nothing changed.
    primary_ends = _ends(pair, "primary", topic)
    code, out = _run(capsys, *args)
    assert code == 1, out
    assert f"{sum(stranded)} records on primary never reached DR" in out, out
    for p in range(PARTITIONS):
        assert f"{topic}-{p}: {stranded[p]}" in out, out
    assert _ends(pair, "primary", topic) == primary_ends

    # keep: the stranded records stay, before the records that come back; groups skip past them.
    dr_offsets = _offsets(pair, "dr")
    switch_dr = [s[4] for s in read_states(_cluster(pair, "dr"), f"{NAME}-stranded")["primary-to-dr"].positions]
    code, out = _run(capsys, *args, "--stranded=keep", "--format", "json")
    assert code == 0, out
    # (These record checks were dropped by accident with the faster failback translation, 59a61e2.)
    assert _report(out)["totals"]["skipped"] == 0, out
    for p in range(PARTITIONS):
        came_back = [r.content() for r in _records(pair, "primary", topic, p, primary_ends[p])]
        assert came_back == [r.content() for r in _records(pair, "dr", topic, p, switch_dr[p])]
        kept = _records(pair, "primary", topic, p, primary_ends[p] - stranded[p])[:stranded[p]]
        assert all(r.value.startswith(b"stranded") for r in kept)
    # The group that consumed nothing on DR sits at MM2's rounded-down checkpoint there; on the
    # primary it is already further, and a commit never moves a group backwards.
    _assert_groups_resume_exactly(pair, topic, {g: o for g, o in dr_offsets.items() if g != GROUPS[-1]})

    # rebuild: a second unplanned failover strands records again; the primary topic is recreated
    # from DR's whole log, so it ends up a copy of DR, record for record.
    _wait(lambda: _caught_up(pair, topic), CATCH_UP_TIMEOUT, "the forward mirror after failback")
    _strand(pair, spec, state_dir, topic, capsys)
    _clients_on_dr(pair, topic, random.Random(7))
    code, out = _run(capsys, *args, "--stranded=rebuild", "--check")
    assert code == 2 and "would delete and rebuild from DR" in out, out
    code, out = _run(capsys, *args, "--stranded=rebuild")
    assert code == 0, out
    for p in range(PARTITIONS):
        assert [r.content() for r in _records(pair, "primary", topic, p)] == \
               [r.content() for r in _records(pair, "dr", topic, p)]
    assert "primary-to-dr" not in read_states(_cluster(pair, "dr"), f"{NAME}-stranded")
    mirror.stop(state_dir)
