"""Modules ``failback.*``: bring the clients of failed-over flows back to the source cluster.

Incremental: only what DR received after the switch is copied back (``reverse``), from each
partition's DR end at the switch to the source's end then; groups are translated DR -> source
exactly (the same walk by content as the failover), committed on the source, and the forward
mirror restarts from the source's end, so nothing that came back is mirrored again (identity
naming has no loop guard: the restart position is the guard). Before it restarts, each group's
offset on the source goes to DR as MM2 would have it (``ready_records``): an offset sync at each
position in what came back and a checkpoint per group and partition, so DR is ready for the next
failover (``verify``, RemoteClusterUtils) whether the groups consume again or not.

Records stranded on the source (written there, never mirrored: an unplanned failover, or a
writer that was not fenced) are counted per partition before anything is written. The default is
to refuse; ``--stranded=keep`` leaves them where they are, before the failback point (groups are
translated past them); ``--stranded=rebuild`` deletes such a topic on the source and copies DR's
whole log into it (destructive: check mode says what it would delete).

Every step reads where it stands from the clusters and the DR-state record (phase
``failing-back``, with each partition's copy start), so an interrupted failback is finished by
running it again, and a finished one (no record left) changes nothing.

Active-active (``failback.remote``): the groups the failover moved also read DR's own topics
(``orders`` on dr) that the reverse flow mirrors to the source (``dr.orders`` on primary); once the
forward mirror restarted (with Spark, the job that runs the reverse flow too), their positions
there are translated exactly to the reverse flow's copies, as soon as the copies hold them, and
committed on the source.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Mapping

from mm2spec.engines import START_TIMEOUT_S
from mm2spec.errors import MirrorError, OperationRefused
from mm2spec.live.dr_state import STATE_TOPIC, clear_state, read_flow_states, write_state
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.live.types import FailoverState
from mm2spec.live.writer import RecordWriter
from mm2spec.mm2.offsets import Sync, current_syncs, latest_sync
from mm2spec.mm2.offsets import translate as mm2_translate
from mm2spec.mm2.records import Checkpoint, OffsetSync
from mm2spec.ops.modules import mirror, reverse
from mm2spec.ops.playbooks.context import DEFAULT_WAIT_S, Context
from mm2spec.ops.playbooks.module import TIMEOUT_ARG, Module, arguments
from mm2spec.ops.modules.offsets import Windows, commit_translations, exact_translation, remote_translations
from mm2spec.ops.modules.loss import losses_noted, record_rebuilt
from mm2spec.ops.modules.sections import LOSS, LOSS_SECTION, TRANSLATIONS, TRANSLATIONS_SECTION
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.reverse import BackPartition
from mm2spec.ops.modules.topology import (MirroredPartition, checkpoints, groups, offset_syncs, partitions,
                                          refuse_merged_fan_in, reverse_flows)
from mm2spec.ops.modules.translate import Anchor, Translation, align
from mm2spec.spec.model import MirrorFlow

STRANDED = "stranded"
"""Fact: per flow, {(source topic, partition): records stranded on the source}."""
REBUILD = "rebuild"
"""Fact: per flow, the source topics to rebuild from DR."""
BACK = "translations back"
"""Fact: per flow, each group's DR offsets translated to the source."""
CHOICES = ("keep", "rebuild")
# A copy pass that leaves fewer records than this behind DR's end counts as caught up: the clients
# still write to DR until they are fenced, so "zero behind" may never be seen before that.
CAUGHT_UP_RECORDS = 1000
# Passes before the fence: each copies what arrived during the previous one.
MAX_PASSES = 10
CHECKPOINTS_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


# ------------------------------------------------------------------------------------ state
def pending(ctx: Context, *, before_restart: bool = False) -> list[tuple[MirrorFlow, FailoverState]]:
    """The selected flows with a recorded failover (the ones a failback has work for); with
    ``before_restart``, only those whose forward mirror was not restarted yet (for them the copy,
    translation and commit are still to do)."""
    states = ctx.failover_states()
    work = [(f, states[f.name]) for f in ctx.flows if f.name in states]
    return [(f, s) for f, s in work if not (before_restart and s.restarted)]


def _nothing(ctx: Context) -> list[Outcome]:
    states = ctx.failover_states()
    return [Outcome("ok", f.target, f"{f.name}: done before the forward mirror restarted" if f.name in states
                    else f"{f.name}: no failover recorded: nothing to fail back", flow=f.name) for f in ctx.flows]


def preflight(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """A completed failover is recorded, the source answers, and each topic of the switch is there."""
    work = pending(ctx)
    if not work:
        return _nothing(ctx)
    if ctx.options.limit_groups and not any(_dr_groups(ctx, flow) for flow, _state in work):
        raise OperationRefused(f"--limit group={ctx.options.limit_groups}: no group of the failed-over flows "
                               f"({', '.join(f.name for f, _s in work)}) matches on DR: check the pattern (a full "
                               "match of the group name); nothing was changed")
    outcomes = []
    for flow, _state in work:
        refuse_merged_fan_in(ctx, flow)
    for flow, state in work:
        if state.phase == "switching":
            raise OperationRefused(f"{flow.name}: the failover stopped half-way (phase switching, since "
                                   f"{state.started_at}): finish it first (mm2spec failover), then fail back")
        ctx.admin(flow.source).ping()
        up, seen = mirror.running(ctx, flow)
        if up and not state.restarted:
            raise OperationRefused(f"{flow.name}: the forward mirror runs ({seen}) while the flow is failed over: it "
                                   "would copy DR's records back onto DR; stop it (mm2spec mirror --stop, or stop "
                                   "the connectors), then re-run; nothing was changed")
        live = ctx.admin(flow.source).topics(sorted({p[0] for p in state.positions}), with_configs=False)
        gone = sorted({p[0] for p in state.positions if p[0] not in live})
        note = f"; gone from {flow.source}: {', '.join(gone[:10])}" if gone else ""
        if state.phase == "failed-over":  # before a rebuild: what the forward mirror lost before the switch
            losses, lost = losses_noted(ctx, flow)
            ctx.facts.setdefault(LOSS, []).extend(losses)
            note += lost
        outcomes.append(Outcome("ok", flow.source, f"{flow.name}: {state.phase} since {state.started_at} "
                                f"({state.mode}); {len(state.positions)} partitions at the switch{note}",
                                flow=flow.name))
    return outcomes


def _mirrored_end(ctx: Context, flow: MirrorFlow, topic: str, partition: int, dr_topic: str, dr_end: int,
                  source_end: int, syncs: list[tuple[int, int]]) -> int | None:
    """Unplanned failover: one past the last source record that reached DR before the switch,
    found by walking both logs from the last offset sync below DR's end, by content; None when
    DR's records are not copies of the source's (the topic was recreated since)."""
    source = ctx.client(RecordReader, flow.source)
    dr = ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once)
    below = [s for s in syncs if s[1] < dr_end]
    low = source.watermarks(topic, partition)[0]
    anchor = Anchor(*below[-1]) if below and below[-1][0] >= low else Anchor(low, dr.watermarks(dr_topic, partition)[0], False)
    copies = dr.read(dr_topic, partition, anchor.downstream, dr_end)
    if not copies:
        return anchor.upstream
    result = align(source.read(topic, partition, anchor.upstream, source_end), copies, source_end, anchor)
    if result.mismatch is not None or result.last_copied is None:
        return None  # DR's records are not copies of this log's: recreated since, or never the same
    return result.last_copied + 1


def _count_stranded(ctx: Context, flow: MirrorFlow, state: FailoverState) -> tuple[dict, set[str]]:
    """Records stranded per source partition, and topics that are gone or went backwards."""
    source = ctx.client(RecordReader, flow.source)
    live = ctx.admin(flow.source).topics(sorted({p[0] for p in state.positions}), with_configs=False)
    syncs = offset_syncs(ctx, flow) if state.mode == "unplanned" else {}
    stranded, broken = {}, set()
    for topic, partition, source_end_then, dr_topic, dr_end in state.positions:
        if topic not in live or live[topic].partitions <= partition:
            broken.add(topic)
            continue
        end = source.watermarks(topic, partition)[1]
        if source_end_then < 0:
            source_end_then = _mirrored_end(ctx, flow, topic, partition, dr_topic, dr_end, end,
                                            syncs.get((topic, partition), [])) if end or not dr_end else None
        if source_end_then is None or end < source_end_then:
            broken.add(topic)
        elif end > source_end_then:
            stranded[(topic, partition)] = end - source_end_then
    return stranded, broken


def stranded(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Count the records stranded on the source; refuse unless ``--stranded`` says what to do."""
    work = pending(ctx, before_restart=True)
    if not work:
        return _nothing(ctx)
    outcomes, choice = [], ctx.options.stranded
    for flow, state in work:
        if state.phase == "failing-back":
            outcomes.append(Outcome("ok", flow.source, f"{flow.name}: decided when the failback began: "
                                    f"{state.stranded or 'nothing stranded'}", flow=flow.name))
            continue
        counts, broken = _count_stranded(ctx, flow, state)
        total = sum(counts.values())
        ctx.facts.setdefault(STRANDED, {})[flow.name] = counts
        detail = ", ".join(f"{t}-{p}: {n}" for (t, p), n in sorted(counts.items())[:20])
        if broken and choice != "rebuild":
            raise OperationRefused(f"{flow.name}: {', '.join(sorted(broken))} on {flow.source} is gone or holds fewer "
                                   "records than at the switch, or other ones (deleted or recreated): --stranded=rebuild "
                                   "recreates it from DR; nothing was changed")
        if total and choice is None:
            raise OperationRefused(
                f"{flow.name}: {total} records on {flow.source} never reached DR ({detail}); nothing was changed. "
                "Choose: --stranded=keep leaves them on the source, before the failback point (the groups are "
                "translated past them; read them yourself if they matter), or --stranded=rebuild deletes those "
                "topics on the source and copies DR's log into them (the stranded records are lost there)")
        rebuild = (broken | {t for t, _ in counts}) if choice == "rebuild" else set()
        ctx.facts.setdefault(REBUILD, {})[flow.name] = rebuild
        outcomes.append(_stranded_outcome(ctx, flow, state, counts, rebuild, total, detail))
    return outcomes


def _stranded_outcome(ctx: Context, flow: MirrorFlow, state: FailoverState, counts: dict, rebuild: set[str],
                      total: int, detail: str) -> Outcome:
    if not total and not rebuild:
        return Outcome("ok", flow.source, f"{flow.name}: no record stranded on {flow.source}", flow=flow.name)
    if ctx.options.stranded == "keep":
        return Outcome("ok", flow.source, f"{flow.name}: keeping {total} stranded records on {flow.source} before the "
                       f"failback point ({detail})", flow=flow.name)
    source = ctx.client(RecordReader, flow.source)
    live = ctx.admin(flow.source).topics(sorted(rebuild), with_configs=False)
    held = {t: sum(_held(source, t, p) for t2, p, *_rest in state.positions if t2 == t) if t in live else 0
            for t in rebuild}
    what = "; ".join(f"{t} ({held[t]} records there, {sum(n for (t2, _p), n in counts.items() if t2 == t)} of them "
                     "stranded)" for t in sorted(rebuild))
    verb = "would delete and rebuild from DR" if ctx.options.check else "will delete and rebuild from DR"
    return Outcome("changed", flow.source, f"{flow.name}: {verb}: {what}",
                   tuple((f"{t} on {flow.source}", "as is", "rebuilt from DR (DESTRUCTIVE)") for t in sorted(rebuild)),
                   flow=flow.name)


def _held(reader: RecordReader, topic: str, partition: int) -> int:
    low, high = reader.watermarks(topic, partition)
    return high - low


# ------------------------------------------------------------------------------------ begin
def _copy_plan(ctx: Context, flow: MirrorFlow, state: FailoverState) -> list[BackPartition]:
    """Where each partition's copy starts: DR's end at the switch and the source's end now (or DR's
    log start and 0 for a topic to rebuild); the recorded plan once the failback began."""
    if state.phase == "failing-back":
        return BackPartition.of(state)
    rebuild = ctx.facts.get(REBUILD, {}).get(flow.name, set())
    source = ctx.client(RecordReader, flow.source)
    dr = ctx.client(RecordReader, flow.target)
    parts = []
    for topic, partition, _source_end, dr_topic, dr_end in state.positions:
        if topic in rebuild:
            parts.append(BackPartition(dr_topic, partition, dr.watermarks(dr_topic, partition)[0], topic, 0))
        else:
            parts.append(BackPartition(dr_topic, partition, dr_end, topic, source.watermarks(topic, partition)[1]))
    return parts


def begin(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Record ``failing-back`` with each partition's copy start: from here on a re-run resumes."""
    work = pending(ctx, before_restart=True)
    if not work:
        return _nothing(ctx)
    outcomes = []
    for flow, state in work:
        if state.phase == "failing-back":
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: failing back since the recorded start "
                                    f"({len(state.failback)} partitions)", flow=flow.name))
            continue
        plan = _copy_plan(ctx, flow, state)
        decided = ctx.facts.get(STRANDED, {}).get(flow.name) or ctx.facts.get(REBUILD, {}).get(flow.name)
        choice = (ctx.options.stranded or "") if decided else ""
        new = replace(state, phase="failing-back", stranded=choice, syncs_from=reverse.syncs_end(ctx, flow),
                      failback=tuple((p.dr_topic, p.partition, p.dr_start, p.topic, p.source_start) for p in plan))
        if not ctx.options.check:
            write_state(ctx.spec.cluster(flow.target), new, ctx.secrets)
        verb = "would record" if ctx.options.check else "recorded"
        outcomes.append(Outcome("changed", flow.target, f"{flow.name}: {verb} failing-back in {STATE_TOPIC}",
                                ((f"{flow.name} state", state.phase, "failing-back"),), flow=flow.name))
    ctx.failover_states(refresh=not ctx.options.check)
    return outcomes


def rebuild(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Delete and recreate (empty) each source topic chosen for rebuilding, before the failback
    is recorded: a run interrupted after the delete finds the topic gone or empty and, with
    ``--stranded=rebuild`` again, recreates it; once recorded, the copy fills it."""
    outcomes = []
    for flow, state in pending(ctx, before_restart=True):
        chosen = sorted(ctx.facts.get(REBUILD, {}).get(flow.name, ())) if state.phase != "failing-back" else []
        if not chosen:
            outcomes.append(Outcome("ok", flow.source, f"{flow.name}: nothing to rebuild", flow=flow.name))
            continue
        admin = ctx.admin(flow.source)
        live = admin.topics(chosen, with_configs=True)
        todo = [t for t in chosen if t not in live or not _empty(ctx, flow, t, live[t].partitions)]
        if not ctx.options.check:
            dr_live = ctx.admin(flow.target).topics([flow.target_topic(t) for t in chosen], with_configs=True)
            for topic in chosen:
                if topic in todo or topic not in live:
                    model = live.get(topic) or dr_live[flow.target_topic(topic)]
                    _recreate(ctx, admin, topic, model.partitions, dict(model.configs), topic in live,
                              float(args.get("timeout", DEFAULT_WAIT_S)))
            record_rebuilt(ctx, flow, chosen)  # their new topic IDs are no silent recreation
        if not todo:
            outcomes.append(Outcome("ok", flow.source, f"{flow.name}: {', '.join(chosen)} empty already", flow=flow.name))
            continue
        verb = "would delete and recreate" if ctx.options.check else "deleted and recreated"
        outcomes.append(Outcome("changed", flow.source, f"{flow.name}: {verb} {', '.join(todo)} (empty, to be "
                                "filled from DR)", tuple((t, "as is", "recreated empty") for t in todo), flow=flow.name))
    return outcomes or _nothing(ctx)


def _empty(ctx: Context, flow: MirrorFlow, topic: str, partition_count: int) -> bool:
    source = ctx.client(RecordReader, flow.source)
    return all(source.watermarks(topic, p) == (0, 0) for p in range(partition_count))


def _recreate(ctx: Context, admin, topic: str, partition_count: int, configs: dict, exists: bool,
              timeout: float) -> None:
    if exists:
        admin.delete_topic(topic)
        mirror.wait_until(ctx, lambda: not admin.topics([topic], with_configs=False), timeout,
                          lambda: f"waiting for {topic} to be deleted", f"{topic} was not deleted")
    admin.create_topic(topic, partition_count, -1, configs, exist_ok=False)


# ------------------------------------------------------------------------------------- copy
def copy(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Copy DR's new records back; ``final`` (after the fence) copies up to DR's very end and
    checks that it no longer moves."""
    final = bool(args.get("final", False))
    outcomes = []
    for flow, state in pending(ctx, before_restart=True):
        if state.phase != "failing-back" and not ctx.options.check:
            # Without the recorded copy start, a later run would take the copied records for
            # records stranded on the source.
            raise OperationRefused(f"{flow.name}: the failback is not recorded yet: run failback.begin before "
                                   "failback.copy")
        parts = _copy_plan(ctx, flow, state)
        start = time.monotonic()
        passes, results = 0, []
        while True:
            passes += 1
            results = reverse.copy_pass(ctx, flow, parts, _syncs_from(ctx, flow, state), dry_run=ctx.options.check,
                                        fresh=_not_rebuilt_yet(ctx, flow, state))
            behind = _behind(ctx, flow, results)
            if ctx.options.check or (behind == 0 if final else behind < CAUGHT_UP_RECORDS) or passes >= MAX_PASSES:
                break
        outcomes.append(_copy_outcome(ctx, flow, results, behind, final, passes, time.monotonic() - start))
    return outcomes or _nothing(ctx)


def _syncs_from(ctx: Context, flow: MirrorFlow, state: FailoverState) -> int:
    """Where this failback's reverse syncs start (check mode before the record exists: the end now)."""
    return state.syncs_from if state.phase == "failing-back" else reverse.syncs_end(ctx, flow)


def _not_rebuilt_yet(ctx: Context, flow: MirrorFlow, state: FailoverState) -> set[str]:
    """Check mode: the topics a run would rebuild still hold their old records (nothing was deleted)."""
    if not ctx.options.check or state.phase == "failing-back":
        return set()
    return set(ctx.facts.get(REBUILD, {}).get(flow.name, ()))


def _behind(ctx: Context, flow: MirrorFlow, results: list[reverse.Copied]) -> int:
    dr = ctx.client(RecordReader, flow.target, read_committed=True)
    return sum(max(0, dr.watermarks(r.part.dr_topic, r.part.partition)[1] - r.dr_next) for r in results)


def _copy_outcome(ctx: Context, flow: MirrorFlow, results: list, behind: int, final: bool, passes: int,
                  seconds: float) -> Outcome:
    now = sum(r.now for r in results)
    total = sum(r.total for r in results)
    if ctx.options.check:
        return Outcome("changed" if now else "ok", flow.source,
                       f"{flow.name}: would copy {now} records back to {flow.source} "
                       f"({total - now if total > now else sum(r.before for r in results)} there already)", flow=flow.name)
    if final and behind:
        raise MirrorError(f"{flow.name}: DR still grows ({behind} records behind after {passes} passes): a client still "
                          f"writes to {flow.target}; stop it (or list it in failover.clients with fence: true) "
                          "and re-run; nothing is lost")
    rate = f", {now / seconds:,.0f} records/s" if seconds > 0 and now else ""
    return Outcome("changed" if now else "ok", flow.source,
                   f"{flow.name}: copied {now} records back in {seconds:.1f}s{rate} ({total} since the switch; "
                   f"{behind} behind DR's end)", flow=flow.name)


# -------------------------------------------------------------------------------- translate
def _dr_groups(ctx: Context, flow: MirrorFlow) -> list[str]:
    names = ctx.client(GroupOffsets, flow.target).groups()
    return [g for g in flow.mirrored_groups(names) if ctx.group_selected(g)]


def translate(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Each group's DR offsets translated to the source exactly (walk by content from the
    nearest anchor: the forward syncs turned around before the switch, the copy's after it)."""
    outcomes = []
    for flow, state in pending(ctx, before_restart=True):
        parts = {(p.dr_topic, p.partition): p for p in _copy_plan(ctx, flow, state)}
        rebuilt = {p.topic for p in parts.values() if p.source_start == 0 and state.stranded == "rebuild"}
        selected = _dr_groups(ctx, flow)
        described = ctx.client(GroupOffsets, flow.target).describe(selected)
        forward = {} if all(p.topic in rebuilt for p in parts.values()) else offset_syncs(ctx, flow)
        back = reverse.reverse_syncs(ctx, flow, _syncs_from(ctx, flow, state))
        dr = Windows(ctx.client(RecordReader, flow.target, read_committed=True))
        source = Windows(ctx.client(RecordReader, flow.source))
        found = []
        later = _not_rebuilt_yet(ctx, flow, state)
        wanted = [(g, parts[tp], o) for g in selected for tp, o in sorted(described[g].offsets.items())
                  if tp in parts and parts[tp].topic not in later]
        copied = [w for w in wanted if w[2] >= w[1].dr_start]
        found += _translate_copied(ctx, flow, copied, back)
        walked = [w for w in wanted if w[2] < w[1].dr_start]
        for index, (group, part, committed) in enumerate(walked):
            ctx.progress(f"{flow.name}: translating back {index + 1}/{len(walked)} from before the switch: {group} "
                         f"{part.dr_topic}-{part.partition}")
            anchors = reverse.translation_anchors(part, forward.get((part.topic, part.partition), []),
                                                  back.get((part.dr_topic, part.partition), []), part.topic in rebuilt)
            found.append(exact_translation(group, MirroredPartition(part.dr_topic, part.partition, part.topic),
                                           committed, anchors, dr, source))
        ctx.facts.setdefault(BACK, {})[flow.name] = found
        # The report's translations: here ``sourceOffset`` is the offset on DR, the cluster the
        # group leaves, and ``drOffset`` the one it resumes at on the source.
        ctx.facts.setdefault(TRANSLATIONS, []).extend(found)
        bad = [t for t in found if t.dr_offset is None]
        if bad:
            raise OperationRefused(f"{flow.name}: {len(bad)} group partitions cannot be translated back: "
                                   + "; ".join(f"{t.group} {t.topic}-{t.partition}: {t.note}" for t in bad[:5]))
        skipped = sum(max(0, t.skipped) for t in found)
        reread = sum(max(0, t.reread) for t in found)
        outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len({t.group for t in found})} groups, {len(found)} "
                                f"partitions translated to {flow.source} (exact); {skipped} skipped, {reread} re-read",
                                flow=flow.name))
    return outcomes or _nothing(ctx)


def _translate_copied(ctx: Context, flow: MirrorFlow, wanted: list, back: Mapping) -> list[Translation]:
    """Groups positioned in what the copy wrote: the copy's anchors give the offset, and the
    records before and at it on both clusters (one sequential read per partition and side) check
    it: the group's last consumed record is the one before, its next record the one at it."""
    by_part: dict[BackPartition, list[tuple[str, int]]] = {}
    for group, part, committed in wanted:
        by_part.setdefault(part, []).append((group, committed))
    dr = ctx.client(RecordReader, flow.target, read_committed=True)
    source = ctx.client(RecordReader, flow.source)
    found = []
    for index, (part, positions) in enumerate(sorted(by_part.items(), key=lambda item: (item[0].dr_topic, item[0].partition))):
        ctx.progress(f"{flow.name}: translating back {part.dr_topic}-{part.partition} ({index + 1}/{len(by_part)}, "
                     f"{len(positions)} groups)")
        source_end = source.watermarks(part.topic, part.partition)[1]
        anchors = reverse.anchors(part, back.get((part.dr_topic, part.partition), []))
        # Check mode writes nothing: a position the copy has not reached yet lands where the copy
        # would write it (no gap assumed), unverified.
        reach = float("inf") if ctx.options.check else source_end
        landed = {o: int(reverse.copied_offset(part, anchors, o, reach)) for _g, o in positions}
        on_dr = dr.around(part.dr_topic, part.partition, landed)
        on_source = source.around(part.topic, part.partition, landed.values())
        for group, committed in positions:
            if landed[committed] > source_end:
                found.append(Translation(group=group, topic=part.dr_topic, partition=part.partition,
                                         target_topic=part.topic, committed=committed, dr_offset=landed[committed],
                                         method="exact", note="check mode: where the copy will put it (not yet verified)"))
                continue
            (dr_before, dr_next), (src_before, src_next) = on_dr[committed], on_source[landed[committed]]
            # At the copy start the record before may be a stranded one kept on the source: the
            # group consumed nothing since the switch, so it resumes at the copy's first record.
            verified = committed == part.dr_start or _same(dr_before, src_before)
            skipped = 0 if _same(dr_next, src_next) else -1
            exact = verified and not skipped  # else nothing is committed: the run stops, saying why
            found.append(Translation(group=group, topic=part.dr_topic, partition=part.partition, target_topic=part.topic,
                                     committed=committed, dr_offset=landed[committed] if exact else None, method="exact",
                                     skipped=skipped, reread=0 if verified else -1, verified=verified and not skipped,
                                     note="" if exact else
                                     f"DR offset {committed} lands at {landed[committed]} on {flow.source} (anchors "
                                     f"{anchors[:3]}...), but the records around it differ: DR {_show(dr_before)}, "
                                     f"{_show(dr_next)}; {flow.source} {_show(src_before)}, {_show(src_next)}"))
    return found


def _show(record) -> str:
    return "none" if record is None else f"@{record.offset} ts {record.timestamp}"


def _same(a, b) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.content() == b.content())


def commit(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Commit the translated offsets on the source (inactive groups only, never backwards)."""
    flows = [f for f, _s in pending(ctx, before_restart=True)]
    by_flow = {f.name: ctx.facts.get(BACK, {}).get(f.name, []) for f in flows}
    return commit_translations(ctx, flows, by_flow, to_source=True) if flows else _nothing(ctx)


# ------------------------------------------------------------------------- forward restart
def _forward_start(ctx: Context, flow: MirrorFlow) -> dict[tuple[str, int], tuple[int, str, int]]:
    """Per mirrored source partition: the source's end now, the DR topic and DR's end now."""
    source = ctx.client(RecordReader, flow.source)
    dr = ctx.client(RecordReader, flow.target, read_committed=True)
    live_dr = ctx.admin(flow.target).topics(with_configs=False)
    found = {}
    for part in partitions(ctx, flow):
        dr_end = dr.watermarks(part.target_topic, part.partition)[1] if part.target_topic in live_dr else 0
        found[(part.topic, part.partition)] = (source.watermarks(part.topic, part.partition)[1], part.target_topic, dr_end)
    return found


@dataclass(frozen=True)
class ReadyRecords:
    """What a failback writes before the forward mirror restarts, so that DR is ready for the next
    failover at once, whether the groups consume again or not: MM2's emitters (the Spark job,
    MirrorCheckpointConnector) checkpoint a group only through an offset sync at or below its
    position, and the copy back wrote none on the forward flow's topic."""

    syncs: tuple[OffsetSync, ...]
    """Per partition, in order: one at each group's position in what the copy wrote (source offset
    -> the DR offset of the same record), then the restart point (the source's end -> DR's end)."""
    checkpoints: tuple[Checkpoint, ...]
    """The group partitions whose latest checkpoint on DR differs from MM2's translation of the
    group's committed offset on the source through every sync, these included."""
    replaced: tuple[Checkpoint | None, ...] = ()
    """DR's latest checkpoint of each of ``checkpoints`` before (None: there was none)."""
    exact: int = 0
    """Group partitions translated through a sync at their very offset (the exact record)."""
    total: int = 0
    """Group partitions checkpointed (written now or already on DR)."""
    groups: int = 0


def ready_records(parts: Mapping[tuple[str, int], BackPartition], start: Mapping[tuple[str, int], tuple[int, str, int]],
                  positions: Mapping[str, Mapping[tuple[str, int], int]], forward: Mapping[tuple[str, int], list[Sync]],
                  back: Mapping[tuple[str, int], list[Sync]], latest: Mapping[tuple[str, str, int], Checkpoint]
                  ) -> ReadyRecords:
    """The offset syncs and checkpoints that put every group's committed offset on the source
    (``positions``) on DR, per mirrored partition of ``start`` (``_forward_start``): a sync at each
    position the copy wrote (``parts``, its anchors ``back``), none below the mirror's syncs of
    before the switch (``forward``: MM2 would forget those), the restart point last; and per group
    partition the checkpoint MM2's rule gives through them (``mm2.offsets``: what the emitters
    would write, so the restarted mirror agrees), where DR's ``latest`` says otherwise. A group
    before the switch keeps MM2's translation from then (at most ``offset.lag.max`` behind)."""
    syncs, checkpoints, replaced, exact, total = [], [], [], 0, 0
    for key, (source_end, dr_topic, dr_end) in sorted(start.items()):
        held = sorted({offsets[key] for offsets in positions.values() if key in offsets})
        at = {source_end: dr_end}
        part = parts.get(key)
        if part is not None:
            in_copy = reverse.anchors(part, back.get((part.dr_topic, part.partition), []))
            at |= {o: reverse.dr_offset_at(part, in_copy, o) for o in held if part.source_start <= o < source_end}
        have = forward.get(key, [])
        new = sorted(at.items())
        if have and at.get(have[-1][0]) == have[-1][1]:  # an earlier run wrote these: go on from its last
            new = [s for s in new if s[0] >= have[-1][0]]
        syncs += [OffsetSync(key[0], key[1], o, d) for o, d in new]
        after = current_syncs([*have, *new])
        for group, offsets in sorted(positions.items()):
            if key not in offsets or (downstream := mm2_translate(after, offsets[key])) is None:
                continue  # no sync at or below: MM2 emits no checkpoint either
            total += 1
            exact += latest_sync(after, offsets[key])[0] == offsets[key]
            old = latest.get((group, dr_topic, key[1]))
            if old is None or (old.upstream_offset, old.downstream_offset) != (offsets[key], downstream):
                checkpoints.append(Checkpoint(group, dr_topic, key[1], offsets[key], downstream))
                replaced.append(old)
    return ReadyRecords(tuple(syncs), tuple(checkpoints), tuple(replaced), exact, total, len(positions))


def _ready_records(ctx: Context, flow: MirrorFlow, state: FailoverState, start: Mapping) -> ReadyRecords:
    """``ready_records`` from the clusters: the groups' offsets on the source (committed by now)."""
    names = groups(ctx, flow)
    described = ctx.client(GroupOffsets, flow.source).describe(names) if names else {}
    positions = {g: {tp: o for tp, o in described[g].offsets.items() if tp in start} for g in names}
    positions = {g: offsets for g, offsets in positions.items() if offsets}
    parts = {(p.topic, p.partition): p for p in BackPartition.of(state)}
    return ready_records(parts, start, positions, offset_syncs(ctx, flow),
                         reverse.reverse_syncs(ctx, flow, state.syncs_from), checkpoints(ctx, flow))


def _write_ready(ctx: Context, flow: MirrorFlow, ready: ReadyRecords) -> None:
    """The offset syncs first (a checkpoint is MM2's translation through them), then the checkpoints."""
    ctx.admin(flow.offset_syncs_cluster).create_topic(flow.offset_syncs_topic, 1, -1, reverse.SYNCS_TOPIC_CONFIGS,
                                                      exist_ok=True)
    writer = ctx.client(RecordWriter, flow.offset_syncs_cluster)
    for sync in ready.syncs:
        writer.send_raw(flow.offset_syncs_topic, sync.record_key(), sync.record_value())
    writer.flush()
    if ready.checkpoints:
        # MM2 creates its checkpoints topic compacted with one partition; a failback may come first.
        ctx.admin(flow.target).create_topic(flow.checkpoints_topic, 1, -1, CHECKPOINTS_TOPIC_CONFIGS, exist_ok=True)
        writer = ctx.client(RecordWriter, flow.target)
        for checkpoint in ready.checkpoints:
            writer.send_raw(flow.checkpoints_topic, checkpoint.record_key(), checkpoint.record_value())
        writer.flush()


def _ready_outcome(ctx: Context, flow: MirrorFlow, ready: ReadyRecords) -> Outcome:
    if ctx.options.check:
        wanted = [t for t in ctx.facts.get(BACK, {}).get(flow.name, []) if t.dr_offset is not None]
        return Outcome("changed" if wanted else "ok", flow.target,
                       f"{flow.name}: would write an offset sync at each group's offset on {flow.source} and each "
                       f"group's checkpoint on {flow.target} ({len(wanted)} group partitions translated back), "
                       "before the forward mirror restarts", flow=flow.name)
    diff = tuple((f"{c.group} {c.topic}-{c.partition} checkpoint", _shown(old), _shown(c))
                 for c, old in list(zip(ready.checkpoints, ready.replaced))[:20])
    rounded = ready.total - ready.exact
    note = f"; {rounded} by MM2's rule through the syncs of before the switch, at most offset.lag.max behind" \
        if rounded else ""
    return Outcome("changed" if ready.checkpoints else "ok", flow.target,
                   f"{flow.name}: ready for the next failover: {ready.groups} groups, {ready.total} partitions "
                   f"checkpointed on {flow.target} at their offsets on {flow.source} ({ready.exact} exact{note}); "
                   f"wrote {len(ready.syncs)} offset syncs and {len(ready.checkpoints)} checkpoints", diff, flow=flow.name)


def _shown(checkpoint: Checkpoint | None) -> str:
    return "-" if checkpoint is None else f"{checkpoint.upstream_offset} -> {checkpoint.downstream_offset}"


def restart_mirror(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Start the forward mirror again from the source's end now: what came back is not mirrored twice.
    First each group's offset on the source is written to DR (``ready_records``): the restarted
    emitters read those syncs and checkpoints, and agree with them."""
    work = pending(ctx)
    todo = [(f, s) for f, s in work if not s.restarted]
    if not todo:
        return [Outcome("ok", f.target, f"{f.name}: forward mirror restarted already", flow=f.name) for f, _s in work] \
            or _nothing(ctx)
    flows = [f for f, _s in todo]
    starts = {f.name: _forward_start(ctx, f) for f in flows}
    if ctx.options.check:
        diff = tuple((f"{f.name} {t}-{p}", "stopped", f"from {s[0]}") for f in flows
                     for (t, p), s in sorted(starts[f.name].items())[:20])
        return [_ready_outcome(ctx, f, ReadyRecords((), ())) for f in flows] + [
            Outcome("changed", ctx.engine.location(f),
                    f"{f.name}: would restart the forward mirror from {flow_end(starts[f.name])}", diff, flow=f.name)
            for f in flows]
    # Before the start: the restarted emitters read these syncs and checkpoints, and a sync written
    # below the mirror's first one would make MM2 forget every earlier sync.
    ready = {f.name: _ready_records(ctx, f, s, starts[f.name]) for f, s in todo}
    for flow in flows:
        _write_ready(ctx, flow, ready[flow.name])
    others: list[str] = []
    if ctx.engine.shared_by_flows:  # one deployment runs every flow: it starts only once none is failed over
        recorded = read_flow_states(ctx.spec, secrets=ctx.secrets)
        others = [f.name for f in ctx.spec.mirrors if f not in flows and f.name in recorded]
    offsets = {f.name: {key: source_end for key, (source_end, _dr_topic, _dr_end) in starts[f.name].items()}
               for f in flows}
    actions = ctx.engine.start_from(flows, offsets, others_failed_over=others,
                                    timeout=float(args.get("timeout", START_TIMEOUT_S)))
    outcomes = [*(_ready_outcome(ctx, f, ready[f.name]) for f in flows), *(mirror.outcome(a) for a in actions)]
    for flow, state in todo:
        write_state(ctx.spec.cluster(flow.target), replace(state, restarted=True), ctx.secrets)
    ctx.failover_states(refresh=True)
    return outcomes


# ------------------------------------------------------------------------ active-active
def remote(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Active-active: each group the failover moved, at its positions on DR's own topics that a
    reverse flow mirrors to the source, moves to that flow's copies on the source: exact (the walk
    by content, the reverse flow's own way), once the copies hold every record the group consumed
    (the reverse flow runs; with Spark, since the forward restart); committed on the source."""
    timeout = float(args.get("timeout", DEFAULT_WAIT_S))
    outcomes = []
    for flow, state in pending(ctx):
        backs = reverse_flows(ctx, flow)
        if not backs:
            outcomes.append(Outcome("ok", flow.source, f"{flow.name}: no flow {flow.target} -> {flow.source}: no "
                                    "remote topic", flow=flow.name))
        for back in backs:
            outcomes += _remote_back(ctx, flow, state, back, timeout)
    return outcomes or _nothing(ctx)


def _remote_back(ctx: Context, flow: MirrorFlow, state: FailoverState, back: MirrorFlow,
                 timeout: float) -> list[Outcome]:
    names = [g for g in state.groups if ctx.group_selected(g)] if state.groups else _dr_groups(ctx, flow)
    described = ctx.client(GroupOffsets, flow.target).describe(names) if names else {}
    found: list[Translation] = remote_translations(ctx, back, names, described, copies_on=back.source)
    waiting = [t for t in found if t.dr_offset is not None and t.unmirrored]
    if waiting and not ctx.options.check:
        up, seen = mirror.running(ctx, back)
        latest = {"found": found, "waiting": waiting}

        def held() -> bool:
            latest["found"] = remote_translations(ctx, back, names, described, copies_on=back.source)
            latest["waiting"] = [t for t in latest["found"] if t.dr_offset is not None and t.unmirrored]
            return not latest["waiting"]
        mirror.wait_until(ctx, held, timeout,
                          lambda: f"{back.name}: waiting for {flow.source} to hold {len(latest['waiting'])} group "
                                  "positions (remote topics)",
                          f"{back.name}: {flow.source} does not hold every record the groups consumed on "
                          f"{flow.target}'s own topics ({len(latest['waiting'])} partitions behind; the mirror: "
                          f"{'running' if up else 'not running'}, {seen}): start it if it is stopped (mm2spec "
                          "mirror), then run the failback again: only this step and the ones after it are left")
        found = latest["found"]
    ctx.facts.setdefault(TRANSLATIONS, []).extend(found)
    bad = [t for t in found if t.dr_offset is None]
    if bad:
        raise OperationRefused(f"{back.name}: {len(bad)} group partitions on remote topics cannot be translated: "
                               + "; ".join(f"{t.group} {t.topic}-{t.partition}: {t.note}" for t in bad[:5]))
    if not found:
        return [Outcome("ok", flow.source, f"{flow.name}: no group position on {flow.target}'s topics that {back.name} "
                        "mirrors", flow=flow.name)]
    behind = sum(1 for t in found if t.unmirrored)
    note = f" ({behind} not mirrored yet: a run waits for them)" if behind else ""
    summary = Outcome("ok", flow.target, f"{flow.name}: {len({t.group for t in found})} groups, {len(found)} partitions "
                      f"on {', '.join(sorted({t.topic for t in found}))} translated to {back.name}'s copies on "
                      f"{flow.source} (exact){note}", flow=flow.name)
    return [summary, *commit_translations(ctx, [flow], {flow.name: found}, to_source=True)]


def flow_end(start: Mapping) -> str:
    return f"the source's end ({sum(s[0] for s in start.values())} records over {len(start)} partitions)"


def clear(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Remove the flows' DR-state records: ``plan`` and ``pulumi up`` run the forward mirror again."""
    work = pending(ctx)
    if not work:
        return _nothing(ctx)
    outcomes = []
    for flow, state in work:
        if not ctx.options.check:
            clear_state(ctx.spec.cluster(flow.target), ctx.spec.name, flow.name, ctx.secrets)
        verb = "would clear" if ctx.options.check else "cleared"
        outcomes.append(Outcome("changed", flow.target, f"{flow.name}: {verb} the failover record in {STATE_TOPIC}",
                                ((f"{flow.name} state", state.phase, "none"),), flow=flow.name))
    ctx.failover_states(refresh=not ctx.options.check)
    return outcomes


FINAL_ARG = {"type": "boolean", "description": "copy to DR's very end and check it no longer grows (after the fence)"}

MODULES = [
    Module("failback.preflight", "Check that a completed failover is recorded and the source answers.", preflight,
           sections=(LOSS_SECTION,), writes=False),
    Module("failback.stranded", "Count records stranded on the source; refuse unless --stranded says keep or rebuild.",
           stranded, writes=False),
    Module("failback.begin", "Record failing-back with each partition's copy start (a re-run resumes from it).", begin),
    Module("failback.rebuild", "Delete and recreate the source topics rebuilt from DR (--stranded=rebuild).", rebuild,
           arguments(timeout=TIMEOUT_ARG)),
    Module("failback.copy", "Copy DR's records written since the switch back to the source (the reverse flow).", copy,
           arguments(final=FINAL_ARG)),
    Module("failback.translate", "Translate every group's DR offsets to the source, exactly.", translate,
           sections=(TRANSLATIONS_SECTION,), writes=False),
    Module("failback.commit", "Commit the translated offsets on the source (inactive groups only, never backwards).",
           commit, needs=("failback.translate",), ends_rto=True),
    Module("failback.restart_mirror", "Restart the forward mirror from the source's end (no record mirrored twice).",
           restart_mirror, arguments(timeout=TIMEOUT_ARG)),
    Module("failback.remote", "Active-active: move the groups' positions on DR's own topics to the reverse flow's "
           "copies on the source, exactly, once they hold them.", remote, arguments(timeout=TIMEOUT_ARG),
           sections=(TRANSLATIONS_SECTION,)),
    Module("failback.clear", "Clear the flows' failover records on DR.", clear),
]
