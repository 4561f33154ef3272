"""The failback's reverse flow: DR's records written after the switch, copied back to the source.

A bounded copy, not a standing mirror: it starts at each partition's DR end at the switch (or at
DR's log start for a topic rebuilt from DR) and ends at DR's end once the clients are fenced, so
it runs here, in the playbook, for either engine (no Spark job or connector to start, configure
and tear down inside the RTO). It keeps what the forward mirror keeps: key, value, timestamp,
headers and partition, in order, each record once (one idempotent producer).

Where a re-run stands is read from the clusters alone. The copy is the only writer of the source
partition from ``source start`` on (the clients are on DR, and fenced off the source when
``failover.fence`` is set), so the source's end says how many records were copied; the last
copied record is then found on DR from the nearest offset sync and checked by content before
the copy goes on. Offset syncs are written in MM2's format to the reverse flow's topic
(``mm2-offset-syncs.<source>.internal`` on DR, where MM2 would keep it for a DR -> source flow;
``mm2-offset-syncs.<dr>.internal`` on the source when the forward flow's own syncs are there under
the same keys, ``syncs_location``):
one at each gap in DR's offsets (transaction markers, compaction) and every ``offset.lag.max``
records, so a group's DR offset translates exactly with a short walk.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from typing import Iterable

from mm2spec.errors import OperationRefused
from mm2spec.live.records import RecordReader
from mm2spec.live.types import FailoverState, Record
from mm2spec.live.writer import RecordWriter
from mm2spec.mm2 import policy
from mm2spec.mm2.records import OffsetSync
from mm2spec.ops.playbooks.context import Context
from mm2spec.spec.model import MirrorFlow

# MM2 creates its offset-syncs topics compacted with one partition; the reverse flow's is the same.
SYNCS_TOPIC_CONFIGS = {"cleanup.policy": "compact"}
# Progress is reported at most this often while a partition is copied (the clock read every
# PROGRESS_EVERY_RECORDS records).
PROGRESS_EVERY_S = 1.0
PROGRESS_EVERY_RECORDS = 5000
# Records per fetch of the copy: larger than a translation's reads, a copy reads whole ranges.
COPY_BATCH = 5000


@dataclass(frozen=True)
class BackPartition:
    """One partition of the reverse copy: DR's records from ``dr_start`` go to the source from
    ``source_start`` on, one for one."""

    dr_topic: str
    partition: int
    dr_start: int
    topic: str
    source_start: int

    @classmethod
    def of(cls, state: FailoverState) -> list["BackPartition"]:
        return [cls(*p) for p in state.failback]


@dataclass
class Copied:
    """What one pass did for one partition."""

    part: BackPartition
    before: int
    """Records already copied when the pass began."""
    now: int = 0
    """Records this pass copied."""
    dr_next: int = 0
    """DR offset the next pass starts from."""
    dr_end: int = 0
    """DR's end when the pass ended."""

    @property
    def total(self) -> int:
        return self.before + self.now


def syncs_location(flow: MirrorFlow) -> str:
    """Where MM2 would keep the offset syncs of a DR -> source flow: on DR (location ``source``),
    unless the forward flow keeps its own there under that very name and the same keys (its
    location ``target``: ``mm2-offset-syncs.<source>.internal`` on DR, and identity naming), then
    on the source (location ``target``; with identity naming no flow runs the other way). Read as
    the forward flow's, the copy's (DR offset, source offset) pairs would translate the source's
    offsets wrongly, and the forward syncs a failback writes would pass for the copy's anchors.
    (With a prefix the keys differ: ``primary.orders`` against ``orders``.)"""
    on_dr = (policy.offset_syncs_cluster(flow.target, flow.source, "source"),
             policy.offset_syncs_topic(flow.target, flow.source, "source", flow.separator))
    same_keys = flow.replication_policy == "identity"
    return "target" if same_keys and on_dr == (flow.offset_syncs_cluster, flow.offset_syncs_topic) else "source"


def syncs_cluster(flow: MirrorFlow) -> str:
    """The alias of the cluster holding the reverse flow's offset syncs (``syncs_location``)."""
    return policy.offset_syncs_cluster(flow.target, flow.source, syncs_location(flow))


def syncs_topic(flow: MirrorFlow) -> str:
    """The reverse flow's offset-syncs topic (MM2's name for a DR -> source flow, ``syncs_location``)."""
    return policy.offset_syncs_topic(flow.target, flow.source, syncs_location(flow), flow.separator)


def syncs_end(ctx: Context, flow: MirrorFlow) -> int:
    """The reverse offset-syncs topic's end now (0 when it does not exist yet)."""
    if not ctx.admin(syncs_cluster(flow)).topics([syncs_topic(flow)], with_configs=False):
        return 0
    return ctx.client(RecordReader, syncs_cluster(flow)).watermarks(syncs_topic(flow), 0)[1]


def reverse_syncs(ctx: Context, flow: MirrorFlow, since: int) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """The reverse offset syncs (DR offset, source offset) per DR partition written at or after
    offset ``since`` of the syncs topic (by this failback), in the order written."""
    found: dict[tuple[str, int], list[tuple[int, int]]] = {}
    if not ctx.admin(syncs_cluster(flow)).topics([syncs_topic(flow)], with_configs=False):
        return found
    reader = ctx.client(RecordReader, syncs_cluster(flow))
    low, high = reader.watermarks(syncs_topic(flow), 0)
    for record in reader.iterate(syncs_topic(flow), 0, max(low, since), high):
        sync = OffsetSync.from_record(record.key, record.value)
        found.setdefault((sync.topic, sync.partition), []).append((sync.upstream_offset, sync.downstream_offset))
    return found


def anchors(part: BackPartition, syncs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Points where DR and the source agree inside this copy, sorted: the copy's start and every
    sync written since (a sync from an earlier, abandoned copy of the partition is left out)."""
    found = {(part.dr_start, part.source_start)}
    found |= {(u, d) for u, d in syncs if u >= part.dr_start and d >= part.source_start}
    return sorted(found)


def _resume(part: BackPartition, copied: int, syncs: list[tuple[int, int]], dr: RecordReader,
            source: RecordReader) -> int:
    """The DR offset to copy next when ``copied`` records are on the source already: the last
    copied record found on DR from the nearest anchor below it, checked by content."""
    if copied == 0:
        return part.dr_start
    last = part.source_start + copied - 1
    u, d = max(a for a in anchors(part, syncs) if a[1] <= last)
    records = read_upto(dr, part.dr_topic, part.partition, u, u + (last - d) + 1 + GAP_SLACK)
    index = last - d
    mine = source.read(part.topic, part.partition, last, last + 1)
    if index >= len(records) or not mine or records[index].content() != mine[0].content():
        raise OperationRefused(f"{part.topic}-{part.partition}: the source's record at {last} is not the copy of "
                               f"DR's record expected there: something else wrote to {part.topic} during the "
                               "failback; stop that writer, then decide with --stranded=rebuild")
    return records[index].offset + 1


def read_upto(reader: RecordReader, topic: str, partition: int, start: int, end: int) -> list[Record]:
    """Records from ``start`` to ``end`` or the partition's end, whichever comes first (a read past
    the end would wait for records that do not exist)."""
    return reader.read(topic, partition, start, min(end, reader.watermarks(topic, partition)[1]))


# DR offsets a resume reads past the records it expects, for gaps (transaction markers) among them.
GAP_SLACK = 64


def copy_pass(ctx: Context, flow: MirrorFlow, parts: list[BackPartition], syncs_from: int, *, dry_run: bool,
              fresh: set[str] = frozenset()) -> list[Copied]:
    """Copy every partition up to DR's end now; with ``dry_run`` only count what would be copied
    (topics in ``fresh`` counted as if empty: a check of a rebuild deletes nothing)."""
    dr = ctx.client(RecordReader, flow.target, read_committed=True)
    source = ctx.client(RecordReader, flow.source)
    syncs = reverse_syncs(ctx, flow, syncs_from)
    results = []
    writer = syncs_writer = None
    lag_max = max(1, flow.offset_lag_max)
    for part in parts:
        source_end = source.watermarks(part.topic, part.partition)[1]
        copied = 0 if part.topic in fresh else source_end - part.source_start
        if copied < 0:
            raise OperationRefused(f"{part.topic}-{part.partition} ends at {source_end}, before where the failback "
                                   f"started writing ({part.source_start}): the topic was truncated or recreated "
                                   "during the failback; re-run with --stranded=rebuild")
        start = _resume(part, copied, syncs.get((part.dr_topic, part.partition), []), dr, source)
        dr_end = dr.watermarks(part.dr_topic, part.partition)[1]
        result = Copied(part, copied, dr_next=start, dr_end=dr_end)
        results.append(result)
        if dry_run or start >= dr_end:
            result.now = max(0, dr_end - start) if dry_run else 0
            continue
        if writer is None:
            writer = ctx.client(RecordWriter, flow.source)
            syncs_writer = ctx.client(RecordWriter, syncs_cluster(flow))
            ctx.admin(syncs_cluster(flow)).create_topic(syncs_topic(flow), 1, -1, SYNCS_TOPIC_CONFIGS, exist_ok=True)
        _copy_partition(ctx, flow, result, dr.messages(part.dr_topic, part.partition, start, dr_end, COPY_BATCH),
                        writer, syncs_writer, lag_max, syncs_topic(flow))
        writer.flush()
        syncs_writer.flush()
    return results


def _copy_partition(ctx: Context, flow: MirrorFlow, result: Copied, messages: Iterable, writer: RecordWriter,
                    syncs_writer: RecordWriter, lag_max: int, topic: str = "") -> None:
    """Copy one partition's messages in order, an offset sync at the start, at each gap in DR's
    offsets and every ``lag_max`` records, to ``topic`` (``syncs_topic``, named once a pass)."""
    part = result.part
    expected, since_sync, shown = None, 0, time.monotonic()
    for message in messages:
        offset = message.offset()
        if offset != expected or since_sync >= lag_max:
            sync = OffsetSync(part.dr_topic, part.partition, offset, part.source_start + result.total)
            syncs_writer.send_raw(topic, sync.record_key(), sync.record_value())
            since_sync = 0
        writer.send_message(part.topic, part.partition, message)
        result.now += 1
        since_sync += 1
        expected = offset + 1
        if not result.now % PROGRESS_EVERY_RECORDS and time.monotonic() - shown >= PROGRESS_EVERY_S:
            shown = time.monotonic()
            ctx.progress(f"{flow.name}: {part.dr_topic}-{part.partition}: {result.now} records copied back "
                         f"(DR offset {offset} of {result.dr_end})")
    result.dr_next = max(expected or 0, result.dr_end)


def translation_anchors(part: BackPartition, forward: list[tuple[int, int]], reverse: list[tuple[int, int]],
                        rebuilt: bool) -> list[tuple[int, int]]:
    """Every (DR offset, source offset) pair known to hold the same record, sorted: the forward
    mirror's syncs turned around (before the switch; none for a rebuilt topic, whose offsets
    changed) and the reverse copy's anchors (after it)."""
    before = [] if rebuilt else [(d, u) for u, d in forward if d < part.dr_start and u < part.source_start]
    return sorted(set(before) | set(anchors(part, reverse)))


def dr_offset_at(part: BackPartition, anchors_in_copy: list[tuple[int, int]], source_offset: int) -> int:
    """The DR offset of the record the copy wrote at ``source_offset`` (from ``part.source_start``
    to before the copy's end): ``copied_offset`` the other way. Between two anchors both offsets
    advance together (a gap in DR's offsets has an anchor at the record after it), so the nearest
    anchor at or below gives it; of two anchors at one source offset (the copy start, then the
    sync at the first record copied after a gap), the later names the record."""
    i = bisect.bisect_right([d for _u, d in anchors_in_copy], source_offset) - 1
    u, d = anchors_in_copy[max(i, 0)]
    return u + (source_offset - d)


def copied_offset(part: BackPartition, anchors_in_copy: list[tuple[int, int]], committed: int, source_end: int) -> int:
    """Where a DR offset at or after the copy start lands on the source. The copy writes each DR
    record once, in order, with an anchor at every gap in DR's offsets, so between two anchors
    the offsets advance together; a position inside a gap (a transaction marker) or past DR's last
    record lands on the next anchor, or the source's end."""
    i = bisect.bisect_right(anchors_in_copy, (committed, float("inf"))) - 1
    u, d = anchors_in_copy[max(i, 0)]
    landed = d + (committed - u)
    if i + 1 < len(anchors_in_copy):
        landed = min(landed, anchors_in_copy[i + 1][1])
    return min(landed, source_end)
