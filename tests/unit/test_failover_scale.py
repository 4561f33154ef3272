"""A failover at 1,000 groups: each position walked once however many groups share it, a replay
far into the walk still found, group offsets read and committed with their requests in flight
together, the state not read back after it is written, the report's RTO split and its JSON
written by the C encoder."""

from __future__ import annotations

import json
import random
import threading
from concurrent.futures import Future
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live.records import GroupOffsets
from mm2spec.live.types import Record
from mm2spec.ops.modules import offsets as offsets_module
from mm2spec.ops.modules.offsets import Windows, exact_translation, translate_all
from mm2spec.ops.modules.topology import MirroredPartition
from mm2spec.ops.modules.translate import Anchor, align, content
from mm2spec.ops.playbooks.report import RunReport, TaskResult, render
from mm2spec.spec.model import Cluster


def _rec(offset: int, seq: int, topic: str = "t") -> Record:
    return Record(topic, 0, offset, b"k", b"v", 1000 + seq, (("h", b"x"),))


class Log:
    """A ``RecordReader`` over in-memory partitions, counting range reads."""

    def __init__(self, logs: dict):
        self.logs, self.reads = logs, 0

    def watermarks(self, topic, partition):
        return 0, len(self.logs[(topic, partition)])

    def read(self, topic, partition, start, end):
        self.reads += 1
        return self.logs[(topic, partition)][start:end]

    def bounds(self, partitions):
        return {tp: self.watermarks(*tp) for tp in partitions}

    def read_many(self, ranges):
        return {tp: self.read(*tp, start, end) for tp, (start, end) in ranges.items()}


def test_content_is_the_records_content():
    record = Record("t", 3, 7, b"k", None, 5, (("h", b"v"),))
    assert content(record) == record.content()


def test_a_position_many_groups_share_is_walked_once_and_each_group_gets_its_own_translation(monkeypatch):
    source = {("t", p): [_rec(o, 10_000 * p + o) for o in range(600)] for p in range(2)}
    dr = {("t", p): [_rec(o, 10_000 * p + o) for o in range(600)] for p in range(2)}
    syncs = {("t", p): [(o, o) for o in range(0, 600, 100)] for p in range(2)}
    parts = [MirroredPartition("t", p, "t") for p in range(2)]
    rng = random.Random(7)
    wanted = [(f"g{g}", part, rng.randrange(1, 500)) for g in range(50) for part in parts]
    one_by_one = [exact_translation(g, part, c, syncs[("t", part.partition)], Windows(Log(source)), Windows(Log(dr)))
                  for g, part, c in wanted]
    walks, passes = [], []
    real, real_many = offsets_module.translate_partition, offsets_module.align_many
    monkeypatch.setattr(offsets_module, "translate_partition",
                        lambda part, held, *a: walks.extend((part, c) for c in held) or real(part, held, *a))
    monkeypatch.setattr(offsets_module, "align_many", lambda *a: passes.append(a[4]) or real_many(*a))
    monkeypatch.setattr(offsets_module, "exact_translation", lambda *a: pytest.fail(f"walked alone: {a[1:3]}"))
    progress = []
    found = translate_all(wanted, syncs, Windows(Log(source)), Windows(Log(dr)), lambda *a: progress.append(a))
    assert found == one_by_one and [t.group for t in found] == [g for g, _part, _c in wanted]
    key = lambda walk: (walk[0].partition, walk[1])  # noqa: E731
    assert sorted(walks, key=key) == sorted({(part, c) for _g, part, c in wanted}, key=key)
    assert len(walks) < len(wanted)
    # One pass per partition and sync for all the offsets near it, not one walk per position.
    assert len(passes) <= 2 * 5 and sum(map(len, passes)) == len(walks)
    assert all(t.dr_offset == t.committed and t.verified for t in found)
    assert progress and len(progress) <= len(wanted) // offsets_module.PROGRESS_EVERY + 1


def test_a_replay_far_past_the_first_unconsumed_copy_is_still_followed():
    # Committed 140 (100..139 consumed). DR: 100..239, then 130..139 again and then 175: a rewrite
    # of consumed records not followed by the group's next record (140) is a look-alike.
    seqs = list(range(100, 240)) + list(range(130, 140)) + [175]
    dr = [_rec(500 + i, s) for i, s in enumerate(seqs)]
    source = [_rec(o, o) for o in range(100, 141)]
    result = align(source, dr, 140, Anchor(100, 500))
    assert result.dr_offset == 540 and result.complete is False
    # A true replay of the consumed tail (130..139, then the next record 140) far into the horizon.
    seqs = list(range(100, 140)) + list(range(140, 200)) + list(range(130, 140)) + [140]
    dr = [_rec(500 + i, s) for i, s in enumerate(seqs)]
    source = [_rec(o, o) for o in range(100, 141)]
    found = align(source, dr, 140, Anchor(100, 500))
    assert found.dr_offset == 500 + 40 + 60 + 10 and found.last_copied == 139
    assert align(source, dr, 140, Anchor(100, 500), horizon=50).dr_offset == 540, "beyond the horizon: not looked at"


# ------------------------------------------------------------------------------ group offsets

@dataclass
class Answered:
    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None


class FakeAdmin:
    """An AdminClient whose offsets requests answer only once every request of the round is sent
    (so a client that waits for each answer before the next request would hang), failing the
    groups named in ``fail_once`` the first time with a retriable error."""

    def __init__(self, fail_once=(), partition_errors=()):
        self.sent: list[str] = []
        self.fail_once, self.partition_errors = set(fail_once), set(partition_errors)
        self.pending: list[tuple[Future, str, list]] = []
        self.lock = threading.Lock()

    def _send(self, group: str, partitions: list) -> dict:
        future: Future = Future()
        self.sent.append(group)
        self.pending.append((future, group, partitions))
        return {group: future}

    def answer_all(self):
        for future, group, partitions in self.pending:
            if group in self.fail_once:
                self.fail_once.discard(group)
                loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True)
                future.set_exception(KafkaException(loading))
                continue
            error = (KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "unknown member") if group in self.partition_errors
                     else None)
            answered = [Answered(tp.topic, tp.partition, tp.offset, error) for tp in partitions]
            future.set_result(type("Answer", (), {"topic_partitions": answered or [Answered("t", 0, 5)]})())
        self.pending.clear()

    def alter_consumer_group_offsets(self, request, request_timeout):
        return self._send(request[0].group_id, request[0].topic_partitions)

    def list_consumer_group_offsets(self, request, request_timeout):
        return self._send(request[0].group_id, [])

    def describe_consumer_groups(self, names, request_timeout):
        described = type("Described", (), {"state": "EMPTY", "members": ()})()
        found = {}
        for name in names:
            future: Future = Future()
            future.set_result(described)
            found[name] = future
        return found


def _groups(admin: FakeAdmin) -> GroupOffsets:
    client = GroupOffsets(Cluster("dr", ("127.0.0.1:1",)), timeout=1.0)
    client._client = admin
    real = client._result

    def result(future, what):  # the round's answers arrive once every request of it was sent
        if not future.done():
            admin.answer_all()
        return real(future, what)
    client._result = result
    return client


def test_many_groups_are_committed_with_their_requests_in_flight_and_a_retriable_failure_sent_again_alone():
    admin = FakeAdmin(fail_once={"g3"})
    _groups(admin).commit_many({f"g{i}": {("t", 0): i} for i in range(5)} | {"nothing": {}})
    assert admin.sent[:5] == ["g0", "g1", "g2", "g3", "g4"], "every request sent before the first answer"
    assert admin.sent[5:] == ["g3"] and "nothing" not in admin.sent


def test_partition_errors_of_a_bulk_commit_name_each_group():
    admin = FakeAdmin(partition_errors={"g1", "g4"})
    with pytest.raises(KafkaOperationFailed, match=r'"dr": commit offsets of 2 groups: g1: t-0: .* \| g4: t-0: '):
        _groups(admin).commit_many({f"g{i}": {("t", 0): i} for i in range(5)})


def test_many_groups_offsets_are_read_with_their_requests_in_flight():
    admin = FakeAdmin()
    found = _groups(admin).describe([f"g{i}" for i in range(4)])
    assert admin.sent == ["g0", "g1", "g2", "g3"] and found["g2"].offsets == {("t", 0): 5}


# ------------------------------------------------------------------------------ report

def _report() -> RunReport:
    report = RunReport("failover", "payments-dr", None, False, 0.0, 9.0)
    report.tasks = [TaskResult("Wait until DR holds every source record", "mirror.wait_caught_up", "ok", 4.0),
                    TaskResult("Stop the mirror", "mirror.stop", "changed", 1.0),
                    TaskResult("Translate every group's offsets", "offsets.translate", "ok", 2.0),
                    TaskResult("Commit the offsets on DR", "offsets.commit", "changed", 0.5, ends_rto=True),
                    TaskResult("Verify the result", "verify.failover", "ok", 1.5)]
    return report


def test_the_rto_is_split_by_task_and_the_tasks_after_it_are_marked():
    report = _report()
    data = json.loads(render(report, "json"))
    assert [(p["task"], p["inRto"]) for p in data["rto"]["phases"]] == [
        ("Wait until DR holds every source record", True), ("Stop the mirror", True),
        ("Translate every group's offsets", True), ("Commit the offsets on DR", True), ("Verify the result", False)]
    assert ("RTO by task: Wait until DR holds every source record 4.0s, Translate every group's offsets 2.0s, "
            "Stop the mirror 1.0s, Commit the offsets on DR 0.5s") in render(report, "text")
    report.tasks[3].status = "failed"
    assert not any(p["inRto"] for p in json.loads(render(report, "json"))["rto"]["phases"])


def test_the_json_report_is_one_document_with_a_line_per_list_item():
    report = _report()
    text = render(report, "json")
    assert json.loads(text) == report.to_json()
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and '    {"name": "Stop the mirror", "module": "mirror.stop"' in text
    assert len(lines) == 2 + len(report.to_json()) + len(report.tasks) + 1  # "  ]" closes the tasks
