"""What a DR drill measures on the clusters, independently of the playbooks it runs.

- ``probe``: where a group resumes on the cluster it moved to, against the record right after the
  last one it consumed on the cluster it left, by content (key, value, timestamp, headers): how
  many records it would skip or read again.
- ``drill_records``: which of the drill's records a cluster holds (by their sequence headers), so
  a switch's RPO and the final "every record where it should be" are counted, not assumed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.live.types import Record
from mm2spec.live.traffic import Written, drill_seq

PROBE_WINDOW = 200
"""Records read on each side of a group's position on the cluster it left: a skip or re-read
further away than this is reported as unknown (and fails the probe), never guessed."""
LOOKAHEAD = 16
"""Offsets read past a position to find its first record (transaction markers leave gaps)."""


@dataclass(frozen=True)
class Move:
    """One group's partition moving from ``old_topic`` on the cluster it left to ``new_topic``."""

    group: str
    old_topic: str
    new_topic: str
    partition: int
    remote: str | None = None
    """Active-active: the reverse flow whose copy (``old_topic`` at a failover, ``new_topic`` at a
    failback) is a remote topic; None for the drilled flow's own topics."""


def _first(reader: RecordReader, topic: str, partition: int, offset: int) -> Record | None:
    high = reader.watermarks(topic, partition)[1]
    found = reader.read(topic, partition, offset, min(high, offset + LOOKAHEAD))
    return found[0] if found else None


def _last_before(reader: RecordReader, topic: str, partition: int, offset: int) -> Record | None:
    low = reader.watermarks(topic, partition)[0]
    found = reader.read(topic, partition, max(low, offset - LOOKAHEAD), offset)
    return found[-1] if found else None


def _label(record: Record | None, drill_id: str) -> str | None:
    if record is None:
        return None
    seq = drill_seq(record, drill_id)
    return f"{record.topic}-{record.partition}@{record.offset}" + ("" if seq is None else f" (drill record #{seq})")


def _index(records: list[Record], wanted: Record) -> int | None:
    """The position of the last record of ``records`` with ``wanted``'s content."""
    for i in range(len(records) - 1, -1, -1):
        if records[i].content() == wanted.content():
            return i
    return None


def probe(old: RecordReader, new: RecordReader, move: Move, committed: int | None, resume: int | None,
          drill_id: str) -> dict:
    """Where ``move.group`` resumes: its first record at its committed offset ``resume`` on the new
    cluster, compared with the record after its last consumed one (``committed`` on the old)."""
    row = {"group": move.group, "topic": move.old_topic, "targetTopic": move.new_topic, "partition": move.partition,
           "committed": committed, "resumeAt": resume, "expected": None, "found": None,
           "skipped": None, "reread": None, "result": "unknown"}
    if move.remote:
        row["remote"] = move.remote
    if committed is None or resume is None:
        row["note"] = "no committed offset on " + ("the cluster it left" if committed is None else "the cluster it moved to")
        return row
    low, high = old.watermarks(move.old_topic, move.partition)
    consumed = old.read(move.old_topic, move.partition, max(low, committed - PROBE_WINDOW), committed)
    upcoming = old.read(move.old_topic, move.partition, committed, min(high, committed + PROBE_WINDOW))
    first = _first(new, move.new_topic, move.partition, resume)
    expected = upcoming[0] if upcoming else None
    row.update(expected=_label(expected, drill_id), found=_label(first, drill_id))
    skipped, reread = _distance(new, move, resume, consumed, upcoming, first)
    row.update(skipped=skipped, reread=reread)
    if skipped is None:
        row["note"] = ("the record after the last one consumed is not on the new cluster at the group's offset"
                       if expected is not None else "the record before the group's offset is not its last consumed one")
    else:
        row["result"] = "exact" if skipped == reread == 0 else ("skipped" if skipped else "re-read")
    return row


def _distance(new: RecordReader, move: Move, resume: int, consumed: list[Record], upcoming: list[Record],
              first: Record | None) -> tuple[int | None, int | None]:
    """(skipped, re-read) records; (None, None) when the first record is not near the position."""
    expected = upcoming[0] if upcoming else None
    if first is None or expected is None:
        # Nothing more on one side: the group must sit right after its last consumed record.
        if first is None and expected is not None:
            return None, None
        before = _last_before(new, move.new_topic, move.partition, resume)
        if not consumed or (before is not None and before.content() == consumed[-1].content()):
            return 0, 0
        return None, None
    if first.content() == expected.content():
        return 0, 0
    ahead = _index(upcoming, first)
    if ahead is not None:
        return ahead, 0
    back = _index(consumed, first)
    return (0, len(consumed) - back) if back is not None else (None, None)


def probe_moves(old: RecordReader, new: RecordReader, old_groups: GroupOffsets, new_groups: GroupOffsets,
                moves: list[Move], drill_id: str) -> list[dict]:
    """``probe`` for every move, with each group's committed offsets read once on each cluster."""
    names = sorted({m.group for m in moves})
    before, after = old_groups.describe(names), new_groups.describe(names)
    return [probe(old, new, m, before[m.group].offsets.get((m.old_topic, m.partition)),
                  after[m.group].offsets.get((m.new_topic, m.partition)), drill_id) for m in moves]


def drill_records(reader: RecordReader, partitions: list[tuple[str, int]], drill_id: str) -> dict[tuple[str, int], Counter]:
    """Per (topic, partition): how many times each of the drill's sequence numbers is there."""
    found: dict[tuple[str, int], Counter] = {}
    for topic, partition in partitions:
        low, high = reader.watermarks(topic, partition)
        seqs = (drill_seq(r, drill_id) for r in reader.iterate(topic, partition, low, high))
        found[(topic, partition)] = Counter(s for s in seqs if s is not None)
    return found


def missing(written: Written, found: dict[tuple[str, int], Counter], rename) -> tuple[int, list[int]]:
    """Records of ``written`` not in ``found`` (``rename`` maps a written topic to its name there):
    the count and the write timestamps (ms) of those missing."""
    lost, stamps = 0, []
    for (topic, partition), seqs in written.seqs.items():
        there = found.get((rename(topic), partition), Counter())
        for seq, stamp in zip(seqs, written.stamps[(topic, partition)]):
            if seq not in there:
                lost += 1
                stamps.append(stamp)
    return lost, stamps


def duplicates(found: dict[tuple[str, int], Counter]) -> int:
    return sum(n - 1 for counts in found.values() for n in counts.values() if n > 1)
