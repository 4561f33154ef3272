"""Exact offset translation: where on DR a group resumes so it reads the very next record.

MM2 (``RemoteClusterUtils``, the checkpoint connector) maps a committed offset to the nearest
offset sync at or below it and rounds up by one (``mm2spec.mm2.offsets``), so a group re-reads up to ``offset.lag.max``
records per partition. When the source answers we can do better: a mirror writes each source
record once, in order, after the sync's record; so walk the records after the nearest sync on
both clusters side by side, matching them by content (key, value, timestamp, headers), until the
DR copy of the first record the group has *not* consumed. That DR offset is exact.

At-least-once mirrors may have written a run twice (a batch replayed after a crash): a DR record
that matches an earlier source record than expected is a replay, and the walk follows it; past
the commit, a run that rewrites the consumed records in order (within ``REPLAY_HORIZON``) moves the
resume point after it, so the group resumes after the last copy of a record it consumed. Walked
the other way (a copy back to its original: an active-active remote topic, a failback before the
switch) the replay is on the source side: consumed records that only repeat earlier ones are
records the group had read already (``repeated_after``).

Many commits from one offset sync share a walk (``align_many``): one pass per partition and sync
for all the offsets after it, comparing content ids (``ContentIds``) rather than content tuples,
handing a walk to ``align`` wherever the shared pass cannot decide it alone.

Pure functions over ``Record`` lists; reading the clusters is the caller's (``offsets`` module).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter
from typing import Iterable, Sequence

from mm2spec.live.types import Record
from mm2spec.mm2 import offsets as offset_rule


@dataclass(frozen=True)
class Anchor:
    """A point where both logs are known to agree: source offset ``upstream`` was written at DR
    offset ``downstream`` (an offset sync), or both logs' starts when no sync is at or below."""

    upstream: int
    downstream: int
    from_sync: bool = True


def nearest_sync(syncs: Sequence[offset_rule.Sync], committed: int) -> Anchor | None:
    """The anchor of MM2's latest sync at or below ``committed`` (``syncs`` sorted), or None."""
    sync = offset_rule.latest_sync(syncs, committed)
    return None if sync is None else Anchor(*sync)


def mm2_translation(anchor: Anchor | None, committed: int) -> int | None:
    """What MM2's OffsetSyncStore gives from ``anchor``, a sync (not from the logs' starts)."""
    if anchor is None or not anchor.from_sync:
        return None
    return offset_rule.translated_offset((anchor.upstream, anchor.downstream), committed)


@dataclass(frozen=True)
class Alignment:
    """The outcome of one walk."""

    dr_offset: int
    """Where the group resumes on DR: one past the last DR copy of a record it consumed."""
    last_copied: int | None
    """The source offset of the last consumed record found on DR (None: none after the anchor)."""
    complete: bool
    """True when the walk reached a copy of an unconsumed record, so nothing later can change the
    result; False when it ran out of DR records (read more, or DR ends here)."""
    mismatch: int | None = None
    """A DR offset whose record is not a copy of any source record in the window (foreign data)."""


REPLAY_HORIZON = 200
"""DR records read past the first unconsumed copy, looking for a replay of consumed records (an
at-least-once batch rewritten after a crash lands right after what it rewrites); a replay found
there moves the resume point after it, so the group does not read the duplicates either."""

content = attrgetter("key", "value", "timestamp", "headers")
"""``Record.content`` as one C call: a failover at 1,000 groups takes it ~20 million times."""


def align(source: Sequence[Record], dr: Iterable[Record], committed: int, anchor: Anchor,
          horizon: int = REPLAY_HORIZON) -> Alignment:
    """Walk ``dr`` (records from ``anchor.downstream`` on) against ``source`` (records from
    ``anchor.upstream`` through ``committed`` inclusive where it exists)."""
    index: dict[tuple, list[int]] = {}
    for record in source:
        index.setdefault(content(record), []).append(record.offset)
    consumed = [r for r in source if r.offset < committed]
    # Only a DR record with the content of a consumed record can start a replay: past the first
    # unconsumed copy, the walk skips straight to the next such record (most walks have none).
    consumed_keys = {content(r) for r in consumed}
    upcoming = next((r for r in source if r.offset >= committed), None)
    records = list(dr)
    keys = list(map(content, records))
    expected = source[0].offset if source else committed
    last: tuple[int, int] | None = None  # (dr offset, source offset) of the last consumed copy
    past: int | None = None  # index in ``records`` of the first copy of an unconsumed record
    i = 0
    while i < len(records):
        record = records[i]
        if past is None:
            candidates = index.get(keys[i])
            if not candidates and expected < committed and not _repeats_only(source, expected, committed):
                return _result(anchor, last, complete=False, mismatch=record.offset)
            copied = _choose(candidates, expected) if candidates else committed
            if copied >= committed:
                past = i
            else:
                last, expected = (record.offset, copied), copied + 1
            i += 1
            continue
        if i - past > horizon:
            return _result(anchor, last, complete=True)
        if keys[i] not in consumed_keys:
            end = min(len(records), past + horizon + 1)
            i = end if consumed_keys.isdisjoint(keys[i:end]) else next(j for j in range(i, end) if keys[j] in consumed_keys)
            continue
        replay = _replayed(records, i, index[keys[i]], consumed, committed, upcoming)
        if replay is None:
            i += 1
            continue
        i, past = replay + 1, None
        last, expected = (records[replay].offset, consumed[-1].offset), consumed[-1].offset + 1
    return _result(anchor, last, complete=False)


def _repeats_only(source: Sequence[Record], start: int, committed: int) -> bool:
    """Whether every source record from ``start`` up to the commit repeats an earlier one: the
    source side holds a replay (a reverse flow's at-least-once copy, walked back to its original),
    so the group consumed nothing new there and its next record is the DR record at hand."""
    earlier = {r.content() for r in source if r.offset < start}
    rest = [r for r in source if start <= r.offset < committed]
    return bool(rest) and all(r.content() in earlier for r in rest)


def repeated_after(consumed: Sequence[Record], last_copied: int | None) -> bool:
    """Whether the consumed records after ``last_copied`` (the last one the walk found on DR) all
    repeat records consumed before it (a replay on the source side), rather than being unmirrored."""
    if last_copied is None:
        return False
    earlier = {r.content() for r in consumed if r.offset <= last_copied}
    rest = [r for r in consumed if r.offset > last_copied]
    return bool(rest) and all(r.content() in earlier for r in rest)


def _replayed(records: list[Record], i: int, candidates: list[int], consumed: list[Record], committed: int,
              upcoming: Record | None) -> int | None:
    """If ``records[i:]`` rewrites consumed source records from one of ``candidates`` up to the last
    consumed one, in order, and then goes on with the first unconsumed record (or DR ends), the
    index of that last copy; else None (a look-alike, not a replay)."""
    for start in sorted((c for c in candidates if c < committed), reverse=True):
        run = [r for r in consumed if r.offset >= start]
        window = records[i:i + len(run) + 1]
        if len(window) < len(run) or not all(a.content() == b.content() for a, b in zip(window, run)):
            continue
        after = window[len(run)] if len(window) > len(run) else None
        if (after is None and upcoming is None) or (after is not None and upcoming is not None
                                                    and after.content() == upcoming.content()):
            return i + len(run) - 1
    return None


def _choose(candidates: list[int], expected: int) -> int:
    """Which source record a DR record copies, when its content occurs more than once: the one
    the mirror would write next; else the latest earlier one (a replay restarts earlier); else
    the next later one (the source skipped offsets: compaction, transaction markers)."""
    i = bisect.bisect_left(candidates, expected)
    if i < len(candidates) and candidates[i] == expected:
        return expected
    return candidates[i - 1] if i > 0 else candidates[i]


def _result(anchor: Anchor, last: tuple[int, int] | None, complete: bool, mismatch: int | None = None) -> Alignment:
    if last is None:
        return Alignment(anchor.downstream, None, complete, mismatch)
    return Alignment(last[0] + 1, last[1], complete, mismatch)


class ContentIds:
    """Each distinct record content (``content``) as a small int, one numbering for both clusters'
    windows of a translation run: equal ids are equal contents, so the shared walk compares and
    hashes ints instead of (key, value, timestamp, headers) tuples."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}

    def of(self, records: Iterable[Record]) -> list[int]:
        ids = self._ids
        return [ids.setdefault(key, len(ids)) for key in map(content, records)]


_NEVER = float("inf")
"""A copied source offset past every commit: a DR record with no candidate in the window."""


def align_many(source: Sequence[Record], source_ids: Sequence[int], dr: Sequence[Record], dr_ids: Sequence[int],
               walks: Sequence[tuple[int, int]], anchor: Anchor, horizon: int = REPLAY_HORIZON) -> list[Alignment]:
    """``align`` for many commits from one anchor, in one pass: for each ``(committed, end)`` of
    ``walks``, ``align([r for r in source if r.offset <= committed], [r for r in dr if r.offset < end],
    committed, anchor, horizon)``. ``source`` holds the records from ``anchor.upstream`` on (through
    the largest commit at least), ``dr`` those from ``anchor.downstream`` on, both sorted, with their
    ``ContentIds`` in ``source_ids`` and ``dr_ids``.

    Why one pass gives every walk: before its commit, ``align`` steps through DR one record at a time,
    and a walk to commit ``c`` takes the very steps of the walk to the largest commit as long as that
    one copies source records below ``c`` (``_choose`` among the candidates at or below ``c`` picks
    the same one then); the first step that copies ``c`` or later, or finds no candidate, is where
    walk ``c`` passes its commit (or meets a foreign record). Past it, ``align`` only looks further
    when a DR record within the horizon has the content of a consumed record (a replay may start
    there): such walks, and any step the shared pass did not foresee, are walked by ``align`` itself."""
    if not walks:
        return []
    src_offsets = [r.offset for r in source]
    dr_offsets = [r.offset for r in dr]
    largest = max(committed for committed, _end in walks)
    # Candidates of each content: its source offsets up to the largest commit (a walk to ``c`` uses
    # those at or below ``c``); the first of them says whether the content was consumed before ``c``.
    index: dict[int, list[int]] = {}
    for offset, key in zip(src_offsets[:bisect.bisect_right(src_offsets, largest)], source_ids):
        index.setdefault(key, []).append(offset)
    first_copy = {key: offsets[0] for key, offsets in index.items()}
    # The walk to the largest commit, up to the first step that copies it or later (or finds no
    # candidate): ``copied[i]`` is the source offset DR record ``i`` copies.
    copied: list[float] = []
    expected = src_offsets[0] if src_offsets and src_offsets[0] <= largest else largest
    for key in dr_ids:
        candidates = index.get(key)
        if candidates is None:
            copied.append(_NEVER)
            break
        found = candidates[0] if len(candidates) == 1 else _choose(candidates, expected)
        copied.append(found)
        if found >= largest:
            break
        expected = found + 1
    reached = list(accumulate(copied, max))
    consumed_first = [first_copy.get(key, _NEVER) for key in dr_ids]
    found_all = []
    for committed, end in walks:
        walked = bisect.bisect_left(dr_offsets, end)
        step = bisect.bisect_left(reached, committed)  # the first step at or past the commit
        if step >= walked:  # DR (as far as this walk reads it) ends before it: every step copied a consumed record
            found_all.append(_result(anchor, (dr[walked - 1].offset, copied[walked - 1]) if walked else None, False))
            continue
        last = (dr[step - 1].offset, copied[step - 1]) if step else None
        in_source = bisect.bisect_right(src_offsets, committed)
        expected = copied[step - 1] + 1 if step else (src_offsets[0] if in_source else committed)
        candidates = index.get(dr_ids[step], [])
        candidates = candidates[:bisect.bisect_right(candidates, committed)]
        if not candidates:
            if expected < committed and not _repeats_only(source[:in_source], expected, committed):
                found_all.append(_result(anchor, last, complete=False, mismatch=dr[step].offset))
                continue
        elif _choose(candidates, expected) < committed:
            # Not the step the shared pass foresaw: walk this one alone.
            found_all.append(align(source[:in_source], dr[:walked], committed, anchor, horizon))
            continue
        # DR record ``step`` copies a record the group has not consumed: ``align`` now looks up to
        # ``horizon`` records further for one with a consumed record's content (a replay may start).
        ahead = consumed_first[step + 1:min(walked, step + horizon + 1)]
        if ahead and min(ahead) < committed:
            found_all.append(align(source[:in_source], dr[:walked], committed, anchor, horizon))
            continue
        found_all.append(_result(anchor, last, complete=step + horizon + 1 < walked))
    return found_all


@dataclass(frozen=True)
class Translation:
    """One group's position on one partition, translated to DR, with what it costs the group."""

    group: str
    topic: str
    """The source topic."""
    partition: int
    target_topic: str
    committed: int
    """The group's committed offset on the source (or, unplanned, the last checkpoint's upstream)."""
    dr_offset: int | None
    """The offset to commit on DR; None when it cannot be translated (``note`` says why)."""
    method: str
    """``exact`` (walked by content), ``checkpoint`` (unplanned: MM2's checkpoint, rounded down)."""
    skipped: int = 0
    """Records the group would never read (0 is the goal; -1 unknown)."""
    reread: int = 0
    """Records the group would read twice (0 for exact; a bound for checkpoints, -1 unknown)."""
    mm2_offset: int | None = None
    """What MM2's translation gives for the same commit."""
    mm2_reread: int | None = None
    """Records MM2's translation would have had the group re-read."""
    unmirrored: int = 0
    """Records the group consumed on the source that never reached DR (unplanned: the RPO)."""
    verified: bool = False
    """The DR record before ``dr_offset`` has the content of the last record the group consumed."""
    note: str = ""
    remote: str = ""
    """Active-active: the reverse flow whose copy is involved: the group's position on that flow's
    copy (``dr.orders`` on primary) moves to the original (``orders`` on dr), or back; empty for a
    local topic, translated the flow's own way."""

    def to_json(self) -> dict:
        found = {"group": self.group, "topic": self.topic, "partition": self.partition,
                 "targetTopic": self.target_topic, "sourceOffset": self.committed, "drOffset": self.dr_offset,
                 "method": self.method, "skipped": self.skipped, "reread": self.reread,
                 "mm2Offset": self.mm2_offset, "mm2Reread": self.mm2_reread, "unmirrored": self.unmirrored,
                 "verified": self.verified, "note": self.note}
        if self.remote:
            found["remote"] = self.remote
        return found


@dataclass
class PartitionWindow:
    """Records of one partition read so far, by offset, so overlapping walks read once."""

    records: dict[int, Record] = field(default_factory=dict)
    offsets: list[int] = field(default_factory=list)
    """The offsets of ``records``, sorted (ranges are sliced with bisect)."""
    ordered: list[Record] = field(default_factory=list)
    """``records`` in the order of ``offsets``: a range is one slice (a failover slices ~100,000 times)."""
    covered: list[tuple[int, int]] = field(default_factory=list)
    numbered: tuple[ContentIds, list[int]] | None = None
    """The ``ContentIds`` of ``ordered`` and by whom (kept until a record is added)."""

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """Sub-ranges of [start, end) not read yet."""
        gaps, cursor = [], start
        for lo, hi in sorted(self.covered):
            if hi <= cursor or lo >= end:
                continue
            if lo > cursor:
                gaps.append((cursor, min(lo, end)))
            cursor = max(cursor, hi)
        if cursor < end:
            gaps.append((cursor, end))
        return gaps

    def add(self, start: int, end: int, records: Iterable[Record]) -> None:
        for record in records:
            at = bisect.bisect_left(self.offsets, record.offset)
            if record.offset in self.records:
                self.ordered[at] = record
            else:
                self.offsets.insert(at, record.offset)
                self.ordered.insert(at, record)
            self.records[record.offset] = record
        self.covered.append((start, end))
        self.numbered = None

    def between(self, start: int, end: int) -> list[Record]:
        return self.ordered[bisect.bisect_left(self.offsets, start):bisect.bisect_left(self.offsets, end)]

    def between_with_ids(self, start: int, end: int, contents: ContentIds) -> tuple[list[Record], list[int]]:
        """``between`` and the records' content ids (numbered once per window, not per range)."""
        if self.numbered is None or self.numbered[0] is not contents:
            self.numbered = (contents, contents.of(self.ordered))
        low, high = bisect.bisect_left(self.offsets, start), bisect.bisect_left(self.offsets, end)
        return self.ordered[low:high], self.numbered[1][low:high]


def merged(ranges: Iterable[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Ranges merged where they overlap or lie within ``gap`` of each other: one read instead of
    many small ones, without reading a long stretch nobody needs."""
    out: list[list[int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]
