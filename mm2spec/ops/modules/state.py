"""Module ``state.record``: the failover's durable record on each flow's DR cluster.

``phase: switching`` is written before the mirror stops (from then on, ``plan`` and ``pulumi up``
leave the flow's mirror stopped); ``phase: failed-over`` once the groups are committed, with
each partition's source and DR end at the switch, which failback starts from, and the groups it
moved.

The record is per flow, so per direction: failing over ``primary-to-dr`` of an active-active pair
records that flow on dr and nothing for ``dr-to-primary``, and failing over one source of a fan-in
records that source's flow only; the other flows into the same DR keep mirroring.
"""

from __future__ import annotations

from typing import Any, Mapping

from mm2spec.errors import OperationRefused
from mm2spec.live.dr_state import STATE_TOPIC, write_state
from mm2spec.live.records import RecordReader
from mm2spec.live.types import FailoverState
from mm2spec.ops.playbooks.context import Context
from mm2spec.ops.playbooks.module import Module, arguments
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.offsets import BY_FLOW
from mm2spec.ops.modules.topology import partitions
from mm2spec.spec.model import MirrorFlow

PHASES = ("switching", "failed-over")


def _positions(ctx: Context, flow: MirrorFlow) -> tuple:
    """Each partition's source and DR end, read with one request per cluster (``bounds``): this
    runs inside the RTO, between the commit and the record of the failover."""
    dr = ctx.client(RecordReader, flow.target)
    source = None if ctx.options.source_unreachable else ctx.client(RecordReader, flow.source)
    parts = partitions(ctx, flow)
    source_ends = source.bounds([(p.topic, p.partition) for p in parts]) if source else {}
    dr_ends = dr.bounds([(p.target_topic, p.partition) for p in parts])
    return tuple((p.topic, p.partition, source_ends[(p.topic, p.partition)][1] if source else -1, p.target_topic,
                  dr_ends[(p.target_topic, p.partition)][1]) for p in parts)


def _moved(ctx: Context, flow: MirrorFlow, existing: FailoverState | None) -> tuple[str, ...]:
    """The groups this failover committed on DR (and those an interrupted run recorded)."""
    translated = {t.group for t in ctx.facts.get(BY_FLOW, {}).get(flow.name, []) if t.dr_offset is not None}
    return tuple(sorted(translated | set(existing.groups if existing else ())))


def record(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    phase = args["phase"]
    states = ctx.failover_states(refresh=True)
    outcomes = []
    for flow in ctx.flows:
        existing = states.get(flow.name)
        if existing is not None and existing.phase == "failing-back":
            raise OperationRefused(f"{flow.name}: a failback is in progress (phase failing-back on {flow.target}): "
                                   "finish it with mm2spec failback before failing over again")
        if existing is not None and (existing.phase == phase or phase == "switching"):
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {existing.phase} since {existing.started_at} "
                                    f"(recorded in {STATE_TOPIC})", flow=flow.name))
            continue
        now = int(ctx.clock() * 1000)
        new = FailoverState(flow.name, phase, "unplanned" if ctx.options.source_unreachable else "planned",
                            flow.source, flow.target, existing.started_at if existing else now,
                            now if phase == "failed-over" else None, _positions(ctx, flow), spec=ctx.spec.name,
                            groups=_moved(ctx, flow, existing) if phase == "failed-over" else ())
        if not ctx.options.check:
            write_state(ctx.spec.cluster(flow.target), new, ctx.secrets)
            # The run's view of the state is what it just wrote: no second read of the state topic
            # (the lease keeps other runs from writing it meanwhile).
            states[flow.name] = new
        verb = "would record" if ctx.options.check else "recorded"
        outcomes.append(Outcome("changed", flow.target, f"{flow.name}: {verb} {phase} in {STATE_TOPIC}",
                                ((f"{flow.name} state", existing.phase if existing else "none", phase),), flow=flow.name))
    return outcomes


MODULES = [
    Module("state.record", "Record the failover's phase and positions on each flow's DR cluster.", record,
           arguments(phase={"enum": list(PHASES), "description": "switching (before the mirror stops) or failed-over"})
           | {"required": ["phase"]}),
]
