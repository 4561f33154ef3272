"""Reads of many partitions at once (issue 27, RTO): one consumer assigned to every partition of a
read, ranges that end in transaction markers finished by the position check, partitions paused
at their end and resumed for the next read; the bounds in one request per kind; the drain and
the translation's prefetch reading each cluster once, not once per partition."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live import records as records_module
from mm2spec.live.records import RecordReader, last_records
from mm2spec.live.types import Record
from mm2spec.ops.modules import mirror as mirror_module
from mm2spec.ops.modules.offsets import Windows
from mm2spec.ops.modules.topology import MirroredPartition
from mm2spec.spec.model import Cluster

CLUSTER = Cluster("dr", ("127.0.0.1:1",))


class Message:
    def __init__(self, topic: str, partition: int, offset: int):
        self._at = (topic, partition, offset)

    def topic(self):
        return self._at[0]

    def partition(self):
        return self._at[1]

    def offset(self):
        return self._at[2]

    def error(self):
        return None

    def key(self):
        return b"k"

    def value(self):
        return f"{self._at}".encode()

    def timestamp(self):
        return 1, 1000 + self._at[2]

    def headers(self):
        return None


class FakeConsumer:
    """librdkafka's consumer as the reads use it: a partition's offsets with no record (transaction
    markers) are skipped and move the position on; a pause outlives unassign (as librdkafka's
    does); ``silent`` partitions never deliver (a broker that does not answer)."""

    def __init__(self, logs: dict[tuple[str, int], tuple[list[int], int]], silent=()):
        self.logs, self.silent = logs, set(silent)
        self.fetch: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()
        self.consume_calls, self.assignments = 0, []

    def assign(self, partitions):
        self.assignments.append(sorted((tp.topic, tp.partition) for tp in partitions))
        self.fetch = {(tp.topic, tp.partition): tp.offset for tp in partitions}

    def unassign(self):
        self.fetch = {}

    def pause(self, partitions):
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions):
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}

    def consume(self, num_messages, timeout):
        self.consume_calls += 1
        out = []
        for key, position in sorted(self.fetch.items()):
            if key in self.paused or key in self.silent:
                continue
            offsets, end = self.logs[key]
            for offset in [o for o in offsets if o >= position]:
                if len(out) == num_messages:
                    return out
                out.append(Message(*key, offset))
                self.fetch[key] = offset + 1
            self.fetch[key] = end  # only markers left: the position moves past them
        return out

    def position(self, partitions):
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=self.fetch.get((tp.topic, tp.partition)))
                for tp in partitions]

    def close(self):
        pass


class FakeAdmin:
    """ListOffsets over the same logs, counting requests."""

    def __init__(self, logs):
        self.logs, self.requests = logs, []

    def list_offsets(self, request, isolation_level, request_timeout):
        self.requests.append((len(request), isolation_level))
        found = {}
        for tp, spec in request.items():
            offsets, end = self.logs[(tp.topic, tp.partition)]
            future = Future()
            future.set_result(SimpleNamespace(offset=offsets[0] if "Earliest" in type(spec).__name__ else end))
            found[tp] = future
        return found


def _reader(monkeypatch, logs, silent=(), timeout=15.0, read_committed=True):
    consumer, admin = FakeConsumer(logs, silent), FakeAdmin(logs)
    monkeypatch.setattr(records_module, "Consumer", lambda _config: consumer)
    monkeypatch.setattr(records_module, "AdminClient", lambda _config: admin)
    monkeypatch.setattr(records_module, "_CONSUME_WAIT_S", 0.0)
    return RecordReader(CLUSTER, secrets=lambda _name: None, read_committed=read_committed, timeout=timeout), consumer, admin


def _eos_log(records: int, every: int = 10) -> tuple[list[int], int]:
    """An exactly-once writer's partition: a marker after each ``every`` records, one at the end."""
    offsets, offset = [], 0
    for i in range(records):
        offsets.append(offset)
        offset += 1
        if (i + 1) % every == 0:
            offset += 1
    return offsets, offset + (0 if records % every == 0 else 1)


def test_many_partitions_are_read_with_one_assignment_and_ranges_ending_in_markers_end(monkeypatch):
    logs = {("t", p): _eos_log(95 + p) for p in range(6)}
    reader, consumer, _admin = _reader(monkeypatch, logs)
    found = reader.read_many({tp: (3, end) for tp, (_offsets, end) in logs.items()})
    assert consumer.assignments == [sorted(logs)]
    for tp, (offsets, _end) in logs.items():
        assert [r.offset for r in found[tp]] == [o for o in offsets if o >= 3]
    assert consumer.consume_calls <= 3
    assert consumer.paused == set() and consumer.fetch == {}


def test_a_range_ends_before_the_partition_ends_and_the_next_read_of_it_still_delivers(monkeypatch):
    logs = {("t", 0): _eos_log(50), ("t", 1): _eos_log(50)}
    reader, consumer, _admin = _reader(monkeypatch, logs)
    first = reader.read_many({("t", 0): (0, 12), ("t", 1): (5, 30)})
    assert [r.offset for r in first[("t", 0)]] == [o for o in logs[("t", 0)][0] if o < 12]
    assert [r.offset for r in first[("t", 1)]] == [o for o in logs[("t", 1)][0] if 5 <= o < 30]
    # Each was paused at its end; a pause outlives the assignment, so it is lifted after the read.
    assert consumer.paused == set()
    assert [r.offset for r in reader.read("t", 0, 12, 25)] == [o for o in logs[("t", 0)][0] if 12 <= o < 25]


def test_empty_ranges_are_not_assigned(monkeypatch):
    reader, consumer, _admin = _reader(monkeypatch, {("t", 0): _eos_log(5)})
    assert reader.read_many({("t", 0): (4, 4)}) == {("t", 0): []}
    assert consumer.assignments == []


def test_a_partition_that_delivers_nothing_fails_naming_it_and_where_it_stopped(monkeypatch):
    logs = {("t", 0): _eos_log(20), ("t", 1): _eos_log(20)}
    reader, consumer, _admin = _reader(monkeypatch, logs, silent={("t", 1)}, timeout=0.05)
    with pytest.raises(KafkaOperationFailed, match=r'cluster "dr": reading t-1 stopped at offset 2 before 22'):
        reader.read_many({("t", 0): (0, 22), ("t", 1): (2, 22)})
    assert consumer.paused == set() and consumer.fetch == {}


def test_bounds_of_many_partitions_are_two_requests_at_the_readers_isolation(monkeypatch):
    logs = {("t", p): ([p, p + 1], 10 + p) for p in range(4)}
    reader, _consumer, admin = _reader(monkeypatch, logs)
    assert reader.bounds([("t", 3), ("t", 0), ("t", 3)]) == {("t", 0): (0, 10), ("t", 3): (3, 13)}
    assert reader.bounds(logs) == {("t", p): (p, 10 + p) for p in range(4)}
    assert [n for n, _isolation in admin.requests] == [2, 2, 4, 4]
    assert {isolation.name for _n, isolation in admin.requests} == {"READ_COMMITTED"}


def test_last_records_look_back_past_the_markers_of_each_partition_in_one_read(monkeypatch):
    logs = {("t", 0): _eos_log(30), ("t", 1): ([], 0), ("t", 2): ([0, 1], 3)}
    reader, consumer, admin = _reader(monkeypatch, logs)
    logs[("t", 1)] = ([0], 0)  # an empty partition: log start = end
    found = last_records(reader, list(logs))
    assert found[("t", 0)].offset == logs[("t", 0)][0][-1] and found[("t", 2)].offset == 1
    assert found[("t", 1)] is None
    assert len(consumer.assignments) == 1 and len(admin.requests) == 2


class InMemory:
    """A cluster's partitions for the modules' readers: Records by (topic, partition), counting calls."""

    def __init__(self, logs: dict[tuple[str, int], list[Record]]):
        self.logs, self.calls = logs, []

    def watermarks(self, topic, partition):
        self.calls.append(("watermarks", topic, partition))
        records = self.logs[(topic, partition)]
        return (records[0].offset, records[-1].offset + 2) if records else (0, 0)

    def bounds(self, partitions):
        self.calls.append(("bounds", len(list(partitions))))
        return {tp: self.watermarks(*tp) for tp in partitions}

    def read(self, topic, partition, start, end):
        self.calls.append(("read", topic, partition, start, end))
        return [r for r in self.logs[(topic, partition)] if start <= r.offset < end]

    def read_many(self, ranges):
        self.calls.append(("read_many", dict(ranges)))
        return {tp: [r for r in self.logs[tp] if start <= r.offset < end] for tp, (start, end) in ranges.items()}


def _records(topic: str, partition: int, count: int, tag: str = "") -> list[Record]:
    return [Record(topic, partition, 2 * i, b"k", f"{tag}{i}".encode(), 1000 + i, ()) for i in range(count)]


def test_the_prefetch_reads_every_partition_in_one_pass_per_range_and_nothing_twice():
    cluster = InMemory({("t", p): _records("t", p, 100) for p in range(3)})
    windows = Windows(cluster)
    windows.prefetch({("t", 0): [(0, 20), (100, 140)], ("t", 1): [(10, 50)], ("t", 2): [(0, 500)]})
    reads = [c for c in cluster.calls if c[0] == "read_many"]
    assert [c[0] for c in cluster.calls if c[0] != "watermarks"] == ["bounds", "read_many", "read_many"]
    assert reads[0][1] == {("t", 0): (0, 20), ("t", 1): (10, 50), ("t", 2): (0, 200)}
    assert reads[1][1] == {("t", 0): (100, 140)}
    cluster.calls.clear()
    # Already read: served from the windows, and a prefetch of what is there reads nothing.
    assert [r.offset for r in windows.records("t", 1, 20, 30)] == [20, 22, 24, 26, 28]
    windows.prefetch({("t", 0): [(0, 20)], ("t", 2): [(5, 6)]})
    assert cluster.calls == []


def test_the_drain_compares_each_partitions_last_record_reading_each_cluster_once():
    parts = [MirroredPartition("t", p, "t") for p in range(4)]
    source = InMemory({("t", p): _records("t", p, 10) for p in range(4)})
    copies = {("t", p): _records("t", p, 10) for p in range(4)}
    copies[("t", 1)] = copies[("t", 1)][:-1]  # behind by one record
    copies[("t", 3)] = []  # nothing mirrored yet
    source.logs[("t", 2)] = []  # nothing to mirror
    dr = InMemory(copies)
    readers = {"primary": source, "dr": dr}
    ctx = SimpleNamespace(client=lambda _kind, alias, **_options: readers[alias])
    flow = SimpleNamespace(source="primary", target="dr", exactly_once=True)
    assert [p.partition for p in mirror_module.behind(ctx, flow, parts)] == [1, 3]
    for cluster in (source, dr):
        assert [c[0] for c in cluster.calls if c[0] != "watermarks"] == ["bounds", "read_many"]
    assert ("t", 2) not in dr.calls[-1][1]
