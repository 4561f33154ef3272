"""Modules ``mirror.status``, ``mirror.stop`` and ``mirror.wait_caught_up``: the data path, for
either engine (the Spark job's driver on this machine, or MM2's connectors on Connect)."""

from __future__ import annotations

import time
from typing import Any, Mapping

from mm2spec.errors import MirrorError, OperationRefused
from mm2spec.live.connect import ConnectClient
from mm2spec.live.records import RecordReader
from mm2spec.ops.playbooks.context import DEFAULT_WAIT_S, Context
from mm2spec.ops.playbooks.module import TIMEOUT_ARG, Module, arguments
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.topology import MirroredPartition, partitions
from mm2spec.runtime import deployment
from mm2spec.spec.model import MirrorFlow

# How often a wait re-reads the clusters: a drain of a few hundred records takes about a second,
# and each poll reads one record per partition on each side.
POLL_S = 0.5
SPARK = "local"
"""The recap's name for this machine, where the Spark job's driver runs."""


def connector_names(ctx: Context, flow: MirrorFlow) -> list[str]:
    names = [flow.connector_name("Source")]
    if flow.groups:
        names.append(flow.connector_name("Checkpoint"))
    if flow.heartbeats:
        names.append(flow.connector_name("Heartbeat"))
    return names


def connect_client(ctx: Context) -> ConnectClient:
    if not ctx.connect_url:
        raise OperationRefused("engine connect: connect.restUrl is not set in the spec; pass --connect-url URL")
    return ConnectClient(ctx.connect_url)


def connector_states(ctx: Context, flow: MirrorFlow) -> dict[str, str]:
    """Per connector of the flow: RUNNING, PAUSED, STOPPED, FAILED, or ABSENT; a task that is not
    RUNNING shows as ``<state> (task N <state>)``."""
    client, found = connect_client(ctx), {}
    for name in connector_names(ctx, flow):
        status = client.connector_status(name)
        if status is None:
            found[name] = "ABSENT"
            continue
        state = status["connector"]["state"]
        bad = [f"task {t['id']} {t['state']}" for t in status.get("tasks", []) if t["state"] != "RUNNING"]
        found[name] = f"{state} ({', '.join(bad)})" if bad and state == "RUNNING" else state
    return found


def running(ctx: Context, flow: MirrorFlow) -> tuple[bool, str]:
    """Whether the flow's mirror runs, and what was seen."""
    if ctx.spec.engine == "spark":
        status = deployment.status(ctx.spark_state_dir)
        return status.running, f"Spark job {status.state}" + (f" (pid {status.pid})" if status.pid else "")
    states = connector_states(ctx, flow)
    return all(s == "RUNNING" for s in states.values()), ", ".join(f"{n} {s}" for n, s in states.items())


def _where(ctx: Context, flow: MirrorFlow) -> str:
    return SPARK if ctx.spec.engine == "spark" else flow.target


def status(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    outcomes = []
    for flow in ctx.flows:
        up, seen = running(ctx, flow)
        outcomes.append(Outcome("ok", _where(ctx, flow), f"{flow.name}: {'running' if up else 'not running'}: {seen}",
                                flow=flow.name))
    return outcomes


def stop(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Stop each flow's mirror; ok when it is already stopped (idempotent)."""
    outcomes, timeout = [], float(args.get("timeout", DEFAULT_WAIT_S))
    if ctx.spec.engine == "spark":
        up, seen = running(ctx, ctx.flows[0]) if ctx.flows else (False, "")
        if not up:
            return [Outcome("ok", SPARK, f"already stopped ({seen})")]
        if not ctx.options.check:
            ctx.progress("stopping the Spark job (SIGTERM, then SIGKILL after the grace period)")
            deployment.stop(ctx.spark_state_dir)
        return [Outcome("changed", SPARK, f"{'would stop' if ctx.options.check else 'stopped'} the Spark job "
                        f"({', '.join(f.name for f in ctx.flows)})", (("Spark job", "running", "stopped"),))]
    client = connect_client(ctx)
    for flow in ctx.flows:
        states = connector_states(ctx, flow)
        to_stop = [n for n, s in states.items() if s not in ("STOPPED", "ABSENT")]
        diff = tuple((n, states[n], "STOPPED") for n in to_stop)
        if not to_stop:
            outcomes.append(Outcome("ok", flow.target, f"{flow.name}: connectors already stopped", flow=flow.name))
            continue
        if not ctx.options.check:
            for name in to_stop:
                client.stop_connector(name)
            wait_until(ctx, lambda: all(s in ("STOPPED", "ABSENT") for s in connector_states(ctx, flow).values()), timeout,
                  lambda: f"waiting for {', '.join(to_stop)} to stop", f"{flow.name}: connectors did not stop")
        outcomes.append(Outcome("changed", flow.target, f"{flow.name}: {'would stop' if ctx.options.check else 'stopped'} "
                                f"{', '.join(to_stop)}", diff, flow=flow.name))
    return outcomes


def wait_until(ctx: Context, done, timeout: float, describe, failure: str) -> None:
    deadline = time.monotonic() + timeout
    start = time.monotonic()
    while not done():
        if time.monotonic() > deadline:
            raise MirrorError(f"{failure} within {timeout:.0f}s")
        ctx.progress(f"{describe()} ({time.monotonic() - start:.0f}s)")
        time.sleep(POLL_S)


def behind(ctx: Context, flow: MirrorFlow, parts: list[MirroredPartition]) -> list[MirroredPartition]:
    """Partitions whose last source record is not (yet) the last record on DR, compared by content."""
    source = ctx.client(RecordReader, flow.source)
    target = ctx.client(RecordReader, flow.target, read_committed=flow.exactly_once)
    lagging = []
    for part in parts:
        last = source.last_record(part.topic, part.partition)
        if last is None:
            continue
        copy = target.last_record(part.target_topic, part.partition)
        if copy is None or copy.content() != last.content():
            lagging.append(part)
    return lagging


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
    Module("mirror.status", "Show whether each flow's mirror runs.", status),
    Module("mirror.stop", "Stop each flow's mirror (the Spark job, or the MM2 connectors).", stop,
           arguments(timeout=TIMEOUT_ARG)),
    Module("mirror.wait_caught_up", "Wait until DR holds every source record (compared by content).", wait_caught_up,
           arguments(timeout=TIMEOUT_ARG)),
]
