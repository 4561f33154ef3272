"""Every Pulumi resource kind mm2spec registers, by name: the one list the program, the component,
the plugin, its package schema and ``pulumi import`` iterate. A kind is its own module with a
``KIND`` (``base.ResourceKind``) and one line below (ARCHITECTURE.md, "Adding a resource kind")."""

from __future__ import annotations

from mm2spec.errors import ProvisionFailed
from mm2spec.provision import acl, connector, spark_deployment, topic, worker_config
from mm2spec.provision.base import ResourceKind

KINDS: dict[str, ResourceKind] = {kind.name: kind for kind in (
    topic.KIND,
    acl.KIND,
    connector.KIND,
    worker_config.KIND,
    spark_deployment.KIND,
)}
"""Each kind by name, in the package schema's order."""

TOPIC = topic.KIND.name
ACL = acl.KIND.name
"""The kinds every spec means (the stack's topics and ACLs); the rest come from an engine's deployment."""


def by_token(token: str) -> ResourceKind:
    """The kind the plugin serves as ``token``; ProvisionFailed naming the ones it serves otherwise."""
    for kind in KINDS.values():
        if kind.token == token:
            return kind
    raise ProvisionFailed(f"unknown resource type {token}: this plugin serves {', '.join(k.token for k in KINDS.values())}")
