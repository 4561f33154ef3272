"""Silent loss: records the source deleted before the mirror copied them, and source topics
deleted and created again under the same name. MM2 (and the Spark job) copy on past both
without a word; ``verify.loss`` finds them, per partition, and so do the failover's last check
(``verify.failover``) and the failback's preflight, for their reports.

- **Deleted before mirrored.** The mirror's position on a source partition is one past the last
  source offset it copied: its latest offset sync ``(u, d)`` says source record ``u`` is DR record
  ``d``, and DR's records after ``d`` continue the source's from ``u + 1``. Duplicates and
  transaction markers on DR only make that position larger, so a loss is never overstated. A
  position below the source's log-start offset (``ListOffsets`` earliest) means the records in
  between were deleted (retention, DeleteRecords) before they were mirrored: ``log start -
  position`` of them (offsets: a source transaction marker among them counts as one).
- **Recreated.** A topic ID changes when a topic is deleted and created again. The IDs each
  mirrored source topic and its DR copy had when a check first saw them are recorded on DR
  (``live.dr_state.read_topic_ids``, the DR-state topic); a source ID that differs while the DR
  copy is the same topic is a recreation (DR holds the old topic's records, the mirror copies the
  new one's after them). A DR copy with a new ID too was rebuilt: the new pair is recorded. Before
  any ID was recorded the offset syncs still tell: a sync at or past the source partition's end, or
  one whose source record is not the DR record it names, was written for another topic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from mm2spec.errors import KafkaOperationFailed, Mm2specError
from mm2spec.live.dr_state import STATE_TOPIC, read_topic_ids, write_topic_ids
from mm2spec.live.records import RecordReader
from mm2spec.ops.playbooks.context import Context
from mm2spec.ops.modules.topology import MirroredPartition, mirror_position, offset_syncs, partitions
from mm2spec.spec.model import MirrorFlow

DELETED = "deleted"
RECREATED = "recreated"
UNRECORDED = "topic IDs not recorded"
"""Fact: per flow name, why its topic IDs could not be recorded (e.g. no WRITE on the DR-state
topic): the check still runs, a later recreation is then found by the offset syncs alone."""


@dataclass(frozen=True)
class Loss:
    """Records a flow lost on one source partition (or, recreated, one topic)."""

    flow: str
    kind: str
    """``deleted`` (deleted on the source before they were mirrored) or ``recreated``."""
    topic: str
    """The source topic."""
    target_topic: str
    partition: int | None
    """None for a whole topic (its ID changed)."""
    records: int | None = None
    """Records deleted before they were mirrored (``deleted``); None where unknown."""
    position: int | None = None
    """``deleted``: the mirror's position (first offset it did not copy)."""
    log_start: int | None = None
    """``deleted``: the source partition's log-start offset now."""
    detail: str = ""

    @property
    def where(self) -> str:
        return self.topic if self.partition is None else f"{self.topic}-{self.partition}"

    def text(self) -> str:
        if self.kind == DELETED:
            return (f"{self.where}: {self.records} records (offsets {self.position}-{self.log_start - 1}) deleted "
                    "before they were mirrored")
        return f"{self.where}: recreated on the source ({self.detail})"

    def to_json(self) -> dict:
        return {"flow": self.flow, "kind": self.kind, "topic": self.topic, "drTopic": self.target_topic,
                "partition": self.partition, "records": self.records, "mirrorPosition": self.position,
                "logStart": self.log_start, "detail": self.detail}


def deleted_before_mirrored(position: int | None, log_start: int) -> int:
    """How many offsets below the source's log start the mirror had not copied yet: gone."""
    return 0 if position is None else max(0, log_start - position)


@dataclass(frozen=True)
class TopicIds:
    """What the recorded topic IDs say now (``compare_topic_ids``)."""

    recreated: dict[str, tuple[str, str, int]]
    """Per source topic recreated since its IDs were recorded: (recorded ID, live ID, recorded since ms)."""
    record: dict[str, dict]
    """The record to keep (a recreated topic keeps its old entry, so it is reported until its DR
    copy is rebuilt)."""
    first_seen: frozenset[str]
    """Topics recorded in this run (first seen, or their DR copy rebuilt): only the offset syncs
    can tell whether they were recreated before."""


def compare_topic_ids(recorded: Mapping[str, Mapping], live: Mapping[str, tuple[str | None, str | None]],
                      now_ms: int) -> TopicIds:
    """Compare the recorded IDs with ``live``: per source topic its (source ID, DR copy's ID),
    either None where the topic is absent. A DR copy with another ID than recorded was rebuilt:
    the pair is recorded afresh."""
    recreated: dict[str, tuple[str, str, int]] = {}
    record = {topic: dict(ids) for topic, ids in recorded.items()}
    first_seen = set()
    for topic, (source_id, dr_id) in sorted(live.items()):
        if source_id is None:
            continue
        seen = recorded.get(topic)
        if seen is None or seen.get("dr") != dr_id:
            record[topic] = {"source": source_id, "dr": dr_id, "since": now_ms}
            first_seen.add(topic)
        elif seen.get("source") != source_id:
            recreated[topic] = (str(seen.get("source")), source_id, int(seen.get("since", 0)))
    return TopicIds(recreated, record, frozenset(first_seen))


def find_losses(ctx: Context, flow: MirrorFlow) -> list[Loss]:
    """The flow's silent losses now (the source must answer); records the topic IDs first seen."""
    parts = partitions(ctx, flow)
    by_topic: dict[str, list[MirroredPartition]] = {}
    for part in parts:
        by_topic.setdefault(part.topic, []).append(part)
    ids = _topic_ids(ctx, flow, sorted(by_topic))
    losses = [Loss(flow=flow.name, kind=RECREATED, topic=topic, target_topic=flow.target_topic(topic), partition=None,
                   detail=f"topic ID {old} when recorded at {_utc(since)}, {new} now")
              for topic, (old, new, since) in sorted(ids.recreated.items())]
    flagged = set(ids.recreated)
    syncs = offset_syncs(ctx, flow)
    source = ctx.client(RecordReader, flow.source)
    dr = ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once)
    admin = ctx.admin(flow.source)
    for topic, topic_parts in sorted(by_topic.items()):
        if topic in flagged:
            continue
        count = max(p.partition for p in topic_parts) + 1
        starts, ends = admin.log_starts(topic, count), admin.end_offsets(topic, count)
        for part in topic_parts:
            known = syncs.get((topic, part.partition))
            if not known:
                continue  # nothing mirrored yet that a sync records: no position to compare
            upstream, downstream = known[-1]
            log_start, end = starts[part.partition], ends[part.partition]
            base = dict(flow=flow.name, topic=topic, target_topic=part.target_topic, partition=part.partition)
            by_syncs = topic in ids.first_seen  # a recorded ID already says whether it was recreated
            if upstream >= end and by_syncs:
                losses.append(Loss(kind=RECREATED, detail=f"the mirror copied its offset {upstream}, the partition "
                                   f"now ends at {end}", **base))
                continue
            if upstream >= log_start or upstream >= end:
                if by_syncs and upstream < end and not _same_record(source, dr, part, upstream, downstream):
                    losses.append(Loss(kind=RECREATED, detail=f"its record at {upstream} is not the one the mirror "
                                       f"copied to {part.target_topic}-{part.partition}@{downstream}", **base))
                continue  # the mirror is past the log start
            position = mirror_position((upstream, downstream), dr.watermarks(part.target_topic, part.partition)[1])
            lost = deleted_before_mirrored(position, log_start)
            if lost:
                losses.append(Loss(kind=DELETED, records=lost, position=position, log_start=log_start, **base))
    return losses


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _same_record(source: RecordReader, dr: RecordReader, part: MirroredPartition, upstream: int, downstream: int) -> bool:
    """Whether the source record a sync names is (by content) the DR record it names; True when
    either is no longer there to compare."""
    mine = source.read(part.topic, part.partition, upstream, upstream + 1)
    copy = dr.read(part.target_topic, part.partition, downstream, downstream + 1)
    if not mine or not copy or mine[0].offset != upstream or copy[0].offset != downstream:
        return True
    return mine[0].content() == copy[0].content()


def _live_ids(ctx: Context, flow: MirrorFlow, names: list[str]) -> dict[str, tuple[str | None, str | None]]:
    source_ids = ctx.admin(flow.source).topic_ids(names)
    dr_ids = ctx.admin(flow.target).topic_ids([flow.target_topic(n) for n in names])
    return {n: (source_ids.get(n), dr_ids.get(flow.target_topic(n))) for n in names}


def _topic_ids(ctx: Context, flow: MirrorFlow, names: list[str]) -> TopicIds:
    """The flow's topic IDs compared with those recorded on DR; new ones recorded (not in check mode)."""
    cluster = ctx.spec.cluster(flow.target)
    recorded = read_topic_ids(cluster, ctx.spec.name, flow.name, ctx.secrets)
    ids = compare_topic_ids(recorded, _live_ids(ctx, flow, names), int(ctx.clock() * 1000))
    if ids.record != recorded and not ctx.options.check:
        try:
            write_topic_ids(cluster, ctx.spec.name, flow.name, ids.record, ctx.secrets)
        except KafkaOperationFailed as exc:
            ctx.facts.setdefault(UNRECORDED, {})[flow.name] = (f"the topic IDs could not be recorded in {STATE_TOPIC} "
                                                               f"on {flow.target} ({exc})")
    return ids


def losses_noted(ctx: Context, flow: MirrorFlow) -> tuple[list[Loss], str]:
    """``find_losses`` for a report that must go on without it (a failover, a failback): the
    losses, and a note for the task's outcome (what was found, or why nothing could be checked)."""
    try:
        found = find_losses(ctx, flow)
    except Mm2specError as exc:
        return [], f"; silent loss not checked ({exc})"
    if not found:
        return [], ""
    return found, (f"; silent loss on {len(found)} partitions or topics (records deleted on {flow.source} before "
                   "they were mirrored, or a topic recreated): see the report's loss section")


def record_rebuilt(ctx: Context, flow: MirrorFlow, topics: list[str]) -> None:
    """mm2spec itself recreated these source topics (a failback's ``--stranded=rebuild``): their new
    IDs are the ones to compare with from now on."""
    cluster = ctx.spec.cluster(flow.target)
    record = read_topic_ids(cluster, ctx.spec.name, flow.name, ctx.secrets)
    now = int(ctx.clock() * 1000)
    for topic, (source_id, dr_id) in _live_ids(ctx, flow, sorted(topics)).items():
        if source_id is not None:
            record[topic] = {"source": source_id, "dr": dr_id, "since": now}
    write_topic_ids(cluster, ctx.spec.name, flow.name, record, ctx.secrets)


def summary(flow: MirrorFlow, losses: list[Loss]) -> str:
    """What was lost and what to do, in one message."""
    deleted = [loss for loss in losses if loss.kind == DELETED]
    recreated = [loss for loss in losses if loss.kind == RECREATED]
    parts = []
    if deleted:
        shown = "; ".join(loss.text() for loss in deleted[:5]) + (f"; and {len(deleted) - 5} more" if len(deleted) > 5 else "")
        parts.append(f"{sum(loss.records or 0 for loss in deleted)} records deleted on {flow.source} before they were "
                     f"mirrored ({shown}): DR will never have them; replay them from their producers or a backup if "
                     f"DR needs them, and raise the topics' retention.ms on {flow.source} (or the mirror's "
                     "throughput) so the mirror stays ahead of deletion")
    if recreated:
        topics = sorted({loss.topic for loss in recreated})
        shown = "; ".join(loss.text() for loss in recreated[:5])
        parts.append(f"{', '.join(topics)} deleted and recreated on {flow.source} ({shown}): DR's copy mixes the old "
                     f"topic's records with the new one's; delete {', '.join(flow.target_topic(t) for t in topics)} on "
                     f"{flow.target}, re-mirror from the new topic's start (mm2spec plan / pulumi up, then restart the "
                     "mirror) and verify again")
    return f"{flow.name}: " + "; ".join(parts)
