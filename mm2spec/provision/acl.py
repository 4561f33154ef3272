"""ACL bindings as Pulumi resources: one resource per statement of the spec, not per binding.

A resource holds the bindings of one principal, resource type, pattern type, permission and host
on a cluster, as ``resources``: resource name -> allowed operations.

- A binding the spec states directly (a literal topic or group, a prefix, the cluster, the
  Connect worker's topics and transactional IDs) gets a resource of its own, named
  ``<cluster>/<principal>/<TYPE>/<PATTERN>/<name>``, holding that one name.
- A regular expression cannot be an ACL, so the spec's regex selectors resolve against the live
  source cluster to literal names; all the names one regex matches share one resource, named
  ``<cluster>/<principal>/<TYPE>/matching/<regex>`` (with the target prefix of the default
  replication policy, if any, as ``<prefix>(<regex>)``). A new matching topic updates it.

So the number of ACL resources follows the size of the spec, not the number of topics on the
cluster: a regex matching a thousand topics is two resources (source and target), where one
resource per topic would be two thousand for every preview to walk through.

Inputs: ``cluster``, ``connection``, ``password`` (secret; see ``connection``), ``binding``
(``principal``, ``resourceType``: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID; ``patternType``:
LITERAL, PREFIXED; ``permission``, ``host``), ``resources`` (name -> sorted operations) and
``reasons`` (why the spec wants them, for the reader). Outputs add ``preexisting``: bindings that
were already there when the stack created the resource; ``destroy`` leaves those in place.

Replaced (delete first, as old and new may share bindings): the cluster or anything in
``binding``. In place: ``resources``, through ``mm2spec.plan.diff.diff_acls`` on the bindings they
stand for (the diff ``mm2spec plan`` uses).

``pulumi refresh`` reads the bindings back (``read_acl``: one DescribeAcls of the principal's
bindings of this type and pattern): ``resources`` becomes what is live of the names the resource
holds, so a binding deleted behind the stack shows, and the next preview creates it again; a
resource none of whose bindings is left reads back gone. A refresh of many ACL resources of one
principal shares one DescribeAcls of all its bindings (``mm2spec.provision.reads``).

Writes go in bounded requests (``KafkaAdmin.create_acls`` / ``delete_acls``), each sent again while
it fails retriably or times out; the creates of ACL resources handled at the same time on one cluster
go as one (``batch``: one read of what exists, one CreateAcls, one wait for the broker's view); a
delete sends only the bindings still there, so a ``destroy`` stopped half-way finishes when run again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, UpdateResult

from mm2spec.errors import KafkaOperationFailed, ProvisionFailed
from mm2spec.live.kafka import ACL_READ_BY_RESOURCE_MAX
from mm2spec.plan.desired import SourceSnapshot, desired_acls
from mm2spec.plan.diff import diff_acls
from mm2spec.provision import batch, connection, reads
from mm2spec.provision.base import ProvisionedResource, Provider, ResourceKind
from mm2spec.provision.connection import CONNECTION_KEYS
from mm2spec.spec.model import AclBinding, DesiredState

BINDING_KEYS = ("principal", "resourceType", "patternType", "permission", "host")
RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")


@dataclass(frozen=True)
class AclGroup:
    """The bindings one ``Acl`` resource manages."""

    name: str
    """The Pulumi resource name (see the module docstring)."""
    cluster: str
    """The alias of the cluster the bindings are on."""
    principal: str
    """Who the bindings allow (or deny), as ``TYPE:NAME``, e.g. ``User:mm2``."""
    resource_type: str
    """``TOPIC``, ``GROUP``, ``CLUSTER`` or ``TRANSACTIONAL_ID``."""
    pattern_type: str
    """How the resource names match: ``LITERAL`` or ``PREFIXED`` (a regex is resolved to literals)."""
    permission: str
    """``ALLOW`` or ``DENY``."""
    host: str
    """The host the bindings apply to; ``*`` for any."""
    resources: tuple[tuple[str, tuple[str, ...]], ...]
    """(resource name, sorted operations), sorted by name."""
    reasons: tuple[str, ...]
    """Why the spec wants these bindings, sorted: for the reader of a preview."""


def _group(name: str, bindings: list[AclBinding]) -> AclGroup:
    first = bindings[0]
    operations: dict[str, set[str]] = {}
    for b in bindings:
        operations.setdefault(b.resource_name, set()).add(b.operation)
    return AclGroup(name, first.cluster, first.principal, first.resource_type, first.pattern_type, first.permission,
                    first.host, tuple((n, tuple(sorted(ops))) for n, ops in sorted(operations.items())),
                    tuple(sorted({b.reason for b in bindings if b.reason})))


def _split(bindings: Iterable[AclBinding], label) -> dict[tuple, list[AclBinding]]:
    groups: dict[tuple, list[AclBinding]] = {}
    for b in bindings:
        key = (b.cluster, b.principal, b.resource_type, b.pattern_type, b.permission, b.host, label(b))
        groups.setdefault(key, []).append(b)
    return groups


def _name(key: tuple) -> str:
    cluster, principal, rtype, _pattern, permission, host, label = key
    suffix = "" if (permission, host) == ("ALLOW", "*") else f"/{permission}/{host}"
    return f"{cluster}/{principal}/{rtype}/{label}{suffix}"


def acl_groups(state: DesiredState, sources: Mapping[str, SourceSnapshot]) -> list[AclGroup]:
    """The ACL resources for ``state``: its bindings as ``mm2spec.plan.desired.desired_acls`` wants them,
    grouped per spec statement. Every wanted binding is in exactly one group."""
    if not state.manage_acls:
        return []
    stated = desired_acls(dataclasses.replace(state, acl_patterns=()), sources)
    seen = {b.key for b in stated}
    groups = [_group(_name(key), bs)
              for key, bs in sorted(_split(stated, lambda b: f"{b.pattern_type}/{b.resource_name}").items())]
    for pattern in state.acl_patterns:
        resolved = desired_acls(dataclasses.replace(state, acl_bindings=(), acl_patterns=(pattern,)), sources)
        fresh = [b for b in resolved if b.key not in seen]
        seen.update(b.key for b in fresh)
        regex = f"{pattern.name_prefix}({pattern.regex})" if pattern.name_prefix else pattern.regex
        for key, bs in sorted(_split(fresh, lambda _b: f"matching/{regex}").items()):
            groups.append(_group(_name(key), bs))
    return groups


def acl_inputs(group: AclGroup, conn: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of the Acl resource for ``group`` on the cluster ``conn`` names."""
    return {
        **conn,
        "binding": {
            "principal": group.principal,
            "resourceType": group.resource_type,
            "patternType": group.pattern_type,
            "permission": group.permission,
            "host": group.host,
        },
        "resources": {name: list(ops) for name, ops in group.resources},
        "reasons": list(group.reasons),
    }


def bindings_of(props: Mapping[str, Any], resources: Mapping[str, Iterable[str]] | None = None) -> list[AclBinding]:
    """The bindings a resource's props stand for (its ``resources``, or those given)."""
    b = props.get("binding") or {}
    wanted = (props.get("resources") or {}) if resources is None else resources
    return [AclBinding(props["cluster"], b["principal"], b["resourceType"], name, b["patternType"], op,
                       b.get("permission") or "ALLOW", b.get("host") or "*")
            for name, ops in sorted(wanted.items()) for op in ops]


def _as_map(bindings: Iterable[AclBinding]) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for b in bindings:
        result.setdefault(b.resource_name, []).append(b.operation)
    return {name: sorted(ops) for name, ops in sorted(result.items())}


def read_acl(admin, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The recorded ``resources`` as live now: for each name the resource holds, the operations the
    cluster grants with its binding (principal, type, pattern, permission, host); None when none is
    left. One DescribeAcls (``KafkaAdmin.acls``) whatever the number of names."""
    b = props["binding"]
    return acl_read(admin.acls(b["principal"], b["resourceType"], None, b["patternType"]), props)


def acl_read(live: Iterable[AclBinding], props: Mapping[str, Any]) -> dict[str, Any] | None:
    """``read_acl``'s answer given live bindings of the resource's principal (any others are ignored)."""
    b = props["binding"]
    names = set(props.get("resources") or {})
    wanted = (b["resourceType"], b["patternType"], b.get("permission") or "ALLOW", b.get("host") or "*")
    held = _as_map(x for x in live if x.resource_name in names
                   and (x.resource_type, x.pattern_type, x.permission, x.host) == wanted)
    return {"resources": held} if held else None


def index_by_name(bindings: Iterable[AclBinding]) -> dict[str, list[AclBinding]]:
    """A principal's bindings by resource name: what a large refresh shares (``mm2spec.provision.reads``),
    so each ACL resource looks up its own names instead of walking every binding."""
    index: dict[str, list[AclBinding]] = {}
    for x in bindings:
        index.setdefault(x.resource_name, []).append(x)
    return index


class AclProvider(Provider):
    """Creates and deletes ACL bindings through ``KafkaAdmin``; holds nothing."""

    input_keys = CONNECTION_KEYS + ("binding", "resources", "reasons")
    identity_keys = ("cluster", "binding")
    secret_keys = (connection.PASSWORD,)

    def problems(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Iterable[CheckFailure]:
        binding = news.get("binding") or {}
        if not isinstance(binding, dict) or any(not binding.get(k) for k in BINDING_KEYS):
            yield CheckFailure("binding", f"a binding needs {', '.join(BINDING_KEYS)}")
        else:
            if binding["resourceType"] not in RESOURCE_TYPES:
                yield CheckFailure("binding", f"resourceType must be one of {', '.join(RESOURCE_TYPES)}")
            if binding["patternType"] not in PATTERN_TYPES:
                yield CheckFailure("binding", f"patternType must be one of {', '.join(PATTERN_TYPES)}")
            if ":" not in str(binding["principal"]):
                yield CheckFailure("binding", "a principal reads TYPE:NAME, e.g. User:mm2")
        resources = news.get("resources")
        if not isinstance(resources, dict) or not resources:
            yield CheckFailure("resources", "at least one resource name with its operations")
        else:
            unknown = sorted({str(op) for ops in resources.values() for op in (ops or [None]) if op not in OPERATIONS})
            if unknown:
                yield CheckFailure("resources", f"unknown operations {', '.join(unknown)}; "
                                                f"known: {', '.join(OPERATIONS)}")

    def deletes_first(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        return True  # old and new may share bindings: created first, they would then be deleted

    def diff_properties(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        create, delete = diff_acls(bindings_of(news), bindings_of(olds))
        return DiffResult(changes=bool(create or delete or self.changed_inputs(olds, news)))

    def read_live(self, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
        admin = connection.admin(props, prefer_current=True)
        principal = props["binding"]["principal"]
        # Shared from the first read: one resource's own read (all the principal's bindings of its type
        # and pattern) is most of the whole one, and a regex resource makes it tens of thousands;
        # read by each of a stack's ACL resources at once, the broker's answers came too late.
        index = reads.shared("acls", connection.cluster_from(props), lambda: index_by_name(admin.acls(principal)),
                             principal, after=0)
        if index is None:
            return read_acl(admin, props)
        return acl_read((x for name in props.get("resources") or {} for x in index.get(name, ())), props)

    def create(self, props: dict[str, Any]) -> CreateResult:
        reads.forget(connection.cluster_from(props))
        preexisting = _create_new(props, tuple(bindings_of(props)))
        return CreateResult(_id(props), self.outputs(props, preexisting=_as_map(preexisting)))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        reads.forget(connection.cluster_from(news))
        admin = connection.admin(news)
        preexisting = set(bindings_of(olds, olds.get("preexisting") or {}))
        create, delete = diff_acls(bindings_of(news), bindings_of(olds))
        _create(admin, news, create)
        admin.delete_acls([d for d in delete if d not in preexisting])
        return UpdateResult(self.outputs(news, preexisting=_as_map(preexisting & set(bindings_of(news)))))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        preexisting = set(bindings_of(props, props.get("preexisting") or {}))
        owned = [b for b in bindings_of(props) if b not in preexisting]
        if owned:  # in bounded requests; those already gone are skipped (a re-run finishes a stopped destroy)
            reads.forget(connection.cluster_from(props))
            connection.admin(props, prefer_current=True).delete_acls(owned)


def _create_new(props: Mapping[str, Any], wanted: tuple[AclBinding, ...]) -> list[AclBinding]:
    """Create those of ``wanted`` the cluster does not hold; those it held already (pre-existing).

    With the creates of other ACL resources on the same cluster running at the same time
    (``batch``): one read of what exists (per resource while they are few, see
    ``KafkaAdmin.live_acls``), one CreateAcls, one wait for the broker's view. A KRaft controller
    commits each CreateAcls on its own, so one per resource bounded a stack of 6,700 literal ACL
    resources to about 30 creates a second. A batch holds at most ``ACL_READ_BY_RESOURCE_MAX``
    resources, so a literal statement's (one topic each) are read per resource."""
    def send() -> Callable[[list[tuple[AclBinding, ...]]], list[list[AclBinding]]]:
        def create(groups: list[tuple[AclBinding, ...]]) -> list[list[AclBinding]]:
            admin = connection.admin(props)
            everything = list(dict.fromkeys(b for group in groups for b in group))
            live = admin.live_acls(everything)
            already = {b for b in everything if b.key[1:] in live[b.principal]}
            _create(admin, props, [b for b in everything if b not in already])
            return [[b for b in group if b in already] for group in groups]
        return create

    return batch.coalescer(("create-acls", connection.connection_key(props)), send,
                            limit=ACL_READ_BY_RESOURCE_MAX)(wanted)


def _create(admin, props: Mapping[str, Any], bindings: list[AclBinding]) -> None:
    try:
        admin.create_acls(bindings)
    except KafkaOperationFailed as exc:
        if "SECURITY_DISABLED" in str(exc) or "No Authorizer" in str(exc):
            raise ProvisionFailed(
                f'cluster "{props["cluster"]}" has no authorizer, so it cannot hold ACLs: set acls.manage: false '
                "for this environment, or configure authorizer.class.name on its brokers") from None
        raise


def _id(props: Mapping[str, Any]) -> str:
    b = props["binding"]
    names = sorted(props.get("resources") or {})
    what = names[0] if len(names) == 1 else "matching"
    return "/".join([props["cluster"], b["principal"], b["resourceType"], b["patternType"], what])


class Acl(ProvisionedResource, module="kafka", name="Acl", provider=AclProvider()):
    """ACL bindings of one spec statement (type ``pulumi-python:dynamic/kafka:Acl``)."""


KIND = ResourceKind(
    "AclBinding", Acl,
    "The ACL bindings of one spec statement on a cluster (name -> operations). Import ID: the "
    "resource's name, `<cluster>/<principal>/<TYPE>/<PATTERN>/<name>` or `.../matching/<regex>`.",
    learned={"preexisting": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}}},
    import_learned=lambda _inputs, live: {"preexisting": live["resources"]})
"""The ACL resource kind (``kinds.KINDS``)."""
