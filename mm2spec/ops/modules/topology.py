"""What a flow mirrors right now: its partitions (source name, partition, DR name) and groups,
read from the live source, or from DR alone when the source is gone; and the flows around it that
a failover must know of: the reverse flows of an active-active pair, whose copies on the flow's
source (``dr.orders`` on primary) are remote topics, and identity fan-in into the same DR topics."""

from __future__ import annotations

from dataclasses import dataclass

from mm2spec.errors import Mm2specError, OperationRefused
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.mm2.offsets import Sync, current_syncs
from mm2spec.mm2.records import Checkpoint, OffsetSync
from mm2spec.ops.playbooks.context import Context
from mm2spec.spec.model import MirrorFlow


@dataclass(frozen=True)
class MirroredPartition:
    topic: str
    partition: int
    target_topic: str


def partitions(ctx: Context, flow: MirrorFlow) -> list[MirroredPartition]:
    """Every mirrored partition: from the source's topics, or (source unreachable) from DR's."""
    if ctx.options.source_unreachable:
        live = ctx.admin(flow.target).topics(with_configs=False)
        by_source = {flow.source_topic(name): t for name, t in live.items()}
        selected = flow.mirrored_topics([n for n in by_source if n])
        return [MirroredPartition(s, p, by_source[s].name) for s in selected for p in range(by_source[s].partitions)]
    live = ctx.admin(flow.source).topics(with_configs=False)
    return [MirroredPartition(name, p, flow.target_topic(name))
            for name in flow.mirrored_topics(live) for p in range(live[name].partitions)]


def groups(ctx: Context, flow: MirrorFlow) -> list[str]:
    """The flow's groups on the source that ``--limit group=`` lets through."""
    names = ctx.client(GroupOffsets, flow.source).groups()
    return [g for g in flow.mirrored_groups(names) if ctx.group_selected(g)]


def mirror_position(last_sync: tuple[int, int] | None, dr_end: int) -> int | None:
    """One past the last source offset the mirror copied, from its latest offset sync ``(u, d)``
    (source record ``u`` is DR record ``d``, and DR's records after ``d`` continue the source's
    from ``u + 1``) and DR's end; None without a sync (the position is not known). Duplicates and
    transaction markers on DR only make it larger."""
    if last_sync is None:
        return None
    upstream, downstream = last_sync
    return upstream + max(1, dr_end - downstream)


def offset_syncs(ctx: Context, flow: MirrorFlow) -> dict[tuple[str, int], list[Sync]]:
    """The offset syncs MM2 still translates with (``current_syncs``), per source partition, sorted
    (the topic is read whole)."""
    found: dict[tuple[str, int], list[Sync]] = {}
    admin = ctx.admin(flow.offset_syncs_cluster)
    if not admin.topics([flow.offset_syncs_topic], with_configs=False):
        return found
    reader = ctx.client(RecordReader, flow.offset_syncs_cluster)
    for record in reader.read_topic(flow.offset_syncs_topic):
        sync = OffsetSync.from_record(record.key, record.value)
        found.setdefault((sync.topic, sync.partition), []).append((sync.upstream_offset, sync.downstream_offset))
    return {key: current_syncs(written) for key, written in found.items()}


def checkpoints(ctx: Context, flow: MirrorFlow, with_age: bool = False) -> dict:
    """The latest checkpoint per (group, DR topic, partition) on the flow's target; with
    ``with_age`` as (checkpoint, the record's timestamp in ms)."""
    found: dict = {}
    if not ctx.admin(flow.target).topics([flow.checkpoints_topic], with_configs=False):
        return found
    for record in ctx.client(RecordReader, flow.target).read_topic(flow.checkpoints_topic):
        checkpoint = Checkpoint.from_record(record.key, record.value)
        key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
        found[key] = (checkpoint, record.timestamp) if with_age else checkpoint
    return found


def reverse_flows(ctx: Context, flow: MirrorFlow) -> list[MirrorFlow]:
    """Active-active: the spec's flows the other way (``flow.target`` -> ``flow.source``), selected
    or not. Each copies topics of ``flow.target`` to ``flow.source`` under remote names
    (DefaultReplicationPolicy: ``dr.orders`` on primary); a group of ``flow`` reading such a copy
    resumes on the original when it moves to ``flow.target``, and back on the copy when it returns."""
    return [f for f in ctx.spec.mirrors if f.source == flow.target and f.target == flow.source]


def turned(syncs: list[Sync]) -> list[Sync]:
    """A reverse flow's syncs ``(original, copy)`` turned around to ``(copy, original)``, sorted: the
    anchors of a walk from the copy back to the original (MM2 translates only the other way)."""
    return sorted((copy, original) for original, copy in syncs)


def refuse_merged_fan_in(ctx: Context, flow: MirrorFlow) -> None:
    """Refuse a flow whose DR topics another source's flow writes too: fan-in with identity naming
    merges both sources' records into one DR topic, so no walk can tell whose record is whose and a
    failback would copy the other source's records into this one. A source that does not answer is
    not checked (the walk still stops at the first record that is not this source's)."""
    others = [f for f in ctx.spec.mirrors if f.target == flow.target and f.source != flow.source]
    if flow.replication_policy != "identity" or ctx.options.source_unreachable or not others:
        return
    mine = {p.target_topic for p in partitions(ctx, flow)}
    for other in others:
        try:
            live = ctx.admin(other.source).topics(with_configs=False)
        except Mm2specError:
            continue
        shared = sorted(mine & {other.target_topic(t) for t in other.mirrored_topics(live)})
        if shared:
            raise OperationRefused(
                f"{flow.name} and {other.name} both write {', '.join(shared[:5])} on {flow.target} (fan-in with "
                "replicationPolicy: identity merges two sources into one DR topic): no translation can tell whose "
                f"record is whose, and a failback would copy {other.source}'s records into {flow.source}. Give the "
                "fan-in flows replicationPolicy: default (each source's copy is then <source>.<topic>); nothing "
                "was changed")
