"""The ``mm2spec`` Pulumi package: its resource tokens, its schema, the resource classes a program
registers with the provider plugin, and what a spec's import IDs stand for.

The plugin (``plugin``: the ``pulumi-resource-mm2spec`` executable) serves the same providers the
dynamic resources use (``TopicProvider``, ``AclProvider``, ...): one check, one diff (shared with
``mm2spec plan`` through ``mm2spec.plan.diff``), one create / read / update / delete per kind.
This module holds only what a real package adds:

- ``TOKENS``: resource type token -> the provider instance that serves it;
- ``schema``: the package schema (``pulumi package get-schema`` / ``gen-sdk``), built from each
  provider's ``input_keys`` so it cannot drift from what the providers record;
- ``write_schema`` (``python -m mm2spec.provision.plugin_package --schema FILE``): that schema as
  a file, for ``pulumi package gen-sdk FILE --language nodejs|go`` (TypeScript and Go SDKs);
- ``PluginResource`` and its subclasses: the resources a Python program registers with the plugin
  (``program.declare`` with ``ProgramSettings.plugin``);
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

import pulumi

import mm2spec
from mm2spec.engines import engine_for
from mm2spec.errors import ProvisionFailed
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.plan.desired import SourceSnapshot, desired_resources
from mm2spec.provision.acl import Acl, acl_groups, acl_inputs
from mm2spec.provision.base import Provider
from mm2spec.provision.connection import connection_inputs
from mm2spec.provision.connector import Connector, connector_inputs
from mm2spec.provision.spark_deployment import SparkDeployment
from mm2spec.provision.topic import Topic, topic_inputs
from mm2spec.provision.worker_config import WorkerConfig
from mm2spec.spec.model import DesiredState

PACKAGE = "mm2spec"
"""The package name: the plugin is ``pulumi-resource-mm2spec``; tokens read ``mm2spec:index:<Kind>``."""
TOPIC = "mm2spec:index:Topic"
ACL_BINDING = "mm2spec:index:AclBinding"
CONNECTOR = "mm2spec:index:Connector"
WORKER_CONFIG = "mm2spec:index:WorkerConfig"
SPARK_DEPLOYMENT = "mm2spec:index:SparkDeployment"

#: Token -> the provider the dynamic resource of that kind uses: the plugin calls exactly it.
TOKENS: dict[str, Provider] = {
    TOPIC: Topic.dynamic_provider,
    ACL_BINDING: Acl.dynamic_provider,
    CONNECTOR: Connector.dynamic_provider,
    WORKER_CONFIG: WorkerConfig.dynamic_provider,
    SPARK_DEPLOYMENT: SparkDeployment.dynamic_provider,
}
#: The kinds ``pulumi import`` takes (the rendered files are written, not found).
IMPORTABLE = (TOPIC, ACL_BINDING, CONNECTOR)

_DESCRIPTIONS = {
    TOPIC: "A Kafka topic (an MM2 internal topic or a mirrored target topic). Import ID: `<cluster>/<topic>`.",
    ACL_BINDING: "The ACL bindings of one spec statement on a cluster (name -> operations). Import ID: the "
                 "resource's name, `<cluster>/<principal>/<TYPE>/<PATTERN>/<name>` or `.../matching/<regex>`.",
    CONNECTOR: "An MM2 connector on the Kafka Connect REST API. Import ID: its name, or "
               "`<connectUrl>/connectors/<name>`.",
    WORKER_CONFIG: "The Connect worker's connect-distributed.properties file.",
    SPARK_DEPLOYMENT: "The Spark mirroring job's config (and, with run, the running job).",
}
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
#: Outputs a provider learns beyond its inputs (``Provider.outputs(..., **learned)``).
_LEARNED = {TOPIC: ("adopted",), CONNECTOR: ("adopted",), ACL_BINDING: ("preexisting",)}
_LEARNED_TYPES = {"adopted": {"type": "boolean"}, "preexisting": _TYPES["resources"]}


def schema() -> dict[str, Any]:
    """The package schema (Pulumi's package schema format), from the providers' inputs."""
    resources = {}
    for token, provider in TOKENS.items():
        keys = provider.input_keys + provider.secret_keys
        inputs = {k: dict(_TYPES.get(k, _ANY)) for k in keys}
        outputs = {**inputs, **{k: dict(_LEARNED_TYPES[k]) for k in _LEARNED.get(token, ())}}
        resources[token] = {
            "description": _DESCRIPTIONS[token],
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


#: Token -> the type its dynamic twin has in existing stacks (``ProvisionedResource``'s module and name).
DYNAMIC_TYPES = {
    TOPIC: "pulumi-python:dynamic/kafka:Topic",
    ACL_BINDING: "pulumi-python:dynamic/kafka:Acl",
    CONNECTOR: "pulumi-python:dynamic/connect:Connector",
    WORKER_CONFIG: "pulumi-python:dynamic/connect:WorkerConfig",
    SPARK_DEPLOYMENT: "pulumi-python:dynamic/spark:Deployment",
}


class PluginResource(pulumi.CustomResource):
    """A resource served by the ``pulumi-resource-mm2spec`` plugin; the same inputs as its dynamic
    twin (``Topic``, ``Acl``, ...), given as a dict. Secret inputs are declared secret outputs too.

    ``program.declare`` gives each aliases to its dynamic twin's type (``dynamic_type``; under the
    same parent, and at the stack's root where the program registered it before the component), so
    a stack the dynamic providers made moves over to the plugin in place: the engine diffs the
    recorded outputs with the plugin's provider, which is the same provider, and finds nothing to
    change."""

    token: ClassVar[str]

    @classmethod
    def dynamic_type(cls) -> str:
        """The type of this resource's dynamic twin in existing stacks."""
        return DYNAMIC_TYPES[cls.token]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        secrets = list(TOKENS[self.token].secret_keys)
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(additional_secret_outputs=secrets or None), opts)
        # The outputs a provider learns (``adopted``, ...) are not given: the program reads none of
        # them, and each property given costs the SDK an Output of its own, for every resource.
        super().__init__(self.token, name, props, opts)


class PluginTopic(PluginResource):
    token = TOPIC


class PluginAclBinding(PluginResource):
    token = ACL_BINDING


class PluginConnector(PluginResource):
    token = CONNECTOR


class PluginWorkerConfig(PluginResource):
    token = WORKER_CONFIG


class PluginSparkDeployment(PluginResource):
    token = SPARK_DEPLOYMENT


# ------------------------------------------------------------------------------------ import
@dataclass(frozen=True)
class Importable:
    """A resource the spec means, as ``pulumi import`` names it."""

    type: str
    """Its type token (``TOPIC``, ``ACL_BINDING``, ``CONNECTOR``)."""
    name: str
    """The Pulumi name the program gives it; also its import ID."""
    inputs: dict
    """The inputs the program gives it (the password in plain: only the plugin holds these)."""

    def matches(self, id_: str) -> bool:
        if id_ == self.name:
            return True
        return self.type == CONNECTOR and id_.rstrip("/") == f"{self.inputs['connectUrl'].rstrip('/')}/connectors/{self.name}"


def importables(state: DesiredState, sources: Mapping[str, SourceSnapshot],
                passwords: Mapping[str, str | None]) -> list[Importable]:
    """Every topic, ACL resource and connector ``state`` means given the source snapshot, with the
    inputs ``program.declare`` gives it (the same input builders)."""
    from mm2spec.provision.program import used_clusters  # program imports this module

    conns = {alias: connection_inputs(state.cluster(alias), passwords.get(alias)) for alias in used_clusters(state)}
    found = [Importable(TOPIC, t.key, topic_inputs(t, conns[t.cluster])) for t in desired_resources(state, sources).topics]
    found += [Importable(ACL_BINDING, g.name, acl_inputs(g, conns[g.cluster])) for g in acl_groups(state, sources)]
    needs = engine_for(state).deployment_resources()
    found += [Importable(CONNECTOR, c["name"], connector_inputs(needs.connect_url, c, state.connect.ready_timeout_seconds))
              for c in needs.connectors]
    return found


def find_importable(found: Iterable[Importable], token: str, id_: str, spec_name: str) -> Importable:
    """The resource of kind ``token`` that ``id_`` names; ProvisionFailed naming the ID if none."""
    kind = token.rpartition(":")[2]
    if token not in IMPORTABLE:
        raise ProvisionFailed(f'import ID "{id_}": a {kind} cannot be imported; only '
                              f"{', '.join(t.rpartition(':')[2] for t in IMPORTABLE)} can (pulumi up writes the rest)")
    candidates = [f for f in found if f.type == token]
    for candidate in candidates:
        if candidate.matches(id_):
            return candidate
    examples = ", ".join(f'"{c.name}"' for c in candidates[:3]) or "none"
    raise ProvisionFailed(f'import ID "{id_}" names no {kind} of spec "{spec_name}" ({len(candidates)} {kind} '
                          f"resource(s), e.g. {examples}): check the ID against `mm2spec plan --pulumi-import-file`, "
                          "and the stack's mm2spec:spec and mm2spec:environment")


def import_read(item: Importable) -> tuple[str, dict[str, Any]]:
    """``(id, outputs)`` of an existing resource the spec means, as its create would have recorded
    it had it found the resource there (a topic with data, a connector: adopted, left by destroy;
    ACL bindings: pre-existing), with the live values ``read`` puts in. ProvisionFailed naming the ID
    when nothing of it exists."""
    from mm2spec.provision import connection
    from mm2spec.provision.topic import _held_records

    provider = TOKENS[item.type]
    live = provider.read_live(item.inputs)
    if live is None:
        where = f'on cluster "{item.inputs["cluster"]}"' if "cluster" in item.inputs else f"at {item.inputs['connectUrl']}"
        raise ProvisionFailed(f'import ID "{item.name}": the {item.type.rpartition(":")[2]} does not exist {where}, '
                              "so there is nothing to import: leave it out of the import file (pulumi up creates it)")
    if item.type == TOPIC:
        learned: dict[str, Any] = {"adopted": _held_records(connection.admin(item.inputs), item.inputs["name"])}
    elif item.type == CONNECTOR:
        learned = {"adopted": True}
    else:
        learned = {"preexisting": live["resources"]}
    record_id = item.name
    if item.type == CONNECTOR:  # the ID the connector's create records
        record_id = f"{item.inputs['connectUrl'].rstrip('/')}/connectors/{item.name}"
    return record_id, {**provider.outputs(item.inputs, **learned), **live}


def existing(found: list[Importable], admin_for: Callable[[str], KafkaAdmin]) -> list[Importable]:
    """Those of ``found`` that exist: topics with one metadata read per cluster, each ACL resource
    and connector with its ``read`` (ACL resources and connectors follow the spec's size)."""
    topics: dict[str, list[str]] = {}
    for item in found:
        if item.type == TOPIC:
            topics.setdefault(item.inputs["cluster"], []).append(item.inputs["name"])
    live_topics = {(alias, name) for alias, names in topics.items()
                   for name in admin_for(alias).topics(names, with_configs=False)}
    return [item for item in found
            if ((item.inputs["cluster"], item.inputs["name"]) in live_topics if item.type == TOPIC
                else TOKENS[item.type].read_live(item.inputs) is not None)]


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


def main(argv: list[str] | None = None) -> None:
    """``python -m mm2spec.provision.plugin_package --schema FILE``: the schema, without a stack,
    a spec or the Pulumi CLI (``pulumi package get-schema pulumi-resource-mm2spec`` gives the same)."""
    parser = argparse.ArgumentParser(prog="python -m mm2spec.provision.plugin_package",
                                     description="Write the mm2spec Pulumi package schema.")
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
