"""The ``mm2spec`` Pulumi package: its resource tokens, its schema, the resource classes a program
registers with the provider plugin, and what a spec's import IDs stand for.

The plugin (``plugin``: the ``pulumi-resource-mm2spec`` executable) serves the same providers the
dynamic resources use (``TopicProvider``, ``AclProvider``, ...): one check, one diff (shared with
``mm2spec plan`` through ``mm2spec.plan.diff``), one create / read / update / delete per kind.
This module holds only what a real package adds:

- ``TOKENS``: resource type token -> the provider instance that serves it, from the registered
  resource kinds (``kinds.KINDS``);
- ``schema``: the package schema (``pulumi package get-schema`` / ``gen-sdk``), built from each
  kind's provider's ``input_keys`` so it cannot drift from what the providers record;
- ``write_schema`` (``python -m mm2spec.provision.plugin_package --schema FILE``): that schema as
  a file, for ``pulumi package gen-sdk FILE --language nodejs|go`` (TypeScript and Go SDKs);
- ``PluginResource`` and ``plugin_class``: the resource class a Python program registers with the
  plugin for each kind (``program.declare`` with ``ProgramSettings.plugin``);
- ``importables`` / ``import_entries``: the resources a spec means, by the import ID of each, and
  the ``pulumi import --file`` document for those that exist (``mm2spec plan --pulumi-import-file``).

Import IDs (``pulumi import``): a topic ``<cluster>/<topic>``; an ACL resource its name, i.e. the
spec statement ``<cluster>/<principal>/<TYPE>/<PATTERN>/<name>`` or
``<cluster>/<principal>/<TYPE>/matching/<regex>`` (with ``/<permission>/<host>`` unless ALLOW on
any host); a connector its name (``<flow>-Mirror<Kind>Connector``) or the ID its create records,
``<connectUrl>/connectors/<name>``. The ID is the resource's Pulumi name too, so an import lands
where the program declares it.
"""

from __future__ import annotations

import json
import argparse
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

import pulumi

import mm2spec
from mm2spec.engines import engine_for
from mm2spec.errors import OutputUnwritable, ProvisionFailed
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.plan.desired import SourceSnapshot, desired_resources, snapshot_sources
from mm2spec.provision.acl import acl_groups, acl_inputs
from mm2spec.provision.base import PACKAGE, Provider, ResourceKind
from mm2spec.provision.connection import connection_inputs, resolve_passwords, used_clusters
from mm2spec.provision.kinds import ACL, KINDS, TOPIC, by_token
from mm2spec.provision.topic import topic_inputs
from mm2spec.spec.model import DesiredState

#: Token -> the provider the dynamic resource of that kind uses: the plugin calls exactly it.
TOKENS: dict[str, Provider] = {kind.token: kind.provider for kind in KINDS.values()}
#: Token -> the type its dynamic twin has in existing stacks (``ProvisionedResource``'s module and name).
DYNAMIC_TYPES: dict[str, str] = {kind.token: kind.dynamic_type for kind in KINDS.values()}

_STRING = {"type": "string"}
_ANY = {"$ref": "pulumi.json#/Any"}
#: Schema types of the inputs; an input not named here is ``Any`` (nested maps the providers check).
_TYPES: dict[str, dict] = {
    "cluster": _STRING, "name": _STRING, "password": {"type": "string", "secret": True},
    "partitions": {"type": "integer"}, "configs": {"type": "object", "additionalProperties": _STRING},
    "connectUrl": _STRING, "config": {"type": "object", "additionalProperties": _STRING},
    "readyTimeoutSeconds": {"type": "number"}, "path": _STRING, "root": _STRING, "content": _STRING,
    "run": {"type": "boolean"}, "stateDir": _STRING, "reasons": {"type": "array", "items": _STRING},
    "resources": {"type": "object", "additionalProperties": {"type": "array", "items": _STRING}},
}


def schema() -> dict[str, Any]:
    """The package schema (Pulumi's package schema format), from the registered kinds' providers."""
    resources = {}
    for kind in KINDS.values():
        provider = kind.provider
        keys = provider.input_keys + provider.secret_keys
        inputs = {k: dict(_TYPES.get(k, _ANY)) for k in keys}
        outputs = {**inputs, **{k: dict(v) for k, v in kind.learned.items()}}
        resources[kind.token] = {
            "description": kind.description,
            "inputProperties": inputs,
            "requiredInputs": [k for k in provider.identity_keys if k in inputs],
            "properties": outputs,
            "required": [k for k in provider.identity_keys if k in outputs],
        }
    return {
        "name": PACKAGE,
        "displayName": "mm2spec",
        "version": mm2spec.__version__,
        "description": "Kafka disaster recovery from a DR spec: topics, ACLs, MM2 connectors, the Spark mirror.",
        "config": {"variables": {
            "spec": {"type": "string", "description": "The DR spec file: what import IDs resolve against."},
            "environment": {"type": "string", "description": "The spec's environment overlay."},
        }},
        "provider": {"description": "The mm2spec provider (no settings of its own; it reads the stack config)."},
        "resources": resources,
        "language": {"nodejs": {"packageName": "@mm2spec/pulumi"},
                     "go": {"importBasePath": "example.com/mm2spec/sdk/go/mm2spec"},
                     "python": {"packageName": "pulumi_mm2spec"}},
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True)


def write_schema(path: str | Path) -> Path:
    """Write the package schema to ``path`` (folders made as needed): the file
    ``pulumi package gen-sdk FILE --language nodejs|go`` turns into a TypeScript or Go SDK."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(schema_text() + "\n", encoding="utf-8")
    return target


class PluginResource(pulumi.CustomResource):
    """A resource served by the ``pulumi-resource-mm2spec`` plugin; the same inputs as its dynamic
    twin (``Topic``, ``Acl``, ...), given as a dict. Secret inputs are declared secret outputs too.

    ``program.declare`` gives each aliases to its dynamic twin's type (``dynamic_type``; under the
    same parent, and at the stack's root where the program registered it before the component), so
    a stack the dynamic providers made moves over to the plugin in place: the engine diffs the
    recorded outputs with the plugin's provider, which is the same provider, and finds nothing to
    change."""

    kind: ClassVar[ResourceKind]

    @classmethod
    def dynamic_type(cls) -> str:
        """The type of this resource's dynamic twin in existing stacks."""
        return cls.kind.dynamic_type

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        secrets = list(TOKENS[self.kind.token].secret_keys)
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(additional_secret_outputs=secrets or None), opts)
        # The outputs a provider learns (``adopted``, ...) are not given: the program reads none of
        # them, and each property given costs the SDK an Output of its own, for every resource.
        super().__init__(self.kind.token, name, props, opts)


@cache
def plugin_class(kind: ResourceKind) -> type[PluginResource]:
    """The class a program registers resources of ``kind`` with, served by the plugin (``PluginTopic``, ...)."""
    return type(f"Plugin{kind.name}", (PluginResource,), {"kind": kind, "__module__": __name__})


# ------------------------------------------------------------------------------------ import
@dataclass(frozen=True)
class Importable:
    """A resource the spec means, as ``pulumi import`` names it."""

    type: str
    """Its type token (``mm2spec:index:Topic``, ...)."""
    name: str
    """The Pulumi name the program gives it; also its import ID."""
    inputs: dict
    """The inputs the program gives it (the password in plain: only the plugin holds these)."""

    @property
    def kind(self) -> ResourceKind:
        return by_token(self.type)

    @property
    def recorded_id(self) -> str:
        """The ID its create records (the name, unless its kind records another)."""
        recorded = self.kind.recorded_id
        return recorded(self.inputs, self.name) if recorded is not None else self.name

    def matches(self, id_: str) -> bool:
        return id_ == self.name or id_.rstrip("/") == self.recorded_id


def importables(state: DesiredState, sources: Mapping[str, SourceSnapshot],
                passwords: Mapping[str, str | None]) -> list[Importable]:
    """Every topic, ACL resource and importable deployment resource (a connector) ``state`` means
    given the source snapshot, with the inputs ``program.declare`` gives it (the same input builders)."""
    conns = {alias: connection_inputs(state.cluster(alias), passwords.get(alias)) for alias in used_clusters(state)}
    topic, acl = KINDS[TOPIC], KINDS[ACL]
    found = [Importable(topic.token, t.key, topic_inputs(t, conns[t.cluster]))
             for t in desired_resources(state, sources).topics]
    found += [Importable(acl.token, g.name, acl_inputs(g, conns[g.cluster])) for g in acl_groups(state, sources)]
    for resource in engine_for(state).deployment_resources().resources:
        kind = KINDS[resource.kind]
        if kind.importable and kind.deployment_inputs is not None:
            found.append(Importable(kind.token, resource.name, kind.deployment_inputs(state, resource, None)))
    return found


def find_importable(found: Iterable[Importable], token: str, id_: str, spec_name: str) -> Importable:
    """The resource of kind ``token`` that ``id_`` names; ProvisionFailed naming the ID if none."""
    kind = by_token(token)
    if not kind.importable:
        raise ProvisionFailed(f'import ID "{id_}": a {kind.name} cannot be imported; only '
                              f"{', '.join(k.name for k in KINDS.values() if k.importable)} can (pulumi up writes the rest)")
    candidates = [f for f in found if f.type == token]
    for candidate in candidates:
        if candidate.matches(id_):
            return candidate
    examples = ", ".join(f'"{c.name}"' for c in candidates[:3]) or "none"
    raise ProvisionFailed(f'import ID "{id_}" names no {kind.name} of spec "{spec_name}" ({len(candidates)} {kind.name} '
                          f"resource(s), e.g. {examples}): check the ID against `mm2spec plan --pulumi-import-file`, "
                          "and the stack's mm2spec:spec and mm2spec:environment")


def import_read(item: Importable) -> tuple[str, dict[str, Any]]:
    """``(id, outputs)`` of an existing resource the spec means, as its create would have recorded
    it had it found the resource there (its kind's ``import_learned``: a topic with data, a
    connector: adopted, left by destroy; ACL bindings: pre-existing), with the live values ``read``
    puts in. ProvisionFailed naming the ID when nothing of it exists."""
    kind = item.kind
    provider = TOKENS[item.type]
    live = provider.read_live(item.inputs)
    if live is None:
        where = f'on cluster "{item.inputs["cluster"]}"' if "cluster" in item.inputs else f"at {item.inputs['connectUrl']}"
        raise ProvisionFailed(f'import ID "{item.name}": the {kind.name} does not exist {where}, '
                              "so there is nothing to import: leave it out of the import file (pulumi up creates it)")
    assert kind.import_learned is not None, f"{kind.name} is not importable"
    return item.recorded_id, {**provider.outputs(item.inputs, **kind.import_learned(item.inputs, live)), **live}


def existing(found: list[Importable], admin_for: Callable[[str], KafkaAdmin]) -> list[Importable]:
    """Those of ``found`` that exist: a kind that reads many at once (topics: one metadata read per
    cluster) through its ``exists``, the rest each with its ``read`` (ACL resources and connectors
    follow the spec's size)."""
    present: set[tuple[str, str]] = set()
    for token in dict.fromkeys(item.type for item in found):
        items = [item for item in found if item.type == token]
        exists = by_token(token).exists
        if exists is not None:
            present.update((token, name) for name in exists([(i.inputs, i.name) for i in items], admin_for))
        else:
            present.update((token, i.name) for i in items if TOKENS[token].read_live(i.inputs) is not None)
    return [item for item in found if (item.type, item.name) in present]


def import_entries(found: Iterable[Importable], component: str | None) -> dict[str, Any]:
    """The ``pulumi import --file`` document for ``found``: under a ``DisasterRecovery`` component
    named ``component`` (created empty by the import, as the program declares it), or at the root."""
    resources: list[dict[str, Any]] = []
    if component:
        resources.append({"type": "mm2spec:index:DisasterRecovery", "name": component, "component": True})
    for item in found:
        entry = {"type": item.type, "name": item.name, "id": item.name}
        if component:
            entry["parent"] = component
        resources.append(entry)
    return {"resources": resources}


def write_import_file(state: DesiredState, path: str, component: str | None, timeout: float) -> int:
    """Write Pulumi's import file (``mm2spec plan --pulumi-import-file``) for the resources of
    ``state`` that exist, reading the clusters with the environment's secrets; how many it lists.
    ``component`` None: the ``DisasterRecovery`` component is named after the Pulumi project in the
    current folder (as the bundled program names it), or the resources sit at the root without one."""
    passwords = resolve_passwords(state, os.environ.get)

    def admin_for(alias: str) -> KafkaAdmin:
        return KafkaAdmin(state.cluster(alias), timeout=timeout, secrets=lambda _name: passwords.get(alias))

    found = existing(importables(state, snapshot_sources(state, admin_for), passwords), admin_for)
    if component is None:
        component = _project_name()
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(import_entries(found, component or None), out, indent=2)
            out.write("\n")
    except OSError as exc:
        raise OutputUnwritable(f"cannot write the import file {path}: {exc.strerror}") from None
    return len(found)


def _project_name() -> str | None:
    """The ``name`` of the Pulumi project in the current folder (the program's component is named so)."""
    import yaml

    try:
        with open("Pulumi.yaml", encoding="utf-8") as project:
            return str((yaml.safe_load(project) or {}).get("name") or "") or None
    except (OSError, yaml.YAMLError):
        return None


def main(argv: list[str] | None = None) -> None:
    """``python -m mm2spec.provision.plugin_package --schema FILE``: the schema, without a stack,
    a spec or the Pulumi CLI (``pulumi package get-schema pulumi-resource-mm2spec`` gives the same)."""
    parser = argparse.ArgumentParser(prog="python -m mm2spec.provision.plugin_package",
                                     description="Write the mm2spec Pulumi package schema.", allow_abbrev=False)
    parser.add_argument("--schema", metavar="FILE", required=True,
                        help="where to write the schema (JSON), e.g. for `pulumi package gen-sdk FILE`")
    args = parser.parse_args(argv)
    try:
        write_schema(args.schema)
    except OSError as exc:
        # SystemExit with a message: Python shows it on stderr and exits 1, no traceback.
        raise SystemExit(f"cannot write the schema to {args.schema}: {exc.strerror or exc}; "
                         "choose a writable path") from None


if __name__ == "__main__":
    main()
