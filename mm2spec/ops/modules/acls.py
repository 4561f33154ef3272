"""Modules ``acls.fence``, ``acls.unfence`` and ``acls.grant``: the applications' access around a
failover and a failback.

``acls.fence`` denies the spec's client principals (``failover.clients``) WRITE on one side's
mirrored topics (``cluster: source``, the default, during a failover, so nothing lands there that
would not reach DR; ``cluster: target`` during a failback); ``acls.unfence`` removes that deny
again; ``acls.grant`` allows them READ, WRITE and DESCRIBE on DR's mirrored topics and READ on
their groups. Each adds or removes only what differs, so a re-run changes nothing.
"""

from __future__ import annotations

from typing import Any, Mapping

from mm2spec.errors import OperationRefused
from mm2spec.ops.playbooks.context import Context
from mm2spec.ops.playbooks.module import Module, arguments
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.ops.modules.topology import groups, partitions
from mm2spec.spec.model import AclBinding, MirrorFlow

REASON = "mm2spec failover"


def _apply(ctx: Context, alias: str, wanted: list[AclBinding], what: str, required: bool) -> Outcome:
    admin = ctx.admin(alias)
    if not admin.authorizer_enabled():
        if required:
            raise OperationRefused(f'cluster "{alias}" has no authorizer, so writers cannot be fenced: enable one, '
                                   "or set failover.fence: false and stop the producers yourself")
        return Outcome("ok", alias, f"no authorizer on {alias}: every principal may already {what}")
    live: set[tuple] = set()
    for principal in sorted({b.principal for b in wanted}):
        live |= {b.key for b in admin.acls(principal)}
    missing = [b for b in wanted if b.key not in live]
    if not missing:
        return Outcome("ok", alias, f"{len(wanted)} bindings already present")
    if not ctx.options.check:
        admin.create_acls(missing)
    diff = tuple((f"{b.permission} {b.principal} {b.operation} {b.resource_type}:{b.resource_name}", "absent", "present")
                 for b in missing)
    verb = "would add" if ctx.options.check else "added"
    return Outcome("changed", alias, f"{verb} {len(missing)} bindings ({what})", diff)


def _fence_bindings(ctx: Context, flow: MirrorFlow, side: str) -> tuple[str, list[AclBinding]]:
    """The deny-WRITE bindings that fence the clients off one side's mirrored topics."""
    alias = flow.source if side == "source" else flow.target
    names = sorted({p.topic if side == "source" else p.target_topic for p in partitions(ctx, flow)})
    return alias, [AclBinding(alias, c, "TOPIC", t, "LITERAL", "WRITE", "DENY", reason=REASON)
                   for c in ctx.spec.failover.clients for t in names]


def fence(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    side = args.get("cluster", "source")
    outcomes = []
    for flow in ctx.flows:
        alias, wanted = _fence_bindings(ctx, flow, side)
        outcomes.append(_apply(ctx, alias, wanted, f"deny WRITE on the {side}", required=True))
    return outcomes


def unfence(ctx: Context, args: Mapping[str, Any]) -> list[Outcome]:
    """Remove the fence's deny bindings from one side (those present; a re-run finds none)."""
    side = args.get("cluster", "source")
    outcomes = []
    for flow in ctx.flows:
        alias, fenced = _fence_bindings(ctx, flow, side)
        admin = ctx.admin(alias)
        if not admin.authorizer_enabled():
            outcomes.append(Outcome("ok", alias, f"no authorizer on {alias}: nothing to unfence"))
            continue
        live = {b.key for p in sorted({b.principal for b in fenced}) for b in admin.acls(p)}
        present = [b for b in fenced if b.key in live]
        if not present:
            outcomes.append(Outcome("ok", alias, f"{flow.name}: no fence on the {side}", flow=flow.name))
            continue
        if not ctx.options.check:
            admin.delete_acls(present)
        verb = "would remove" if ctx.options.check else "removed"
        diff = tuple((f"DENY {b.principal} WRITE TOPIC:{b.resource_name}", "present", "absent") for b in present)
        outcomes.append(Outcome("changed", alias, f"{flow.name}: {verb} {len(present)} deny bindings on the {side}",
                                diff, flow=flow.name))
    return outcomes


def grant(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    clients = ctx.spec.failover.clients
    outcomes = []
    for flow in ctx.flows:
        topics = sorted({p.target_topic for p in partitions(ctx, flow)})
        group_names = [] if ctx.options.source_unreachable else groups(ctx, flow)
        wanted = [AclBinding(flow.target, c, "TOPIC", t, "LITERAL", op, reason=REASON)
                  for c in clients for t in topics for op in ("READ", "WRITE", "DESCRIBE")]
        wanted += [AclBinding(flow.target, c, "GROUP", g, "LITERAL", "READ", reason=REASON) for c in clients for g in group_names]
        outcomes.append(_apply(ctx, flow.target, wanted, "allow READ/WRITE on DR", required=False))
    return outcomes


SIDE_ARG = {"enum": ["source", "target"], "description": "which side of each flow (default source)"}

MODULES = [
    Module("acls.fence", "Deny the client principals WRITE on one side's mirrored topics (default the source).", fence,
           arguments(cluster=SIDE_ARG)),
    Module("acls.unfence", "Remove that deny from one side's mirrored topics (default the source).", unfence,
           arguments(cluster=SIDE_ARG)),
    Module("acls.grant", "Allow the client principals READ/WRITE on DR's mirrored topics and READ on their groups.", grant),
]
