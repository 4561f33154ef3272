"""Modules ``verify.*``: is DR healthy, and did a failover leave it as it should?

Each check reads only, ends ``ok`` or ``failed``, and a failure says what to do. The bundled
``verify`` playbook runs them all (``ignore_errors``, so every failing check is named).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from mm2spec.errors import Mm2specError
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.mm2.selection import config_synced
from mm2spec.plan.build import version_findings
from mm2spec.ops.playbooks.context import Context, failure_text
from mm2spec.ops.modules.loss import UNRECORDED, find_losses, losses_noted, summary
from mm2spec.ops.modules.mirror import behind, running
from mm2spec.ops.playbooks.module import Module, arguments
from mm2spec.ops.modules.offsets import BY_FLOW
from mm2spec.ops.modules.sections import LOSS, LOSS_SECTION
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.topology import (MirroredPartition, checkpoints, groups, mirror_position, offset_syncs,
                                          partitions)
from mm2spec.spec.model import MirrorFlow

HEARTBEATS_TOPIC = "heartbeats"
"""MM2's MirrorHeartbeatConnector writes to this topic on the target cluster."""
DEFAULT_MAX_AGE_S = 60.0
"""How old the oldest unmirrored record may be before verify calls DR unhealthy (the RPO)."""


def _now_ms(ctx: Context) -> int:
    return int(ctx.clock() * 1000)


def mirror(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    expect = args.get("expect", "running")
    outcomes = []
    for flow in ctx.flows:
        up, seen = running(ctx, flow)
        where = ctx.engine.location(flow)
        if up == (expect == "running"):
            outcomes.append(Outcome("ok", where, f"{flow.name}: {seen}", flow=flow.name))
        elif expect == "running":
            outcomes.append(Outcome("failed", where, f"{flow.name}: the mirror is not running ({seen}): "
                                    f"{ctx.engine.start_hint}", flow=flow.name))
        else:
            outcomes.append(Outcome("failed", where, f"{flow.name}: the mirror still runs after the failover ({seen}): "
                                    "stop it (mirror.stop) before clients write to DR", flow=flow.name))
    return outcomes


def topics(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    outcomes = []
    for flow in ctx.flows:
        source = ctx.admin(flow.source).topics(with_configs=False)
        expected = {}
        for part in partitions(ctx, flow):
            expected[part.target_topic] = source[part.topic].partitions
        live = ctx.admin(flow.target).topics(list(expected), with_configs=False)
        missing = sorted(t for t in expected if t not in live)
        short = sorted(f"{t} ({live[t].partitions} of {n})" for t, n in expected.items() if t in live and live[t].partitions != n)
        if missing or short:
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: " + "; ".join(
                ([f"missing on {flow.target}: {', '.join(missing[:10])}"] if missing else [])
                + ([f"partition count differs: {', '.join(short[:10])}"] if short else []))
                + ": run mm2spec plan / pulumi up, or check the mirror's log", flow=flow.name))
        else:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len(expected)} topics present with their partitions",
                                    flow=flow.name))
    return outcomes


def lag(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Per partition: records behind (from the latest offset sync) and the age of the oldest
    unmirrored record, the RPO if the source died now, against the flow's ``rpoSeconds`` objective
    (``max_age_seconds`` for a flow without one)."""
    default_max_age = float(args.get("max_age_seconds", DEFAULT_MAX_AGE_S))
    outcomes = []
    for flow in ctx.flows:
        max_age, bound = _rpo_bound(flow, default_max_age)
        parts = partitions(ctx, flow)
        lagging = unmirrored(ctx, flow, parts)
        if not lagging:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len(parts)} partitions caught up (RPO 0)", flow=flow.name))
            continue
        worst_age, total, lines = 0.0, 0, []
        for part, records, age in lagging:
            worst_age, total = max(worst_age, age), total + records
            lines.append((f"{part.topic}-{part.partition}", f"{records} behind", f"oldest {age:.1f}s"))
        status = "failed" if worst_age > max_age else "ok"
        fix = (f": DR is more than {max_age:g}s behind ({bound}); check the mirror's throughput and errors"
               if status == "failed" else f" (within {bound})")
        outcomes.append(Outcome(status, flow.target, f"{flow.name}: {len(lagging)} of {len(parts)} partitions behind, "
                                f"~{total} records, oldest unmirrored {worst_age:.1f}s old{fix}", tuple(lines), flow=flow.name))
    return outcomes


def unmirrored(ctx: Context, flow: MirrorFlow, parts: list[MirroredPartition]) -> list[tuple[MirroredPartition, int, float]]:
    """The RPO now of the partitions not caught up (their last source record is not DR's last):
    each with the records behind the mirror's position (from the latest offset sync, never an
    underestimate) and the age in seconds of the oldest of them. ``verify.lag`` and the DR
    exporter (``verify --serve``) read it."""
    lagging = behind(ctx, flow, parts)
    if not lagging:
        return []
    syncs = offset_syncs(ctx, flow)
    source = ctx.client(RecordReader, flow.source)
    dr = ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once)
    found = []
    for part in lagging:
        low, end = source.watermarks(part.topic, part.partition)
        known = syncs.get((part.topic, part.partition))
        if known:
            mirrored = min(end, mirror_position(known[-1], dr.watermarks(part.target_topic, part.partition)[1]))
        else:
            mirrored = low
        oldest = source.read(part.topic, part.partition, mirrored, mirrored + 1)
        age = max(0.0, (_now_ms(ctx) - oldest[0].timestamp) / 1000) if oldest else 0.0
        found.append((part, max(0, end - mirrored), age))
    return found


def _rpo_bound(flow: MirrorFlow, default_max_age: float) -> tuple[float, str]:
    """The age the flow's oldest unmirrored record may reach, and where that bound comes from: the
    spec's objective, which a generic playbook argument must not loosen, else the argument."""
    if flow.objectives.rpo_seconds is not None:
        return float(flow.objectives.rpo_seconds), f"objective rpoSeconds {flow.objectives.rpo_seconds:g}"
    return default_max_age, f"max_age_seconds {default_max_age:g}"


def loss(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Per partition: records the source deleted before the mirror copied them (its position below
    the log start), and source topics recreated under the same name (``loss``)."""
    outcomes = []
    for flow in ctx.flows:
        found = find_losses(ctx, flow)
        ctx.facts.setdefault(LOSS, []).extend(found)
        unrecorded = ctx.facts.get(UNRECORDED, {}).get(flow.name)
        note = f"; {unrecorded}: grant the checking user WRITE on it" if unrecorded else ""
        if found:
            outcomes.append(Outcome("failed", flow.source, summary(flow, found) + note,
                                    tuple((x.where, x.kind, str(x.records) if x.records is not None else "-")
                                          for x in found), flow=flow.name))
        else:
            outcomes.append(Outcome("ok", flow.source, f"{flow.name}: no record lost: every mirror position is at or "
                                    "past the source's log start, no source topic recreated" + note, flow=flow.name))
    return outcomes


def heartbeats(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    outcomes = []
    for flow in ctx.flows:
        if not flow.heartbeats:
            outcomes.append(Outcome("skipped", flow.target, f"{flow.name}: heartbeats are off", flow=flow.name))
            continue
        if not ctx.engine.emits_heartbeats:
            outcomes.append(Outcome("skipped", ctx.engine.location(flow),
                                    f"{flow.name}: the {ctx.engine.title} engine emits no heartbeats", flow=flow.name))
            continue
        if not ctx.admin(flow.target).topics([HEARTBEATS_TOPIC], with_configs=False):
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: no {HEARTBEATS_TOPIC} topic on {flow.target}: "
                                    "is the MirrorHeartbeatConnector running?", flow=flow.name))
            continue
        last = ctx.client(RecordReader, flow.target).last_record(HEARTBEATS_TOPIC, 0)
        age = (_now_ms(ctx) - last.timestamp) / 1000 if last else None
        limit = 2 * max(1, flow.emit_checkpoints_interval_seconds)
        if age is None or age > limit:
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: the last heartbeat is "
                                    f"{'missing' if age is None else f'{age:.0f}s old'} (more than {limit}s): "
                                    "check the MirrorHeartbeatConnector", flow=flow.name))
        else:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: last heartbeat {age:.1f}s ago", flow=flow.name))
    return outcomes


def checkpointed(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """Per group: a checkpoint on DR for every mirrored partition it committed on the source, and
    none older than the flow's ``checkpointAgeSeconds`` objective (without one: twice
    ``emitCheckpointsIntervalSeconds``) behind a commit that moved since."""
    outcomes = []
    for flow in ctx.flows:
        selected = groups(ctx, flow)
        states = ctx.client(GroupOffsets, flow.source).describe(selected)
        mirrored = {(p.topic, p.partition): p.target_topic for p in partitions(ctx, flow)}
        found = checkpoints(ctx, flow, with_age=True)
        objective = flow.objectives.checkpoint_age_seconds
        limit_ms = (objective if objective is not None else 2 * flow.emit_checkpoints_interval_seconds) * 1000
        missing, stale = [], []
        for group in selected:
            for (topic, partition) in states[group].offsets:
                if (topic, partition) not in mirrored:
                    continue
                entry = found.get((group, mirrored[(topic, partition)], partition))
                if entry is None:
                    missing.append(f"{group} {topic}-{partition}")
                elif entry[0].upstream_offset != states[group].offsets[(topic, partition)] and _now_ms(ctx) - entry[1] > limit_ms:
                    # An idle group keeps its last checkpoint (MM2 emits only changes): stale means the
                    # group moved on the source and no checkpoint followed within two intervals.
                    stale.append(f"{group} {topic}-{partition} ({(_now_ms(ctx) - entry[1]) / 1000:.0f}s old)")
        if missing or stale:
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: " + "; ".join(
                ([f"no checkpoint for {', '.join(missing[:5])}"
                  + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")] if missing else [])
                + ([f"stale checkpoints (older than {limit_ms / 1000:g}s"
                    + (" objective checkpointAgeSeconds" if objective is not None else "")
                    + f"): {', '.join(stale[:5])}"] if stale else []))
                + ": is the checkpoint emitter running (MirrorCheckpointConnector or the Spark job) and the group selected?",
                flow=flow.name))
        else:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len(selected)} groups checkpointed", flow=flow.name))
    return outcomes


def configs(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    outcomes = []
    for flow in ctx.flows:
        if not flow.sync_topic_configs:
            outcomes.append(Outcome("skipped", flow.target, f"{flow.name}: syncTopicConfigs is off", flow=flow.name))
            continue
        names = {p.topic: p.target_topic for p in partitions(ctx, flow)}
        source = ctx.admin(flow.source).topics(list(names))
        target = ctx.admin(flow.target).topics(list(names.values()))
        differ = []
        for topic, target_topic in sorted(names.items()):
            if topic not in source or target_topic not in target:
                continue
            want = {k: v for k, v in source[topic].configs.items() if config_synced(k)}
            have = {k: v for k, v in target[target_topic].configs.items() if k in want}
            differ += [f"{target_topic} {k}={have.get(k, '(default)')} (source {v})" for k, v in sorted(want.items())
                       if have.get(k) != v]
        if differ:
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: {len(differ)} topic configs differ: "
                                    f"{'; '.join(differ[:5])}: wait for the next config sync or check the mirror's ACLs "
                                    "(ALTER_CONFIGS on DR)", flow=flow.name))
        else:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: topic configs match", flow=flow.name))
    return outcomes


def failed_over(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """After a failover: the state is recorded, the mirror is stopped, every translated group sits
    at (or, never moved back, past) its translated offset on DR. Planned, the silent losses before
    the switch go to the report (here, after the commit: finding them costs no RTO)."""
    lost = {}
    for flow in ctx.flows:
        if not ctx.options.source_unreachable:
            losses, lost[flow.name] = losses_noted(ctx, flow)
            ctx.facts.setdefault(LOSS, []).extend(losses)
    if ctx.options.check:
        return [Outcome("ok", flow.target, f"{flow.name}: nothing was changed (check mode); a run verifies the "
                        "recorded state, the stopped mirror and every group's DR offsets here"
                        + lost.get(flow.name, ""), flow=flow.name)
                for flow in ctx.flows]
    outcomes = mirror(ctx, {"expect": "stopped"})
    states = ctx.failover_states(refresh=True)
    by_flow = ctx.facts.get(BY_FLOW, {})
    for flow in ctx.flows:
        state = states.get(flow.name)
        if state is None or state.phase != "failed-over":
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: the failover is not recorded as complete "
                                    f"({state.phase if state else 'no record'}): re-run the failover", flow=flow.name))
            continue
        wanted: dict[str, dict] = {}
        for t in by_flow.get(flow.name, []):
            wanted.setdefault(t.group, {})[(t.target_topic, t.partition)] = t.dr_offset
        live = ctx.client(GroupOffsets, flow.target).describe(wanted)
        wrong = [f"{g} {t}-{p}: {live[g].offsets.get((t, p))} (want {o})" for g, offsets in wanted.items()
                 for (t, p), o in offsets.items() if live[g].offsets.get((t, p)) is None or live[g].offsets[(t, p)] < o]
        if wrong:
            outcomes.append(Outcome("failed", flow.target, f"{flow.name}: groups not at their translated offsets: "
                                    f"{'; '.join(wrong[:5])}: re-run the failover", flow=flow.name))
        else:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: failed over at {state.completed_at}; "
                                    f"{len(wanted)} group{'' if len(wanted) == 1 else 's'} at or past their "
                                    "translated offsets" + lost.get(flow.name, ""),
                                    flow=flow.name))
    return outcomes


def versions(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    """The brokers' and the Connect worker's versions against what the spec needs
    (``mm2spec.mm2.versions``, the rules ``plan`` applies): a refusing rule fails, a warning is ok
    and says so."""
    aliases = sorted({alias for flow in ctx.flows for alias in (flow.source, flow.target)})
    brokers = {alias: ctx.admin(alias).broker_version() for alias in aliases}
    worker = ctx.engine.worker_version()
    url = ctx.options.connect_url or ctx.spec.connect.rest_url
    findings, notes = version_findings(ctx.spec, brokers, worker, url)
    outcomes = [Outcome("failed" if f.refuses else "ok", f.scope, ("" if f.refuses else "warning: ") + f.message())
                for f in findings]
    seen = ", ".join([f"{alias} Kafka {v.shown}" for alias, v in brokers.items()]
                     + ([f"Connect {worker}"] if worker else []))
    if not any(f.refuses for f in findings):
        outcomes.append(Outcome("ok", "local", f"versions: {seen}" + "".join(f"; {note}" for note in notes)))
    return outcomes


def _check(fn):
    """Turn an error reading a cluster into this check's failure, so the other checks still run."""
    def run(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
        try:
            return fn(ctx, args)
        except Mm2specError as exc:
            return [Outcome("failed", "local", failure_text(ctx.options, exc))]
    return run


MODULES = [
    Module("verify.mirror", "The mirror runs (Spark job alive, or every connector and task RUNNING).", _check(mirror),
           arguments(expect={"enum": ["running", "stopped"]})),
    Module("verify.topics", "Every mirrored source topic exists on DR with as many partitions.", _check(topics)),
    Module("verify.lag", "Per-partition lag and the age of the oldest unmirrored record (the RPO now).", _check(lag),
           arguments(max_age_seconds={"type": "number", "exclusiveMinimum": 0})),
    Module("verify.loss", "No record deleted on the source before it was mirrored, no source topic recreated.",
           _check(loss), sections=(LOSS_SECTION,)),
    Module("verify.heartbeats", "Heartbeats on DR are fresh (when enabled).", _check(heartbeats)),
    Module("verify.checkpoints", "Every group has fresh checkpoints for every partition it committed.", _check(checkpointed)),
    Module("verify.configs", "Topic configs on DR match the source (minus those MM2 never syncs).", _check(configs)),
    Module("verify.versions", "The brokers' and the Connect worker's versions have what the spec uses.",
           _check(versions)),
    Module("verify.failover", "After a failover: recorded, mirror stopped, groups at their translated offsets.",
           _check(failed_over), needs=("offsets.translate",), sections=(LOSS_SECTION,)),
]
# The checks only read: a run of nothing else asks no confirmation and takes no DR lease.
MODULES = [replace(module, writes=False) for module in MODULES]
