"""The internal topics and ACL bindings a spec derives, as data (``resources.json``) and as text."""

from __future__ import annotations

from mm2spec.spec.model import DesiredState


def resources(state: DesiredState) -> dict:
    """Internal topics and ACL bindings as data (the JSON listing)."""
    return {
        "internalTopics": [
            {"cluster": t.cluster, "name": t.name, "partitions": t.partitions,
             "replicationFactor": t.replication_factor, "configs": dict(t.configs), "purpose": t.purpose}
            for t in state.internal_topics
        ],
        "aclsManaged": state.manage_acls,
        "aclBindings": [
            {"cluster": b.cluster, "principal": b.principal, "resourceType": b.resource_type,
             "resourceName": b.resource_name, "patternType": b.pattern_type, "operation": b.operation,
             "permission": b.permission, "host": b.host, "reason": b.reason}
            for b in state.acl_bindings
        ],
        "aclPatterns": [
            {"cluster": p.cluster, "principal": p.principal, "resourceType": p.resource_type,
             "sourceCluster": p.source_cluster, "regex": p.regex, "namePrefix": p.name_prefix,
             "operations": list(p.operations), "reason": p.reason,
             "note": "a regular expression cannot be an ACL: `mm2spec plan` resolves it against the live cluster"}
            for p in state.acl_patterns
        ],
    }


def resources_text(state: DesiredState) -> str:
    """Internal topics and ACL bindings as an aligned, human-readable listing."""
    lines = ["# Internal topics (replication factor -1 = broker default)"]
    for t in state.internal_topics:
        configs = ",".join(f"{k}={v}" for k, v in t.configs)
        lines.append(f"{t.cluster:<12} {t.name:<50} partitions={t.partitions:<3} rf=-1 {configs}  # {t.purpose}")
    lines.append("")
    managed = "managed" if state.manage_acls else "not managed (acls.manage: false)"
    principals = ", ".join(dict.fromkeys(b.principal for b in state.acl_bindings)) or state.principal
    lines.append(f"# ACL bindings for {principals}: {managed}")
    for b in sorted(state.acl_bindings, key=lambda b: (b.cluster, b.resource_type, b.resource_name, b.operation)):
        lines.append(f"{b.cluster:<12} {b.permission} {b.operation:<17} {b.resource_type:<16} "
                     f"{b.pattern_type:<8} {b.resource_name}  # {b.reason}")
    for p in state.acl_patterns:
        lines.append(f"{p.cluster:<12} ALLOW {'+'.join(p.operations)} {p.resource_type} matching /{p.regex}/ "
                     f"on {p.source_cluster} (prefix {p.name_prefix!r}): resolved by `mm2spec plan`  # {p.reason}")
    return "\n".join(lines) + "\n"
