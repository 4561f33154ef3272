"""``DisasterRecovery``: a DR spec's resources as one Pulumi component, for any Pulumi program.

A team that keeps its Kafka infrastructure in its own Pulumi program adds its DR setup beside it::

    from mm2spec.pulumi import DisasterRecovery

    dr = DisasterRecovery("payments", spec="payments.dr.yaml", environment="prod")
    pulumi.export("drTopics", dr.target_topics)

The component (type ``mm2spec:index:DisasterRecovery``) loads and validates the spec the way
``mm2spec validate`` does (``spec.load``): an invalid spec, a missing password or an engine that
cannot be provisioned fails the program with mm2spec's message (``FILE:LINE:COL`` diagnostics)
before anything is registered, the component included. Then it reads the source clusters once and
registers the resources ``program.declare`` lists as its children.

Children keep the names they had at the stack's root (``dr/orders``, ``spark-mirror``; the names
``mm2spec plan`` shows) and carry an alias to the root (``program.earlier_urns``), so a stack the program
created before the component existed moves under it without a replace, create or delete: only
the component itself is new. Hence two components in one stack must manage different resources
(Pulumi refuses a duplicate name).

Outputs others can depend on resolve once every child of the kind is created (unknown in a
preview, where nothing is): ``target_topics`` (on the flows' targets) and ``acl_bindings`` (the
resources' IDs), and one per engine resource kind that names an ``output`` (``kinds.KINDS``):
``connectors`` (names), ``worker_config`` and ``spark_deployment`` (the rendered file's path, or
None for the other engine).

``main`` is the bundled program (``pulumi/__main__.py``): one component from the stack config, and
the stack outputs.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping

import pulumi

from mm2spec.engines import engine_for
from mm2spec.errors import Mm2specError
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.plan.desired import SourceSnapshot, snapshot_sources
from mm2spec.provision.base import fewer_collections
from mm2spec.provision.kinds import KINDS
from mm2spec.provision.program import (Declared, ProgramSettings, SecretLookup, skip_sdk_debug_messages,
                                       skip_source_positions, config_secret_lookup, declare, export, failed_over,
                                       project_root, resolve_passwords)
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import DesiredState

TYPE = "mm2spec:index:DisasterRecovery"
"""The component's type token."""

Snapshot = Callable[[DesiredState, Callable[[str], KafkaAdmin]], Mapping[str, SourceSnapshot]]


def child_options(component: pulumi.Resource) -> pulumi.ResourceOptions:
    """Every child's options: parented to the component (``program.declare`` adds the aliases to
    where a stack may hold it otherwise: the stack's root, the dynamic providers' types)."""
    return pulumi.ResourceOptions(parent=component)


class DisasterRecovery(pulumi.ComponentResource):
    """The resources of one DR spec in one environment (topics, ACLs, the mirror's deployment)."""

    target_topics: pulumi.Output[list]
    """The topics on the flows' target clusters (the mirrored copies, MM2's internal topics there), as
    ``<cluster>/<topic>``; a topic the stack manages on a source cluster is not one of them."""
    acl_bindings: pulumi.Output[list]
    """The ACL resources' IDs (``<cluster>/<principal>/<type>/<pattern>/<name>``); empty without ``acls.manage``."""
    # And one Output per resource kind with an ``output`` (``base.ResourceKind``): ``connectors`` (the
    # MM2 connectors' names, once each runs with all its tasks), ``worker_config`` (the Connect
    # worker's properties file) and ``spark_deployment`` (the Spark job's config file); an engine's
    # kinds it does not use resolve to an empty list or None.
    state: DesiredState
    """The validated spec, compiled for ``environment``."""
    declared: Declared
    """The child resources, by name (complete once the program has run; see ``program.Declared``)."""

    def __init__(self, name: str, spec: str, environment: str | None = None, *, out_dir: str | None = None,
                 spark_run: bool = False, secrets: SecretLookup | Mapping[str, str] | None = None,
                 snapshot: Snapshot | None = None, opts: pulumi.ResourceOptions | None = None, plugin: bool = True):
        """``spec``: the DR spec file, relative to the Pulumi project's folder or absolute;
        ``environment``: its overlay; ``out_dir``: where rendered files go (default
        ``.mm2spec/out/<stack>``); ``spark_run``: engine spark, also run the job (left stopped while a
        flow is failed over); ``secrets``: the cluster passwords by secret name, a mapping or a
        function (default: the stack's config, ``pulumi config set --secret NAME``, then the
        environment variable NAME); ``snapshot`` replaces reading the source clusters (tests); ``plugin``
        (default): the children are ``mm2spec:index:*`` resources of the ``pulumi-resource-mm2spec``
        plugin (which ``pulumi import`` can fill); ``False``: dynamic ones (the opt-out)."""
        try:
            root = project_root()
            path = spec if os.path.isabs(spec) else os.path.relpath(os.path.join(root, spec))
            state = load_desired_state(path, environment)
            lookup = secrets.get if isinstance(secrets, Mapping) else secrets
            passwords = resolve_passwords(state, lookup or config_secret_lookup(pulumi.Config()))
            engine_for(state).deployment_resources()  # a spec that cannot be provisioned stops here

            def admin_for(alias: str) -> KafkaAdmin:
                return KafkaAdmin(state.cluster(alias), secrets=lambda _name: passwords.get(alias))

            sources = (snapshot or snapshot_sources)(state, admin_for)
            if spark_run and snapshot is None:
                spark_run = not failed_over(state, passwords)
            settings = ProgramSettings(root, out_dir or f".mm2spec/out/{pulumi.get_stack()}", bool(spark_run),
                                       plugin=plugin)
        except Mm2specError as exc:
            # Shown as the run's error, without a Python traceback; nothing has been registered.
            raise pulumi.RunError(str(exc)) from None
        super().__init__(TYPE, name, None, opts)
        self.state = state
        kinds = [kind for kind in KINDS.values() if kind.output]
        outputs = {key: pulumi.deferred_output() for key in
                   ("target_topics", "acl_bindings", *(kind.output for kind in kinds))}
        for key, (output, _resolve) in outputs.items():
            setattr(self, key, output)

        def resolve(found: Declared) -> None:
            """After the last wave (``program.in_waves``): every output waits for its resources."""
            targets = {flow.target for flow in state.mirrors}  # an alias holds no "/": the key's first part
            ids = {"target_topics": [t.id for key, t in found.topics.items() if key.split("/")[0] in targets],
                   "acl_bindings": [a.id for a in found.acls.values()]}
            for key, resource_ids in ids.items():
                outputs[key][1](pulumi.Output.all(*resource_ids).apply(sorted))
            for kind in kinds:
                registered = found.of_kind(kind.name)
                if kind.many:
                    names = sorted(registered)
                    outputs[kind.output][1](pulumi.Output.all(*(registered[n].id for n in names)).apply(
                        lambda _ids, names=names: names))
                else:
                    single = next(iter(registered.values()), None)
                    outputs[kind.output][1](single.id if single is not None else pulumi.Output.from_input(None))

        try:
            self.declared = declare(state, sources, passwords, settings, child_options(self), then=resolve)
        except Mm2specError as exc:
            raise pulumi.RunError(str(exc)) from None
        self.register_outputs({key: output for key, (output, _resolve) in outputs.items()})


def main(snapshot: Snapshot | None = None) -> Declared:
    """Run the program for the current stack: one ``DisasterRecovery`` component from the stack config,
    and the stack outputs. ``snapshot`` replaces reading the source clusters (tests)."""
    skip_source_positions()
    skip_sdk_debug_messages()
    fewer_collections()
    config = pulumi.Config()
    dr = DisasterRecovery(pulumi.get_project(), config.require("spec"), config.get("environment"),
                          out_dir=config.get("outDir"), spark_run=bool(config.get_bool("sparkRun")), snapshot=snapshot,
                          plugin=bool(config.get_bool("plugin", True)))
    export(dr.state, dr.declared)
    return dr.declared
