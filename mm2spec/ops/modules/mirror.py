"""Modules ``mirror.status``, ``mirror.stop`` and ``mirror.wait_caught_up``: the data path, for
either engine (``ctx.engine``: the Spark job's driver on this machine, or MM2's connectors on Connect)."""

from __future__ import annotations

import time
from typing import Any, Mapping

from mm2spec.engines import Action, wait_for
from mm2spec.errors import OperationRefused
from mm2spec.live.records import RecordReader, last_records
from mm2spec.ops.playbooks.context import DEFAULT_WAIT_S, Context
from mm2spec.ops.playbooks.module import TIMEOUT_ARG, Module, arguments
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.topology import MirroredPartition, partitions
from mm2spec.spec.model import MirrorFlow


def running(ctx: Context, flow: MirrorFlow) -> tuple[bool, str]:
    """Whether the flow's mirror runs, and what was seen."""
    found = ctx.engine.running(flow)
    return found.up, found.seen


def outcome(action: Action) -> Outcome:
    """What the engine did, as this task's outcome."""
    return Outcome("changed" if action.changed else "ok", action.where, action.summary, action.diff, flow=action.flow)


def status(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    outcomes = []
    for flow in ctx.flows:
        up, seen = running(ctx, flow)
        outcomes.append(Outcome("ok", ctx.engine.location(flow), f"{flow.name}: {'running' if up else 'not running'}: "
                                f"{seen}", flow=flow.name))
    return outcomes


def stop(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Stop each flow's mirror; ok when it is already stopped (idempotent). The spec's other flows
    (the other direction of an active-active pair, the other sources of a fan-in) keep mirroring
    (the Spark job pauses only these flows' queries), unless the engine had to stop a deployment
    every flow shares (Spark on Kubernetes): then the report names them as stopped too, and not
    failed over (they have no state record; the failback's restart starts them again)."""
    # Only flows mirroring now can stop with it (one failed over before is paused or stopped already).
    others = [f.name for f in ctx.spec.mirrors if f not in ctx.flows and ctx.engine.shared_by_flows
              and ctx.engine.running(f).up]
    actions = ctx.engine.stop(ctx.flows, check=ctx.options.check, timeout=float(args.get("timeout", DEFAULT_WAIT_S)))
    outcomes = [outcome(a) for a in actions]
    if others and any(a.changed and a.stops_every_flow for a in actions):
        outcomes.append(Outcome("ok", actions[0].where, f"{'would stop' if ctx.options.check else 'stopped'} with it, "
                                f"not failed over by this run: {', '.join(others)} (one {ctx.engine.title} deployment "
                                "runs every flow of the spec; the failback's restart starts them again)"))
    return outcomes


def wait_until(ctx: Context, done, timeout: float, describe, failure: str) -> None:
    """Poll ``done`` until it holds, showing ``describe()``; MirrorError after ``timeout`` seconds."""
    wait_for(done, timeout, describe, failure, ctx.progress)


def behind(ctx: Context, flow: MirrorFlow, parts: list[MirroredPartition]) -> list[MirroredPartition]:
    """Partitions whose last source record is not (yet) the last record on DR, compared by content.
    Each cluster is read once for all partitions (``last_records``), not a read per partition."""
    source = ctx.client(RecordReader, flow.source)
    target = ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once)
    lasts = last_records(source, [(part.topic, part.partition) for part in parts])
    written = [part for part in parts if lasts[(part.topic, part.partition)] is not None]
    copies = last_records(target, [(part.target_topic, part.partition) for part in written])
    return [part for part in written if (copy := copies[(part.target_topic, part.partition)]) is None
            or copy.content() != lasts[(part.topic, part.partition)].content()]


def wait_caught_up(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Wait until every mirrored partition's last source record is on DR; in check mode, only say
    how far behind it is now."""
    timeout, outcomes = float(args.get("timeout", DEFAULT_WAIT_S)), []
    for flow in ctx.flows:
        parts = partitions(ctx, flow)
        lagging = behind(ctx, flow, parts)
        if not lagging:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: all {len(parts)} partitions caught up", flow=flow.name))
            continue
        if ctx.options.check:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len(lagging)} of {len(parts)} partitions behind "
                                    f"now; a run would wait up to {timeout:.0f}s for them", flow=flow.name))
            continue
        up, seen = running(ctx, flow)
        if not up:
            raise OperationRefused(f"{flow.name}: {len(lagging)} partitions are behind (e.g. {lagging[0].topic}-"
                               f"{lagging[0].partition}) and the mirror is not running ({seen}): start it "
                               "(mm2spec mirror) and re-run, or fail over with --source-unreachable")
        start = time.monotonic()
        state = {"lagging": lagging}

        def caught_up() -> bool:
            state["lagging"] = behind(ctx, flow, state["lagging"])
            return not state["lagging"]
        wait_until(ctx, caught_up, timeout, lambda: f"{flow.name}: {len(state['lagging'])} of {len(parts)} partitions behind",
              f"{flow.name}: the mirror did not catch up ({len(state['lagging'])} partitions behind)")
        outcomes.append(Outcome("ok", flow.target, f"{flow.name}: {len(parts)} partitions caught up after "
                                f"{time.monotonic() - start:.1f}s", flow=flow.name))
    return outcomes


MODULES = [
    Module("mirror.status", "Show whether each flow's mirror runs.", status, writes=False),
    Module("mirror.stop", "Stop each flow's mirror (the Spark job, or the MM2 connectors).", stop,
           arguments(timeout=TIMEOUT_ARG)),
    Module("mirror.wait_caught_up", "Wait until DR holds every source record (compared by content).", wait_caught_up,
           arguments(timeout=TIMEOUT_ARG), writes=False),
]
