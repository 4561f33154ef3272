"""Modules ``offsets.preflight``, ``offsets.translate`` and ``offsets.commit``: the selected groups
checked before anything is written, every selected group's source position translated to DR
exactly (see ``translate``), then committed there.

Planned (the source answers): walk from the nearest offset sync on both clusters, by content.
Unplanned (``--source-unreachable``): the checkpoints already on DR (MM2's rounding down: no
record skipped, re-reads bounded by the sync before it), with the bound reported per partition.

Active-active (``primary -> dr`` and ``dr -> primary``, DefaultReplicationPolicy): a group on
primary that also reads ``dr.orders`` (the reverse flow's copy of dr's ``orders``) resumes on dr's
own ``orders``: the same walk, from the copy back to the original, over the reverse flow's syncs
turned around (``topology.turned``). MM2 translates only from the original to the copy.
"""

from __future__ import annotations

import bisect
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Mapping

from mm2spec.errors import OperationRefused
from mm2spec.live.dr_state import read_flow_states
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.live.types import Record
from mm2spec.ops.playbooks.context import Context
from mm2spec.ops.playbooks.module import Module, arguments
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.sections import RPO, RPO_SECTION, TRANSLATIONS, TRANSLATIONS_SECTION
from mm2spec.ops.modules.topology import (
    MirroredPartition, checkpoints, groups, offset_syncs, partitions, refuse_merged_fan_in, reverse_flows, turned,
)
from mm2spec.ops.modules.translate import (
    REPLAY_HORIZON, Alignment, Anchor, ContentIds, PartitionWindow, Translation, align, align_many, merged,
    mm2_translation, nearest_sync, repeated_after,
)
from mm2spec.spec.model import MirrorFlow

BY_FLOW = "translations by flow"
"""The same translations by flow name, for ``offsets.commit`` and ``verify.failover``."""
# A walk first reads this many DR records past the span the source window implies (room for
# at-least-once duplicates and transaction markers), then doubles until it is complete.
WALK_SLACK = REPLAY_HORIZON + 64
# Windows of one partition closer than this are read as one range (reading a few thousand records
# between them costs less than another round trip per window).
PREFETCH_GAP = 2000
# Records read past a committed offset, to find the first record the group has not consumed
# when transaction markers or compaction leave gaps right after it.
LOOKAHEAD = 16
# Translations between two progress lines (a progress line per walk costs more than the walk).
PROGRESS_EVERY = 100


class Windows:
    """Cached reads of one cluster's partitions, so many groups on one partition read it once."""

    def __init__(self, reader: RecordReader):
        self.reader = reader
        self.windows: dict[tuple[str, int], PartitionWindow] = {}
        self.ends: dict[tuple[str, int], tuple[int, int]] = {}

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        if (topic, partition) not in self.ends:
            self.ends[(topic, partition)] = self.reader.watermarks(topic, partition)
        return self.ends[(topic, partition)]

    def records(self, topic: str, partition: int, start: int, end: int) -> list[Record]:
        low, high = self.bounds(topic, partition)
        return self._read(topic, partition, start, end).between(max(start, low), min(end, high))

    def records_with_ids(self, topic: str, partition: int, start: int, end: int,
                         contents: ContentIds) -> tuple[list[Record], list[int]]:
        """``records`` and their content ids."""
        low, high = self.bounds(topic, partition)
        return self._read(topic, partition, start, end).between_with_ids(max(start, low), min(end, high), contents)

    def _read(self, topic: str, partition: int, start: int, end: int) -> PartitionWindow:
        """The partition's window, holding [start, end) within the partition's bounds."""
        low, high = self.bounds(topic, partition)
        start, end = max(start, low), min(end, high)
        window = self.windows.setdefault((topic, partition), PartitionWindow())
        for lo, hi in window.missing(start, end):
            window.add(lo, hi, self.reader.read(topic, partition, lo, hi))
        return window

    def prefetch(self, ranges: Mapping[tuple[str, int], list[tuple[int, int]]]) -> None:
        """Read these ranges of many partitions: their bounds in one request, then each partition's
        first range not read yet in one ``read_many`` for all partitions, its second in the next
        (most partitions have one): a pass costs about what one range read costs."""
        unknown = [tp for tp in ranges if tp not in self.ends]
        if unknown:
            self.ends.update(self.reader.bounds(unknown))
        todo: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for tp, wanted in ranges.items():
            low, high = self.ends[tp]
            window = self.windows.setdefault(tp, PartitionWindow())
            for start, end in wanted:
                todo.setdefault(tp, []).extend(window.missing(max(start, low), min(end, high)))
        todo = {tp: gaps for tp, gaps in todo.items() if gaps}
        while todo:
            batch = {tp: gaps.pop(0) for tp, gaps in todo.items()}
            for tp, found in self.reader.read_many(batch).items():
                self.windows[tp].add(*batch[tp], found)
            todo = {tp: gaps for tp, gaps in todo.items() if gaps}


def exact_translation(group: str, part: MirroredPartition, committed: int, syncs: list[tuple[int, int]],
           source: Windows, dr: Windows) -> Translation:
    src_low, src_high = source.bounds(part.topic, part.partition)
    dr_low, dr_high = dr.bounds(part.target_topic, part.partition)
    anchor = nearest_sync(syncs, committed)
    if anchor is None or anchor.upstream < src_low:
        # No sync at or below the commit (none written yet, or compacted away): both logs' starts
        # agree when the mirror began at the source's beginning; the walk checks that by content.
        anchor = Anchor(src_low, dr_low, from_sync=False)
    base = dict(group=group, topic=part.topic, partition=part.partition, target_topic=part.target_topic,
                committed=committed, method="exact", mm2_offset=mm2_translation(anchor, committed))
    if committed < src_low:
        return Translation(dr_offset=None, note=f"committed offset {committed} is before the source's log start "
                           f"{src_low} (deleted by retention): reset the group", **base)
    src = source.records(part.topic, part.partition, anchor.upstream, committed + LOOKAHEAD)
    span = (committed - anchor.upstream) + WALK_SLACK
    while True:
        walked = dr.records(part.target_topic, part.partition, anchor.downstream, anchor.downstream + span)
        result = align([r for r in src if r.offset <= committed], walked, committed, anchor)
        if result.complete or result.mismatch is not None or anchor.downstream + span >= dr_high:
            break
        span *= 2
    if result.mismatch is not None:
        return Translation(dr_offset=None, note=f"DR record {part.target_topic}-{part.partition}@{result.mismatch} is "
                           "not a copy of a source record near the commit: was DR written by something else?", **base)
    consumed = [r for r in src if r.offset < committed]
    upcoming = [r for r in src if r.offset >= committed]
    if repeated_after(consumed, result.last_copied):
        # The source side replays records the group read already (a copy walked back to its
        # original): its last record of its own is the last one found on DR, and a repeat is not next.
        seen = {r.content() for r in consumed}
        consumed = [r for r in consumed if r.offset <= result.last_copied]
        upcoming = [r for r in upcoming if r.content() not in seen]
    after = dr.records(part.target_topic, part.partition, result.dr_offset, result.dr_offset + LOOKAHEAD)
    before = [r for r in walked if r.offset < result.dr_offset]
    last_consumed = consumed[-1] if consumed else None
    verified = (last_consumed is None or (bool(before) and before[-1].content() == last_consumed.content()))
    unmirrored = 0
    if last_consumed is not None and (result.last_copied is None or result.last_copied < last_consumed.offset):
        unmirrored = sum(1 for r in consumed if result.last_copied is None or r.offset > result.last_copied)
        verified = False
    skipped = 0
    if upcoming and after and after[0].content() != upcoming[0].content():
        skipped = -1  # the next DR record is not the group's next record: unknown, reported
    mm2 = base["mm2_offset"]
    return Translation(dr_offset=result.dr_offset, skipped=skipped, reread=0 if verified or unmirrored else -1,
                       mm2_reread=None if mm2 is None else max(0, result.dr_offset - mm2), unmirrored=unmirrored,
                       verified=verified and skipped == 0,
                       note=(f"{unmirrored} consumed records never reached DR" if unmirrored else ""), **base)


def _planned(ctx: Context, flow: MirrorFlow) -> list[Translation]:
    parts = {(p.topic, p.partition): p for p in partitions(ctx, flow)}
    selected = groups(ctx, flow)
    states = ctx.client(GroupOffsets, flow.source).describe(selected)
    syncs = offset_syncs(ctx, flow)
    source = Windows(ctx.client(RecordReader, flow.source))
    dr = Windows(ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once))
    wanted = [(group, parts[tp], committed) for group in selected
              for tp, committed in sorted(states[group].offsets.items()) if tp in parts]
    found = translate_all(wanted, syncs, source, dr, lambda index, group, part: ctx.progress(
        f"{flow.name}: translating {index + 1}/{len(wanted)}: {group} {part.topic}-{part.partition}"))
    for back in reverse_flows(ctx, flow):
        found += remote_translations(ctx, back, selected, states, copies_on=flow.source)
    return found


def remote_translations(ctx: Context, back: MirrorFlow, selected: list[str], states: Mapping,
                        copies_on: str) -> list[Translation]:
    """Active-active: each group's positions on the copies reverse flow ``back`` wrote, moved
    exactly to the originals, or the other way.

    ``copies_on == back.target`` (a failover): ``states`` are the groups on ``back.target``, the
    positions are on ``back``'s copies (``dr.orders`` on primary) and land on its originals
    (``orders`` on dr), walking from the copy to the original by ``back``'s syncs turned around.
    ``copies_on == back.source`` (a failback): ``states`` are on ``back.source``, the positions are
    on the originals and land on the copies, ``back``'s own way. Either way each translation's
    ``target_topic`` is where the group commits."""
    to_original = copies_on == back.target
    eos = {"read_committed": True} if back.exactly_once else {}
    copies = Windows(ctx.client(RecordReader, back.target, **eos))
    originals = Windows(ctx.client(RecordReader, back.source))
    source, dr = (copies, originals) if to_original else (originals, copies)
    syncs, walks = {}, []
    for (topic, partition), known in offset_syncs(ctx, back).items():
        syncs[(back.target_topic(topic), partition) if to_original else (topic, partition)] = \
            turned(known) if to_original else known
    for part in partitions(ctx, back):
        # The walk goes from where the group is (``part.topic`` of the walk) to where it commits.
        walk = MirroredPartition(part.target_topic, part.partition, part.topic) if to_original else part
        walks += [(group, walk, states[group].offsets[(walk.topic, walk.partition)]) for group in selected
                  if (walk.topic, walk.partition) in states[group].offsets]
    found = []
    for walked in translate_all(walks, syncs, source, dr, lambda index, group, walk: ctx.progress(
            f"{back.name}: translating {index + 1}/{len(walks)}: {group} {walk.topic}-{walk.partition} (remote topic)")):
        # MM2 has no translation from a copy back to its original: nothing to compare with.
        found.append(replace(walked, remote=back.name, **({"mm2_offset": None, "mm2_reread": None}
                                                          if to_original else {})))
    return found


def translate_all(wanted: list[tuple[str, MirroredPartition, int]], syncs: Mapping, source: Windows, dr: Windows,
                  progress: Callable[[int, str, MirroredPartition], None] = lambda *_: None) -> list[Translation]:
    """Each (group, partition, committed offset) of ``wanted`` translated, in order: what
    ``exact_translation`` gives for each. The windows are read first for all of them
    (``_prefetch``); a position several groups share is translated once (a walk depends only on the
    partition and the offset), and a partition's positions from one offset sync share one walk
    (``translate_partition``): many groups at random offsets put many positions near each sync."""
    by_partition: dict[MirroredPartition, dict[int, str]] = {}
    for group, part, committed in wanted:
        by_partition.setdefault(part, {}).setdefault(committed, group)
    _prefetch([(part, committed) for part, held in by_partition.items() for committed in held], syncs, source, dr)
    share = {part: 0 for part in by_partition}
    for _group, part, _committed in wanted:
        share[part] += 1
    contents = ContentIds()
    walked: dict[tuple[MirroredPartition, int], Translation] = {}
    done, shown = 0, -1
    for part, held in by_partition.items():
        if done // PROGRESS_EVERY > shown // PROGRESS_EVERY or shown < 0:
            progress(done, next(iter(held.values())), part)
            shown = done
        for committed, translation in translate_partition(part, held, syncs.get((part.topic, part.partition), []),
                                                          source, dr, contents).items():
            walked[(part, committed)] = translation
        done += share[part]
    found = []
    for group, part, committed in wanted:
        same = walked[(part, committed)]
        found.append(same if same.group == group else replace(same, group=group))
    return found


def translate_partition(part: MirroredPartition, held: Mapping[int, str], syncs: list[tuple[int, int]],
                        source: Windows, dr: Windows, contents: ContentIds) -> dict[int, Translation]:
    """``exact_translation`` of each committed offset of ``held`` (offset -> the group to name) on
    one partition: the offsets with the same anchor walked together (``align_many``), each read
    once with its content ids. An offset whose first walk is not the last (it reads further on DR),
    or whose source side replays what the group read (``repeated_after``), is translated by
    ``exact_translation`` itself."""
    src_low, _src_high = source.bounds(part.topic, part.partition)
    dr_low, dr_high = dr.bounds(part.target_topic, part.partition)
    found: dict[int, Translation] = {}
    by_anchor: dict[Anchor, list[int]] = {}
    for committed in sorted(held):
        anchor = nearest_sync(syncs, committed)
        if committed < src_low:  # nothing to walk: exact_translation says why
            found[committed] = exact_translation(held[committed], part, committed, syncs, source, dr)
            continue
        if anchor is None or anchor.upstream < src_low:
            anchor = Anchor(src_low, dr_low, from_sync=False)  # as exact_translation chooses it
        by_anchor.setdefault(anchor, []).append(committed)
    for anchor, commits in by_anchor.items():
        src, src_ids = source.records_with_ids(part.topic, part.partition, anchor.upstream, commits[-1] + LOOKAHEAD,
                                               contents)
        # Each walk first reads as far as exact_translation's first window: the one for the last offset reaches furthest.
        ends = [anchor.downstream + (committed - anchor.upstream) + WALK_SLACK for committed in commits]
        walked, walked_ids = dr.records_with_ids(part.target_topic, part.partition, anchor.downstream, ends[-1], contents)
        results = align_many(src, src_ids, walked, walked_ids, list(zip(commits, ends)), anchor)
        sides = (src, src_ids, [r.offset for r in src]), (walked_ids, [r.offset for r in walked], ends[-1])
        for committed, end, result in zip(commits, ends, results):
            translation = None
            if result.complete or result.mismatch is not None or end >= dr_high:  # exact_translation's first walk is its last
                translation = _translated(held[committed], part, committed, anchor, result, *sides, dr, contents)
            found[committed] = translation or exact_translation(held[committed], part, committed, syncs, source, dr)
    return found


def _translated(group: str, part: MirroredPartition, committed: int, anchor: Anchor, result: Alignment,
                source: tuple[list[Record], list[int], list[int]], walked: tuple[list[int], list[int], int], dr: Windows,
                contents: ContentIds) -> Translation | None:
    """What ``exact_translation`` makes of ``result``, the first walk from ``anchor`` (``source``:
    records from the anchor on, their content ids and offsets; ``walked``: the DR records' ids and
    offsets from the anchor up to where they were read, at or past the walk's end), by content ids;
    None when consumed records come after the last one found on DR (unmirrored, or repeats:
    ``repeated_after``): ``exact_translation`` then."""
    src, src_ids, src_offsets = source
    walked_ids, walked_offsets, read_to = walked
    base = dict(group=group, topic=part.topic, partition=part.partition, target_topic=part.target_topic,
                committed=committed, method="exact", mm2_offset=mm2_translation(anchor, committed))
    if result.mismatch is not None:
        return Translation(dr_offset=None, note=f"DR record {part.target_topic}-{part.partition}@{result.mismatch} is "
                           "not a copy of a source record near the commit: was DR written by something else?", **base)
    consumed = bisect.bisect_left(src_offsets, committed)  # src[:consumed] were consumed
    upcoming = bisect.bisect_left(src_offsets, committed + LOOKAHEAD)  # src[consumed:upcoming] come next
    last_copied = result.last_copied
    if consumed and last_copied is not None and src_offsets[consumed - 1] > last_copied:
        return None  # consumed records after the last one found on DR: unmirrored, or repeats (repeated_after)
    dr_offset = result.dr_offset
    before = bisect.bisect_left(walked_offsets, dr_offset)  # the walk's records before the resume point
    verified = not consumed or (before > 0 and walked_ids[before - 1] == src_ids[consumed - 1])
    unmirrored = 0
    if consumed and last_copied is None:
        unmirrored, verified = consumed, False
    skipped = 0
    if upcoming > consumed:
        # The first DR record at or after the resume point: from what the walks read, when that reaches it.
        if dr_offset + LOOKAHEAD <= read_to:
            near = before < len(walked_offsets) and walked_offsets[before] < dr_offset + LOOKAHEAD
            after = walked_ids[before:before + 1] if near else []
        else:
            after = dr.records_with_ids(part.target_topic, part.partition, dr_offset, dr_offset + LOOKAHEAD, contents)[1]
        if after and after[0] != src_ids[consumed]:
            skipped = -1  # the next DR record is not the group's next record: unknown, reported
    mm2 = base["mm2_offset"]
    return Translation(dr_offset=dr_offset, skipped=skipped, reread=0 if verified or unmirrored else -1,
                       mm2_reread=None if mm2 is None else max(0, dr_offset - mm2), unmirrored=unmirrored,
                       verified=verified and skipped == 0,
                       note=(f"{unmirrored} consumed records never reached DR" if unmirrored else ""), **base)


def _prefetch(positions: list[tuple[MirroredPartition, int]], syncs: Mapping, source: Windows, dr: Windows) -> None:
    """Read each partition's windows for all positions at once, merged (``PREFETCH_GAP``), and every
    partition of a cluster in one pass (``Windows.prefetch``): many groups on many partitions cost
    a few reads per cluster instead of a few per partition."""
    by_partition: dict[MirroredPartition, list[tuple[int, int, int, int]]] = {}
    for part, committed in positions:
        anchor = nearest_sync(syncs.get((part.topic, part.partition), []), committed)
        if anchor is not None:
            span = committed - anchor.upstream
            by_partition.setdefault(part, []).append((anchor.upstream, committed + LOOKAHEAD, anchor.downstream,
                                                      anchor.downstream + span + WALK_SLACK + LOOKAHEAD))
    on_source = {(part.topic, part.partition): merged([(w[0], w[1]) for w in windows], PREFETCH_GAP)
                 for part, windows in by_partition.items()}
    on_dr = {(part.target_topic, part.partition): merged([(w[2], w[3]) for w in windows], PREFETCH_GAP)
             for part, windows in by_partition.items()}
    if source.reader is dr.reader:
        source.prefetch(on_source)
        dr.prefetch(on_dr)
        return
    # The two clusters at once, each with its own consumer: one waits on its brokers while the
    # other turns records into ``Record``s.
    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = pool.submit(source.prefetch, on_source)
        dr.prefetch(on_dr)
        reading.result()


def _unplanned(ctx: Context, flow: MirrorFlow) -> list[Translation]:
    syncs = offset_syncs(ctx, flow) if flow.offset_syncs_cluster == flow.target else {}
    found = []
    for (group, target_topic, partition), cp in sorted(checkpoints(ctx, flow).items()):
        topic = flow.source_topic(target_topic)
        if topic is None or not ctx.group_selected(group):
            continue
        anchor = nearest_sync(syncs.get((topic, partition), []), cp.upstream_offset)
        if anchor is not None:
            # The syncs on DR may be newer than the checkpoint (emitted before the sync for its
            # offset arrived): MM2's rule on them is never ahead of the true position either.
            offset = max(cp.downstream_offset, mm2_translation(anchor, cp.upstream_offset))
            bound = max(0, anchor.downstream + (cp.upstream_offset - anchor.upstream) - offset)
            how = f"from the sync at {anchor.upstream}"
        else:
            offset, bound, how = cp.downstream_offset, -1, "no offset sync on DR to bound it"
        found.append(Translation(group=group, topic=topic, partition=partition, target_topic=target_topic,
                                 committed=cp.upstream_offset, dr_offset=offset, method="checkpoint",
                                 reread=bound, mm2_offset=cp.downstream_offset,
                                 mm2_reread=None if anchor is None else max(0, offset + bound - cp.downstream_offset),
                                 note=f"re-read about {bound} ({how}; exact when the mirror wrote no duplicates), "
                                      "plus what the group committed after this checkpoint"
                                      if bound >= 0 else f"re-read unknown ({how}), never skipped"))
    return found


def _rpo(ctx: Context, flow: MirrorFlow) -> list[dict]:
    """Unplanned: per DR partition, the last record mirrored before the switch (the RPO's edge)."""
    dr = ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once)
    found = []
    for part in partitions(ctx, flow):
        last = dr.last_record(part.target_topic, part.partition)
        found.append({"flow": flow.name, "topic": part.target_topic, "partition": part.partition,
                      "drEnd": dr.watermarks(part.target_topic, part.partition)[1],
                      "lastMirroredTimestamp": last.timestamp if last else None,
                      "recordsBehind": None})
    return found


def _selected_groups(ctx: Context, flow: MirrorFlow) -> list[str]:
    """The flow's groups ``--limit group=`` lets through: on the source, or (source unreachable)
    those MM2 checkpointed on DR."""
    if not ctx.options.source_unreachable:
        return groups(ctx, flow)
    return sorted({group for group, _topic, _partition in checkpoints(ctx, flow) if ctx.group_selected(group)})


def _active_members(ctx: Context, flow: MirrorFlow, cluster: str, states: Mapping, outcome: str) -> dict:
    """The groups of ``states`` with members on ``cluster`` (they would read there before their
    offsets are set); OperationRefused unless --skip-active leaves them alone."""
    active = {g: s.members for g, s in states.items() if s.members}
    if active and not ctx.options.skip_active:
        shown = "; ".join(f"{g}: {', '.join(m)}" for g, m in sorted(active.items()))
        raise OperationRefused(f"{flow.name}: groups with active members on {cluster} ({shown}): stop those "
                               f"consumers first, or pass --skip-active to leave these groups alone; {outcome}")
    return active


def preflight(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Before anything is written: ``--limit group=`` selects some group, and no selected group has
    members on DR (they would read there before their offsets are translated) unless --skip-active;
    ``offsets.commit`` checks the same, but only after the mirror stopped."""
    outcomes, selected_any = [], False
    for flow in ctx.flows:
        refuse_merged_fan_in(ctx, flow)
        _refuse_reverse_failed_over(ctx, flow)
    for flow in ctx.flows:
        names = _selected_groups(ctx, flow)
        selected_any = selected_any or bool(names)
        states = ctx.client(GroupOffsets, flow.target).describe(names) if names else {}
        active = _active_members(ctx, flow, flow.target, states, "nothing was changed")
        left = f"; {len(active)} active there left alone (--skip-active)" if active else ""
        outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len(names)} groups selected, none consuming on "
                                f"{flow.target}{left}", flow=flow.name))
    if ctx.options.limit_groups and not selected_any:
        where = "checkpointed on DR" if ctx.options.source_unreachable else "on the source"
        raise OperationRefused(f"--limit group={ctx.options.limit_groups}: no group of the selected flows "
                               f"({', '.join(f.name for f in ctx.flows)}) matches {where}: check the pattern "
                               "(a full match of the group name); nothing was changed")
    return outcomes


def _refuse_reverse_failed_over(ctx: Context, flow: MirrorFlow) -> None:
    """Active-active: refuse when the other direction is failed over (or switching): its groups moved
    to ``flow.source`` and its mirror is stopped, so failing ``flow`` over too would leave both
    mirrors stopped and the groups of both directions moving back and forth. Not checked with the
    source unreachable (the record is on it)."""
    backs = reverse_flows(ctx, flow)
    if not backs or ctx.options.source_unreachable:
        return
    for name, state in read_flow_states(ctx.spec, backs, ctx.secrets).items():
        raise OperationRefused(
            f"{flow.name}: {name}, the other direction of this active-active pair, is {state.phase} (recorded on "
            f"{state.target} since {state.started_at}): its consumers moved to {flow.source} and its mirror is "
            f"stopped; failing {flow.name} over as well would stop both mirrors and move groups both ways. Fail "
            f"{name} back first (mm2spec failback --limit flow={name}); nothing was changed")


def translate(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Translate every selected group's committed offsets; fails when any partition cannot be."""
    outcomes, everything, by_flow = [], [], {}
    for flow in ctx.flows:
        found = _unplanned(ctx, flow) if ctx.options.source_unreachable else _planned(ctx, flow)
        if ctx.options.source_unreachable:
            ctx.facts.setdefault(RPO, []).extend(_rpo(ctx, flow))
        everything += found
        by_flow[flow.name] = found
        bad = [t for t in found if t.dr_offset is None]
        cluster = flow.target if ctx.options.source_unreachable else flow.source
        if bad:
            outcomes.append(Outcome("failed", cluster, f"{flow.name}: {len(bad)} partitions cannot be translated: "
                                    + "; ".join(f"{t.group} {t.topic}-{t.partition}: {t.note}" for t in bad[:5]),
                                    flow=flow.name))
            continue
        groups_seen = len({t.group for t in found})
        skipped = sum(max(0, t.skipped) for t in found)
        reread = sum(max(0, t.reread) for t in found)
        outcomes.append(Outcome("ok", cluster, f"{flow.name}: {groups_seen} groups, {len(found)} partitions translated "
                                f"({found[0].method if found else 'nothing to translate'}); {skipped} skipped, {reread} re-read"
                                + _remote_note(ctx, flow, found), flow=flow.name))
    if ctx.options.limit_groups and not everything:
        raise OperationRefused(f"--limit group={ctx.options.limit_groups}: no group of the selected flows matches "
                               "(or none has committed offsets on mirrored topics)")
    ctx.facts[TRANSLATIONS] = everything
    ctx.facts[BY_FLOW] = by_flow
    return outcomes


def _remote_note(ctx: Context, flow: MirrorFlow, found: list[Translation]) -> str:
    backs = reverse_flows(ctx, flow)
    if not backs:
        return ""
    if ctx.options.source_unreachable:
        return (f"; not moved: positions on {flow.source}'s copies of {flow.target}'s topics ("
                f"{', '.join(b.name for b in backs)}): they are on {flow.source}, and MM2 checkpoints only the other "
                "way; on those originals the groups start from what they committed there, or their reset policy")
    remote = [t for t in found if t.remote]
    return (f"; {len(remote)} on remote topics ({', '.join(sorted({t.topic for t in remote}))} on {flow.source}) "
            f"moved to their originals on {flow.target}") if remote else ""


def commit(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Commit the translated offsets on DR: only groups with no active members there (refused
    otherwise, before anything is written, unless --skip-active), never backwards unless
    --allow-rewind; partitions already at their translated offset are left alone."""
    return commit_translations(ctx, ctx.flows, ctx.facts.get(BY_FLOW, {}))


def commit_translations(ctx: Context, flows: list[MirrorFlow], by_flow: Mapping[str, list[Translation]],
                        to_source: bool = False) -> list[Outcome]:
    """Commit each translation's offset on its flow's target (or, failing back, its source), at
    the translation's ``target_topic``."""
    outcomes = []
    for flow in flows:
        cluster = flow.source if to_source else flow.target
        wanted: dict[str, dict[tuple[str, int], int]] = {}
        for t in by_flow.get(flow.name, []):
            if t.dr_offset is not None:
                wanted.setdefault(t.group, {})[(t.target_topic, t.partition)] = t.dr_offset
        if not wanted:
            outcomes.append(Outcome("ok", cluster, f"{flow.name}: no group to commit", flow=flow.name))
            continue
        client = ctx.client(GroupOffsets, cluster)
        current = client.describe(wanted)
        active = _active_members(ctx, flow, cluster, current, "nothing was committed")
        planned = [(group, _changes(ctx, group, offsets, current[group].offsets))
                   for group, offsets in sorted(wanted.items()) if group not in active]
        if not ctx.options.check:
            # One bulk commit: the groups' requests in flight together, not a round trip each.
            client.commit_many({group: changes for group, (changes, _kept) in planned})
        changes_of = dict(planned)
        for group in sorted(wanted):
            if group in active:
                outcomes.append(Outcome("skipped", cluster, f"{group}: active on {cluster}, left alone (--skip-active)",
                                        flow=flow.name))
            else:
                changes, kept = changes_of[group]
                outcomes.append(_commit_outcome(ctx, flow, cluster, group, changes, kept, current[group].offsets))
    return outcomes


def _changes(ctx: Context, group: str, offsets: dict[tuple[str, int], int],
             current: Mapping[tuple[str, int], int]) -> tuple[dict[tuple[str, int], int], list[str]]:
    """The partitions of ``group`` to commit (not already there, never backwards unless
    --allow-rewind), and what stays where it is."""
    changes, kept = {}, []
    for tp, offset in sorted(offsets.items()):
        before = current.get(tp)
        if before == offset:
            continue
        if before is not None and before > offset and not ctx.options.allow_rewind:
            kept.append(f"{tp[0]}-{tp[1]} at {before} (translated {offset})")
            continue
        changes[tp] = offset
    return changes, kept


def _commit_outcome(ctx: Context, flow: MirrorFlow, cluster: str, group: str, changes: dict[tuple[str, int], int],
                    kept: list[str], current: Mapping[tuple[str, int], int]) -> Outcome:
    diff = tuple((f"{group} {t}-{p}", "-" if current.get((t, p)) is None else str(current.get((t, p))), str(o))
                 for (t, p), o in sorted(changes.items()))
    # A group that read on after an earlier run is ahead of the translation: left there, never rewound.
    ahead = (f"left ahead of the translated offsets, where it has read to: {'; '.join(kept)} "
             "(--allow-rewind moves it back)") if kept else ""
    if not changes:
        return Outcome("ok", cluster, f"{group}: {ahead or 'already at the translated offsets'}", flow=flow.name)
    verb = "would commit" if ctx.options.check else "committed"
    done = f"{group}: {verb} {len(changes)} partition{'' if len(changes) == 1 else 's'}"
    return Outcome("changed", cluster, f"{done}; {ahead}" if ahead else done, diff, flow=flow.name)


MODULES = [
    Module("offsets.preflight", "Check the selected groups before anything is written (some selected, none active on DR).",
           preflight, writes=False),
    Module("offsets.translate", "Translate every selected group's source offsets to DR (exact when the source answers).",
           translate, sections=(TRANSLATIONS_SECTION, RPO_SECTION), writes=False),
    Module("offsets.commit", "Commit the translated offsets on DR (inactive groups only, never backwards).", commit,
           arguments(), needs=("offsets.translate",), ends_rto=True),
]
