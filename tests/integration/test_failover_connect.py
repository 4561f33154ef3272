"""The failover playbook with engine ``connect``: MirrorMaker 2's connectors on a real Connect worker.

The translation reads MM2's own offset-syncs topic (``offsetLagMax: 10``, so groups stop between
syncs and MM2's translation would have them re-read); the playbook stops the connectors (KIP-875
STOPPED, configs kept). Exactness is judged independently of the playbook, by reading the records
on both clusters around each committed offset, as ``test_failover.py`` does for the Spark mirror.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mm2spec.live.connect import ConnectClient
from mm2spec.live.dr_state import clear_state
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.mm2.retry import retry_call
from mm2spec.render import connectors, render_files, write_files
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import write_spec
from test_failover import _report, _run, _wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: MM2 names its internal topics after the cluster aliases: aliases of this module's own keep its
#: offset-syncs and checkpoints topics apart from the other modules' on the shared clusters.
SOURCE, TARGET = ALIASES = ("east", "west")
#: A connector's tasks start within seconds on an idle worker; a loaded two-core machine needs more.
RUNNING_TIMEOUT = 180.0
#: Copying a few hundred records takes seconds once the source task runs.
CATCH_UP_TIMEOUT = 180.0
#: A fresh cluster creates and loads __consumer_offsets on the first group commit: seconds when
#: idle, over a minute on two loaded cores (NOT_COORDINATOR until then).
COORDINATOR_TIMEOUT_S = 180.0
TOPIC = "foc-orders"
PARTITIONS = 3
RECORDS = 600
GROUPS = [f"foc-app-{i}" for i in range(6)]
#: Connect writes the offset sync of a partition's latest record when it commits source offsets
#: (offset.flush.interval.ms, 60 s by default): low, so syncs near the end exist within the test.
WORKER = {"config": {"offset.flush.interval.ms": "1000"}}
MIRROR = {"offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False, "heartbeats": False,
          "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5}


def _produce(bootstrap: str) -> None:
    """Repeating keys and values: only the timestamp and the seq header tell records apart."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    now = int(time.time() * 1000)  # recent: older records would fall to the topic's retention
    for i in range(RECORDS):
        producer.produce(TOPIC, key=f"k{i % 7}".encode(), value=f"v{i % 5}".encode(), partition=i % PARTITIONS,
                         headers=[("seq", str(i).encode())], timestamp=now - 60_000 + i)
    assert producer.flush(60) == 0


def _commit(cluster, group: str, offsets: dict[int, int]) -> None:
    """Commit without joining (the group has no members). A consumer's synchronous commit waits
    out a coordinator still loading on a fresh cluster, where AdminClient's alter-offsets call
    gives up after its request timeout."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        retry_call(lambda: consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                                           asynchronous=False), deadline_s=COORDINATOR_TIMEOUT_S)
    finally:
        consumer.close()


def _connector_states(client: ConnectClient, names: list[str]) -> dict[str, str]:
    """Each connector's state, with its tasks' when any is not RUNNING (a FAILED task shows)."""
    states = {}
    for name in names:
        status = client.connector_status(name)
        tasks = [t["state"] for t in (status or {}).get("tasks", [])]
        states[name] = "ABSENT" if status is None else f"{status['connector']['state']} tasks={tasks}"
    return states


def _lagging(reader_src: RecordReader, reader_dr: RecordReader) -> list[str]:
    """Partitions whose last source record is not the last record on DR, with what each side holds."""
    if not KafkaAdmin(reader_dr.cluster).topics([TOPIC], with_configs=False):
        return [f"{TOPIC} not on {TARGET} yet"]
    behind = []
    for p in range(PARTITIONS):
        last = reader_src.last_record(TOPIC, p)
        copy = reader_dr.last_record(TOPIC, p)
        if copy is None or copy.content() != last.content():
            behind.append(f"{TOPIC}-{p}: source ends {last}, {TARGET} ends {copy}")
    return behind


@pytest.fixture(scope="module")
def connect_failover(kafka_pair, connect_worker, tmp_path_factory):
    """Seeded topic, groups committed at random offsets on the source, MM2 running on a worker
    started from the spec's rendered worker config; the connectors are deleted afterwards."""
    tmp = tmp_path_factory.mktemp("failover-connect")
    spec = write_spec(tmp / "dr.yaml", kafka_pair, [TOPIC], ["foc-app-.*"], engine="connect",
                      name="it-failover-connect", connect=WORKER, aliases=ALIASES, mirror=MIRROR)
    state = load_desired_state(spec, None)
    KafkaAdmin(state.cluster(SOURCE)).create_topic(TOPIC, PARTITIONS, -1, {})
    _produce(kafka_pair.primary.bootstrap)
    rng = random.Random(11)
    committed = {g: {p: rng.randrange(1, RECORDS // PARTITIONS) for p in range(PARTITIONS)} for g in GROUPS}
    for group, offsets in committed.items():
        _commit(state.cluster(SOURCE), group, offsets)

    write_files(render_files(state), tmp / "rendered")
    worker = connect_worker(tmp / "rendered" / "connect-distributed.properties",
                            overrides={"listeners": "http://127.0.0.1:0"})
    client = ConnectClient(worker.url)
    names = [c["name"] for c in connectors(state)]
    for connector in connectors(state):
        client.put_connector_config(connector["name"], connector["config"])
    try:
        yield state, spec, worker.url, committed, names
    finally:
        for name in names:
            client.delete_connector(name)
        clear_state(state.cluster(TARGET), state.name, state.mirrors[0].name)  # other modules' failovers start clean


def test_planned_failover_on_mm2_resumes_every_group_at_the_next_record(connect_failover, capsys):
    state, spec, url, committed, names = connect_failover
    client = ConnectClient(url)
    _wait(lambda: [f"{n}: {s}" for n, s in _connector_states(client, names).items()
                   if not s.startswith("RUNNING tasks=['RUNNING")], RUNNING_TIMEOUT, "the MM2 connectors to run")
    with RecordReader(state.cluster(SOURCE)) as src, RecordReader(state.cluster(TARGET)) as dr:
        _wait(lambda: _lagging(src, dr), CATCH_UP_TIMEOUT, "MM2 to copy the seed records")

    args = ("failover", str(spec), "--connect-url", url, "--yes")
    code, out = _run(capsys, *args, "--format", "json", "--diff")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
    assert report["totals"]["partitions"] == len(GROUPS) * PARTITIONS
    assert report["totals"]["mm2Reread"] > 0, "offsets between MM2's syncs: MM2's own translation would re-read"
    assert all(s.startswith("STOPPED") for s in _connector_states(client, names).values()), \
        _connector_states(client, names)

    dr_offsets = {g: dict(s.offsets) for g, s in GroupOffsets(state.cluster(TARGET)).describe(GROUPS).items()}
    with RecordReader(state.cluster(SOURCE)) as src, RecordReader(state.cluster(TARGET)) as dr:
        for group, offsets in committed.items():
            for partition, offset in offsets.items():
                resume = dr_offsets[group][(TOPIC, partition)]
                consumed = src.read(TOPIC, partition, offset - 1, offset)[0]
                following = src.read(TOPIC, partition, offset, offset + 1)[0]
                assert dr.read(TOPIC, partition, resume - 1, resume)[0].content() == consumed.content(), group
                assert dr.read(TOPIC, partition, resume, resume + 1)[0].content() == following.content(), group

    # A re-run changes nothing: every task ok or skipped, the connectors still stopped.
    code, out = _run(capsys, *args, "--format", "json")
    assert code == 0, out
    assert {t["status"] for t in _report(out)["tasks"]} <= {"ok", "skipped"}, _report(out)["tasks"]
    assert all(s.startswith("STOPPED") for s in _connector_states(client, names).values())


def _ends(cluster) -> list[int]:
    with RecordReader(cluster) as reader:
        return [reader.watermarks(TOPIC, p)[1] for p in range(PARTITIONS)]


def _tail(cluster, partition: int, start: int) -> list[tuple]:
    with RecordReader(cluster) as reader:
        return [r.content() for r in reader.read(TOPIC, partition, start, reader.watermarks(TOPIC, partition)[1])]


def test_failback_on_mm2_copies_dr_records_back_and_resumes_the_connectors(connect_failover, capsys):
    """After the failover above: clients write and consume on DR; failback brings exactly those
    records back, every group to the next record on the source, and MM2 resumes from the source's
    end (new source records reach DR once; what came back is not mirrored again)."""
    state, spec, url, _committed, names = connect_failover
    source, target = state.cluster(SOURCE), state.cluster(TARGET)
    switch_source, switch_dr = _ends(source), _ends(target)
    producer = Producer({"bootstrap.servers": target.bootstrap, "enable.idempotence": True})
    now = int(time.time() * 1000)
    for i in range(150):
        producer.produce(TOPIC, key=f"d{i % 4}".encode(), value=b"on-dr", partition=i % PARTITIONS,
                         headers=[("seq", f"dr{i}".encode())], timestamp=now + i)
    assert producer.flush(60) == 0
    dr_ends = _ends(target)
    rng = random.Random(3)
    dr_offsets = {g: {p: rng.randrange(switch_dr[p], dr_ends[p] + 1) for p in range(PARTITIONS)} for g in GROUPS}
    for group, offsets in dr_offsets.items():
        _commit(target, group, offsets)

    code, out = _run(capsys, "failback", str(spec), "--connect-url", url, "--format", "json", "--yes")
    assert code == 0, out
    assert _report(out)["totals"]["skipped"] == 0, out
    for p in range(PARTITIONS):
        assert _tail(source, p, switch_source[p]) == _tail(target, p, switch_dr[p])
    back = {g: dict(s.offsets) for g, s in GroupOffsets(source).describe(GROUPS).items()}
    with RecordReader(source) as src, RecordReader(target) as dr:
        for group, offsets in dr_offsets.items():
            for partition, offset in offsets.items():
                resume = back[group][(TOPIC, partition)]
                consumed = dr.read(TOPIC, partition, offset - 1, offset)[0]
                assert src.read(TOPIC, partition, resume - 1, resume)[0].content() == consumed.content(), group
                assert resume - switch_source[partition] == offset - switch_dr[partition], group
    _wait(lambda: [f"{n}: {s}" for n, s in _connector_states(ConnectClient(url), names).items()
                   if not s.startswith("RUNNING tasks=['RUNNING")], RUNNING_TIMEOUT, "MM2 to run again")

    # No loop: new source records reach DR once, and nothing else does.
    before = _ends(target)
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})
    for i in range(30):
        producer.produce(TOPIC, key=b"after", value=f"after{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    with RecordReader(source) as src, RecordReader(target) as dr:
        _wait(lambda: _lagging(src, dr), CATCH_UP_TIMEOUT, "MM2 to copy the new records")
    assert sum(_ends(target)) - sum(before) == 30
    for p in range(PARTITIONS):
        assert all(v[1].startswith(b"after") for v in _tail(target, p, before[p]))
