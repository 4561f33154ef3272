"""Modules ``acls.fence`` and ``acls.grant``: the applications' access around a failover.

``acls.fence`` denies the spec's client principals (``failover.clients``) WRITE on the source's
mirrored topics, so nothing lands there that would not reach DR; ``acls.grant`` allows them READ,
WRITE and DESCRIBE on DR's mirrored topics and READ on their groups. Both add only bindings that
are missing, so a re-run changes nothing.
"""

from __future__ import annotations

from typing import Any, Mapping

from mm2spec.errors import OperationRefused
from mm2spec.ops.context import Context
from mm2spec.ops.module import Module
from mm2spec.ops.report import Outcome
from mm2spec.ops.topology import groups, partitions
from mm2spec.spec.model import AclBinding

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


def fence(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    clients = ctx.state.failover.clients
    outcomes = []
    for flow in ctx.flows:
        topics = sorted({p.topic for p in partitions(ctx, flow)})
        wanted = [AclBinding(flow.source, c, "TOPIC", t, "LITERAL", "WRITE", "DENY", reason=REASON)
                  for c in clients for t in topics]
        outcomes.append(_apply(ctx, flow.source, wanted, "deny WRITE on the source", required=True))
    return outcomes


def grant(ctx: Context, _args: Mapping[str, Any]) -> list[Outcome]:
    clients = ctx.state.failover.clients
    outcomes = []
    for flow in ctx.flows:
        topics = sorted({p.target_topic for p in partitions(ctx, flow)})
        group_names = [] if ctx.options.source_unreachable else groups(ctx, flow)
        wanted = [AclBinding(flow.target, c, "TOPIC", t, "LITERAL", op, reason=REASON)
                  for c in clients for t in topics for op in ("READ", "WRITE", "DESCRIBE")]
        wanted += [AclBinding(flow.target, c, "GROUP", g, "LITERAL", "READ", reason=REASON) for c in clients for g in group_names]
        outcomes.append(_apply(ctx, flow.target, wanted, "allow READ/WRITE on DR", required=False))
    return outcomes


MODULES = [
    Module("acls.fence", "Deny the client principals WRITE on the source's mirrored topics.", fence),
    Module("acls.grant", "Allow the client principals READ/WRITE on DR's mirrored topics and READ on their groups.", grant),
]
