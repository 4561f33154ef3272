"""The batched exact walk gives what the walk one position at a time gives: ``translate.align_many``
against ``align`` at each commit, and ``offsets.translate_all`` against ``exact_translation`` for
each (group, partition, offset), over random logs: contents that repeat, at-least-once replays
on DR, transaction markers and compacted offsets, records lost or foreign, DR behind, syncs
forgotten or older than the source's log start."""

from __future__ import annotations

import bisect
import os
import random
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

from mm2spec.live.types import Record
from mm2spec.mm2.offsets import current_syncs
from mm2spec.ops.modules import offsets as offsets_module
from mm2spec.ops.modules import translate as translate_module
from mm2spec.ops.modules.offsets import Windows, exact_translation, translate_all
from mm2spec.ops.modules.topology import MirroredPartition
from mm2spec.ops.modules.translate import Anchor, ContentIds, align, align_many

CASES = int(os.environ.get("MM2SPEC_FUZZ_CASES", 150))
PROPERTY = settings(max_examples=CASES, deadline=None, database=None, print_blob=True,
                    derandomize="MM2SPEC_FUZZ_CASES" not in os.environ)


class MemoryLog:
    """A ``RecordReader`` over in-memory partitions (sorted by offset); ``ends`` may put a
    partition's end past its last record (transaction markers)."""

    def __init__(self, logs: dict, ends: dict | None = None):
        self.logs, self.ends = logs, ends or {}
        self.offsets = {tp: [r.offset for r in records] for tp, records in logs.items()}

    def watermarks(self, topic, partition):
        records = self.logs[(topic, partition)]
        low, high = (records[0].offset, records[-1].offset + 1) if records else (0, 0)
        return low, max(high, self.ends.get((topic, partition), high))

    def bounds(self, partitions):
        return {tp: self.watermarks(*tp) for tp in partitions}

    def read(self, topic, partition, start, end):
        offsets = self.offsets[(topic, partition)]
        return self.logs[(topic, partition)][bisect.bisect_left(offsets, start):bisect.bisect_left(offsets, end)]

    def read_many(self, ranges):
        return {tp: self.read(*tp, start, end) for tp, (start, end) in ranges.items()}


def _content(rng: random.Random, seq: int, alike: float) -> tuple:
    """(key, value, timestamp, headers): with probability ``alike`` one of a few look-alikes."""
    if rng.random() < alike:
        return b"k", b"same", 1000 + rng.randrange(3), ()
    return b"k", b"v", 2000 + seq, (("h", str(seq).encode()),)


def logs(rng: random.Random, topic: str, partition: int, target: str, size: int) -> tuple[list, list, list, int]:
    """(source, DR, syncs as written, DR end) of one partition, mirrored with the faults above."""
    alike, gap = rng.choice([0.0, 0.05, 0.3]), rng.choice([0.0, 0.1])
    offset, source = rng.choice([0, 0, 7]), []
    for seq in range(size):
        source.append(Record(topic, partition, offset, *_content(rng, seq, alike)))
        offset += 1 + (rng.random() < gap)  # compacted away, or a marker
    replay, lost, foreign, marker = (rng.choice([0.0, 0.0, p]) for p in (0.05, 0.01, 0.01, 0.1))
    dr, syncs, at = [], [], rng.choice([0, 3])

    def write(record: Record, sync: bool) -> None:
        nonlocal at
        if sync:
            syncs.append((record.offset, at))
        dr.append(Record(target, partition, at, record.key, record.value, record.timestamp, record.headers))
        at += 1 + (rng.random() < marker)

    behind = rng.choice([len(source), len(source), rng.randrange(len(source) + 1)])
    for i, record in enumerate(source[:behind]):
        if rng.random() < lost:
            continue
        if rng.random() < foreign:
            write(Record(target, partition, 0, b"x", b"foreign", 5, ()), False)
        write(record, rng.random() < 0.15)
        if rng.random() < replay:  # a batch written again after a restart: a sync first thing
            for n, again in enumerate(source[max(0, i - rng.randrange(1, 12)):i + 1]):
                write(again, n == 0 or rng.random() < 0.15)
    if rng.random() < 0.25:
        # Walked the other way (a copy back to its original): the replays are on the source side.
        turned = [Record(topic, partition, r.offset, r.key, r.value, r.timestamp, r.headers) for r in dr]
        back = [Record(target, partition, r.offset, r.key, r.value, r.timestamp, r.headers) for r in source]
        return turned, back, [(d, u) for u, d in syncs], offset
    return source, dr, syncs, at + rng.choice([0, 0, 1])


# ------------------------------------------------------------------------------ align_many


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), horizon=st.sampled_from([0, 1, 3, 8, 30]), size=st.integers(0, 90))
def test_align_many_gives_what_align_gives_at_each_commit(seed, horizon, size):
    rng = random.Random(seed)
    source, dr, syncs, _end = logs(rng, "t", 0, "dr.t", size)
    anchors = [Anchor(*s) for s in syncs] + [Anchor(source[0].offset if source else 0, dr[0].offset if dr else 0, False)]
    anchor = rng.choice(anchors)
    src = [r for r in source if r.offset >= anchor.upstream]
    walked = [r for r in dr if r.offset >= anchor.downstream]
    top = (source[-1].offset if source else 0) + 3
    commits = sorted({rng.randrange(anchor.upstream, max(anchor.upstream + 1, top)) for _ in range(rng.randrange(1, 25))})
    walks = [(c, anchor.downstream + (c - anchor.upstream) + rng.choice([0, 1, 5, 20, 200])) for c in commits]
    contents = ContentIds()
    found = align_many(src, contents.of(src), walked, contents.of(walked), walks, anchor, horizon)
    expected = [align([r for r in src if r.offset <= c], [r for r in walked if r.offset < end], c, anchor, horizon)
                for c, end in walks]
    assert found == expected


def test_a_faithful_copy_is_walked_once_for_every_commit_without_align():
    source = [Record("t", 0, o, b"k", b"v", 1000 + o, ()) for o in range(100, 400)]
    dr = [Record("dr.t", 0, 500 + o - 100, r.key, r.value, r.timestamp, ()) for o, r in zip(range(100, 400), source)]
    contents = ContentIds()
    walks = [(c, 500 + (c - 100) + 30) for c in range(100, 200)]
    with mock.patch.object(translate_module, "align", side_effect=AssertionError("walked alone")):
        found = align_many(source, contents.of(source), dr, contents.of(dr), walks, Anchor(100, 500), horizon=20)
    assert [(a.dr_offset, a.last_copied, a.complete) for a in found[:2]] == [(500, None, True), (501, 100, True)]
    assert all(a.dr_offset == 500 + c - 100 and a.complete for a, (c, _end) in zip(found, walks))


def test_a_walk_with_a_consumed_records_copy_within_the_horizon_is_walked_alone():
    # DR: 100..109, then 105..109 again (a replay) and 110. Committed 110: the shared pass follows
    # the replay before the commit. Committed 107: past it, DR 510 has consumed 105's content, so
    # a replay may start there: walked alone, it resumes after the replay's 106 (DR 512).
    seqs = list(range(100, 110)) + list(range(105, 111))
    source = [Record("t", 0, o, b"k", b"v", 1000 + o, ()) for o in range(100, 111)]
    dr = [Record("dr.t", 0, 500 + i, b"k", b"v", 1000 + s, ()) for i, s in enumerate(seqs)]
    contents = ContentIds()
    walks = [(103, 600), (107, 600), (110, 600)]
    calls = []
    real = translate_module.align
    with mock.patch.object(translate_module, "align", side_effect=lambda *a: calls.append(a[2]) or real(*a)):
        found = align_many(source, contents.of(source), dr, contents.of(dr), walks, Anchor(100, 500), horizon=20)
    assert calls == [107]
    assert [(a.dr_offset, a.last_copied) for a in found] == [(503, 102), (512, 106), (515, 109)]
    assert found == [align([r for r in source if r.offset <= c], dr, c, Anchor(100, 500), 20) for c, _end in walks]


# ------------------------------------------------------------------------------ translate_all


def one_at_a_time(wanted, syncs, source: Windows, dr: Windows):
    """The reference: one ``exact_translation`` per (group, partition, offset), nothing shared."""
    return [exact_translation(group, part, committed, syncs.get((part.topic, part.partition), []), source, dr)
            for group, part, committed in wanted]


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), slack=st.sampled_from([1, 6, 40] + [offsets_module.WALK_SLACK] * 3),
       size=st.integers(0, 700))
def test_translate_all_gives_what_each_walk_alone_gives(seed, slack, size):
    rng = random.Random(seed)
    parts = [MirroredPartition("t", p, "dr.t") for p in range(2)]
    source_logs, dr_logs, ends, syncs = {}, {}, {}, {}
    for part in parts:
        source, dr, written, end = logs(rng, part.topic, part.partition, part.target_topic, size)
        if source and rng.random() < 0.2:  # retention deleted the start: syncs below it, commits before it
            source = source[rng.randrange(len(source)):]
        source_logs[(part.topic, part.partition)], dr_logs[(part.target_topic, part.partition)] = source, dr
        ends[(part.target_topic, part.partition)] = end
        syncs[(part.topic, part.partition)] = current_syncs(written) if rng.random() < 0.9 else []
    top = max([r.offset for log in source_logs.values() for r in log] + [0]) + 3
    wanted = [(f"g{g}", part, rng.randrange(0, top)) for g in range(rng.randrange(1, 12)) for part in parts]
    with mock.patch.object(offsets_module, "WALK_SLACK", slack):
        expected = one_at_a_time(wanted, syncs, Windows(MemoryLog(source_logs)), Windows(MemoryLog(dr_logs, ends)))
        progress = []
        found = translate_all(wanted, syncs, Windows(MemoryLog(source_logs)), Windows(MemoryLog(dr_logs, ends)),
                              lambda *a: progress.append(a))
    assert found == expected
    assert 1 <= len(progress) <= len(wanted) // offsets_module.PROGRESS_EVERY + 1


@pytest.mark.parametrize("groups", [1, 40])
def test_translate_all_at_the_failover_shape_matches_and_skips_nothing(groups):
    # 300 records a partition, a sync every 100, at-least-once replays: the fast pass and the walks alone agree.
    rng = random.Random(groups)
    parts = [MirroredPartition("t", p, "dr.t") for p in range(3)]
    source_logs, dr_logs, syncs = {}, {}, {}
    for part in parts:
        source = [Record("t", part.partition, o, b"k", b"v", 1000 + o, (("h", str(o).encode()),)) for o in range(300)]
        order = list(range(300))
        order[150:150] = list(range(140, 150))  # a replay of 140..149 after 149
        dr = [Record("dr.t", part.partition, i, b"k", b"v", 1000 + o, (("h", str(o).encode()),)) for i, o in enumerate(order)]
        source_logs[("t", part.partition)], dr_logs[("dr.t", part.partition)] = source, dr
        syncs[("t", part.partition)] = [(o, o) for o in range(0, 150, 100)] + [(o, o + 10) for o in range(200, 300, 100)]
    wanted = [(f"g{g}", part, rng.randrange(1, 290)) for g in range(groups) for part in parts]
    found = translate_all(wanted, syncs, Windows(MemoryLog(source_logs)), Windows(MemoryLog(dr_logs)))
    assert found == one_at_a_time(wanted, syncs, Windows(MemoryLog(source_logs)), Windows(MemoryLog(dr_logs)))
    assert all(t.dr_offset is not None and t.skipped == 0 and t.reread == 0 for t in found)
    assert [t.group for t in found] == [g for g, _part, _c in wanted]
