"""The ACL bindings of one principal on one resource pattern, as one Pulumi resource.

One resource per (cluster, principal, resource type, resource name, pattern type, permission,
host) holds the *operations* allowed there, rather than one resource per operation: a mirrored
topic needs six operations on the target and three on the source, and a thousand topics would
otherwise be nine thousand resources for every preview to walk through.

Inputs: ``cluster`` and ``connection`` (see ``connection``), ``password`` (secret), ``binding``:
``principal``, ``resourceType`` (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID), ``resourceName``,
``patternType`` (LITERAL, PREFIXED), ``permission`` and ``host``; ``operations`` (sorted) and
``reasons`` (why the spec wants them; for the reader). Outputs add ``preexisting``: the operations
already allowed before the stack created the resource, which ``destroy`` leaves in place.

Replaced (delete first, as old and new may share bindings): any identity field. In place: the
operations, through ``mm2spec.diff.diff_acls`` on the bindings they stand for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

from mm2spec.diff import diff_acls
from mm2spec.model import AclBinding
from mm2spec.provision import connection
from mm2spec.provision.connection import CONNECTION_KEYS

BINDING_KEYS = ("principal", "resourceType", "resourceName", "patternType", "permission", "host")
IDENTITY_KEYS = ("cluster", "binding")
INPUT_KEYS = CONNECTION_KEYS + ("binding", "operations", "reasons")
RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")


@dataclass(frozen=True)
class AclGroup:
    """Bindings that differ only by operation: what one ``Acl`` resource manages."""

    cluster: str
    principal: str
    resource_type: str
    resource_name: str
    pattern_type: str
    permission: str
    host: str
    operations: tuple[str, ...]
    reasons: tuple[str, ...]

    @property
    def resource_name_key(self) -> str:
        """The Pulumi resource name: readable, unique per group."""
        suffix = "" if (self.permission, self.host) == ("ALLOW", "*") else f"/{self.permission}/{self.host}"
        return (f"{self.cluster}/{self.principal}/{self.resource_type}/{self.pattern_type}/"
                f"{self.resource_name}{suffix}")


def group_bindings(bindings: Iterable[AclBinding]) -> list[AclGroup]:
    """Bindings grouped per resource pattern, in a stable order."""
    groups: dict[tuple, tuple[set, set]] = {}
    for b in bindings:
        key = (b.cluster, b.principal, b.resource_type, b.resource_name, b.pattern_type, b.permission, b.host)
        operations, reasons = groups.setdefault(key, (set(), set()))
        operations.add(b.operation)
        if b.reason:
            reasons.add(b.reason)
    return [AclGroup(*key, tuple(sorted(ops)), tuple(sorted(reasons))) for key, (ops, reasons) in sorted(groups.items())]


def acl_inputs(group: AclGroup, conn: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **conn,
        "binding": {
            "principal": group.principal,
            "resourceType": group.resource_type,
            "resourceName": group.resource_name,
            "patternType": group.pattern_type,
            "permission": group.permission,
            "host": group.host,
        },
        "operations": list(group.operations),
        "reasons": list(group.reasons),
    }


def bindings_of(props: Mapping[str, Any], operations: Iterable[str] | None = None) -> list[AclBinding]:
    """The bindings a resource's props stand for (all its operations, or those given)."""
    ops = (props.get("operations") or ()) if operations is None else operations
    b = props.get("binding") or {}
    return [AclBinding(props["cluster"], b["principal"], b["resourceType"], b["resourceName"], b["patternType"],
                       op, b.get("permission") or "ALLOW", b.get("host") or "*")
            for op in ops]


def _where(props: Mapping[str, Any]) -> str:
    b = props.get("binding") or {}
    return (f'cluster "{props["cluster"]}": ACLs of {b.get("principal")} on {b.get("resourceType")} '
            f'{b.get("patternType")} {b.get("resourceName")}')


class AclProvider(ResourceProvider):
    """Creates and deletes ACL bindings through ``KafkaAdmin``; holds nothing."""

    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        connection.remember_config(req.config)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        binding = news.get("binding") or {}
        if not isinstance(binding, dict) or any(not binding.get(k) for k in BINDING_KEYS):
            failures.append(CheckFailure("binding", f"a binding needs {', '.join(BINDING_KEYS)}"))
        else:
            if binding["resourceType"] not in RESOURCE_TYPES:
                failures.append(CheckFailure("binding", f"resourceType must be one of {', '.join(RESOURCE_TYPES)}"))
            if binding["patternType"] not in PATTERN_TYPES:
                failures.append(CheckFailure("binding", f"patternType must be one of {', '.join(PATTERN_TYPES)}"))
            if ":" not in str(binding["principal"]):
                failures.append(CheckFailure("binding", "a principal reads TYPE:NAME, e.g. User:mm2"))
        operations = news.get("operations") or []
        unknown = [op for op in operations if op not in OPERATIONS]
        if not operations or unknown:
            failures.append(CheckFailure("operations", f"need at least one of {', '.join(OPERATIONS)}"
                                         + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else "")))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in IDENTITY_KEYS if olds.get(k) != news.get(k)]
        if replaces:
            return DiffResult(changes=True, replaces=replaces, delete_before_replace=True)
        create, delete = diff_acls(bindings_of(news), bindings_of(olds))
        other = connection.changed_inputs(olds, news, INPUT_KEYS)
        return DiffResult(changes=bool(create or delete or other))

    def create(self, props: dict[str, Any]) -> CreateResult:
        admin = connection.admin(props)
        b = props["binding"]
        live = admin.acls(b["principal"], b["resourceType"], b["resourceName"], b["patternType"])
        wanted = bindings_of(props)
        preexisting = sorted(b.operation for b in wanted if b in live)
        admin.create_acls(wanted)
        outs = {k: props.get(k) for k in INPUT_KEYS + (connection.PASSWORD,)}
        outs["preexisting"] = preexisting
        return CreateResult(pulumi_id(props), outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        admin = connection.admin(news)
        preexisting = set(olds.get("preexisting") or ())
        create, delete = diff_acls(bindings_of(news), bindings_of(olds))
        admin.create_acls(create)
        admin.delete_acls([b for b in delete if b.operation not in preexisting])
        outs = {k: news.get(k) for k in INPUT_KEYS + (connection.PASSWORD,)}
        outs["preexisting"] = sorted(preexisting & set(news.get("operations") or ()))
        return UpdateResult(outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        preexisting = set(props.get("preexisting") or ())
        owned = [b for b in bindings_of(props) if b.operation not in preexisting]
        if owned:
            connection.admin(props, prefer_current=True).delete_acls(owned)


def pulumi_id(props: Mapping[str, Any]) -> str:
    b = props["binding"]
    return "/".join([props["cluster"]] + [str(b[k]) for k in BINDING_KEYS])


PROVIDER = AclProvider()


class Acl(Resource, module="kafka", name="Acl"):
    """ACL bindings of one principal on one resource pattern (type ``pulumi-python:dynamic/kafka:Acl``)."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        secret = pulumi.ResourceOptions(additional_secret_outputs=[connection.PASSWORD])
        super().__init__(PROVIDER, name, props, pulumi.ResourceOptions.merge(secret, opts))
