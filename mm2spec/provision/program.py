"""The Pulumi program: which resources a DR spec means, given the live source clusters.

``component.main`` is what ``pulumi/__main__.py`` runs: one ``DisasterRecovery`` component
from the stack config (``mm2spec:spec``, the spec file relative to the project root;
``mm2spec:environment``; optional ``mm2spec:outDir``, ``mm2spec:sparkRun`` and ``mm2spec:plugin``: the
resources served by the ``pulumi-resource-mm2spec`` plugin, ``plugin_package``), and the stack
outputs. The component loads and validates the spec (an invalid spec stops the run with mm2spec's
``FILE:LINE:COL`` diagnostics, before any resource is registered), looks each cluster's password up
by the secret name the spec gives (Pulumi secret config first, then the environment variable of
that name), reads the source clusters once, and declares the resources with ``declare``.

``declare`` is the pure part (no network; unit-tested with ``pulumi.runtime.set_mocks``):

- a ``Topic`` for every internal topic (replication factor -1, compacted) and for every source topic
  a mirror's patterns select today (the source's partition count and, with ``syncTopicConfigs``,
  its configs), from ``mm2spec.plan.desired.desired_resources``, the list ``mm2spec plan`` uses too;
- with ``acls.manage``, an ``Acl`` per statement of the spec on each cluster (a stated binding, or
  every name one regex matches on the source today; see ``acl``);
- what the engine says it needs (``mm2spec.engines``, ``DeploymentResources``): resources of the
  kinds ``kinds.KINDS`` registers, each built by its kind (for ``connect`` the ``WorkerConfig``
  file and a ``Connector`` per MM2 connector; for ``spark`` the ``SparkDeployment``: its job
  config, and the running job with ``sparkRun``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Mapping

import pulumi

from mm2spec.engines import DeploymentResources, engine_for
from mm2spec.plan.desired import DesiredResources, SourceSnapshot, desired_resources
from mm2spec.live.dr_state import read_flow_states
from mm2spec.plan.build import failed_over_notes
from mm2spec.spec.model import DesiredState
from mm2spec.provision.acl import AclGroup, acl_groups, acl_inputs
from mm2spec.provision.base import ProgramSettings, ResourceKind
from mm2spec.provision.connection import SecretLookup, connection_inputs, resolve_passwords, used_clusters
from mm2spec.provision.kinds import ACL, KINDS, TOPIC
from mm2spec.provision.topic import topic_inputs

__all__ = ["Declared", "ProgramSettings", "SecretLookup", "declare", "resolve_passwords", "used_clusters"]


@dataclass
class Declared:
    """What ``declare`` registers, by Pulumi name. The resource dicts fill as the waves are
    registered (complete once the program has run); ``resources``, ``acl_groups`` and
    ``deployment`` are complete when ``declare`` returns."""

    resources: DesiredResources
    """What the spec means given the source clusters (``mm2spec.plan.desired.desired_resources``)."""
    acl_groups: list[AclGroup] = field(default_factory=list)
    """The ACL resources to register, one per spec statement (``acl.acl_groups``)."""
    deployment: DeploymentResources = field(default_factory=DeploymentResources)
    """What the engine's deployment registers (``Engine.deployment_resources``)."""
    topics: dict[str, pulumi.Resource] = field(default_factory=dict)
    """The registered topics, by Pulumi name (``<cluster>/<topic>``)."""
    acls: dict[str, pulumi.Resource] = field(default_factory=dict)
    """The registered ACL resources, by Pulumi name (``AclGroup.name``)."""
    by_kind: dict[str, dict[str, pulumi.Resource]] = field(default_factory=dict)
    """The engine's registered resources: per kind name, by Pulumi name."""

    def of_kind(self, kind: str) -> dict[str, pulumi.Resource]:
        """The registered resources of the engine's deployment of kind ``kind`` (e.g. ``Connector``)."""
        return self.by_kind.get(kind, {})


def earlier_urns(parent_urn: str | None, kind: type, name: str) -> list[str]:
    """Where a stack may hold a resource of ``kind`` named ``name`` under another type or parent,
    as alias URNs: a plugin resource (``plugin_package.PluginResource``) under its dynamic twin's
    type, under the same parent and at the stack's root (a stack made without the component); a
    dynamic resource at the root.

    Plain URN strings rather than ``pulumi.Alias`` objects: the SDK turns each ``Alias`` into
    several Outputs per resource, a large share of the program's CPU with thousands of resources,
    where a URN string costs little (pulumi/README.md, "Scale"). ``parent_urn`` is the parent's URN
    (None: the resources are at the stack's root)."""
    twin = getattr(kind, "dynamic_type", None)
    dynamic = twin() if twin is not None else None
    if parent_urn is None:
        root = f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}"
        return [f"{root}::{dynamic}::{name}"] if dynamic else []
    stack, project, parent_type, _parent_name = parent_urn.split("::", 3)
    root = f"{stack}::{project}"
    if dynamic:
        return [f"{root}::{parent_type}${dynamic}::{name}", f"{root}::{dynamic}::{name}"]
    return [f"{root}::{kind.pulumi_type}::{name}"]


def declare(state: DesiredState, sources: Mapping[str, SourceSnapshot], passwords: Mapping[str, str | None],
            settings: ProgramSettings, opts: pulumi.ResourceOptions | None = None,
            then: Callable[[Declared], None] | None = None) -> Declared:
    """Register the stack's resources for ``state`` given the source clusters' snapshot; ``opts``
    (the component as parent, ``component.child_options``) go to every resource, with the aliases
    ``earlier_urns`` gives, and ``then`` is called with what was registered once the last resource
    is. Under a parent, registering starts once the parent's URN is known (the aliases name it)."""
    needs = engine_for(state).deployment_resources()  # a spec that cannot be provisioned stops here
    wanted = desired_resources(state, sources)
    declared = Declared(wanted, deployment=needs)
    connections = {
        alias: connection_inputs(state.cluster(alias),
                                 pulumi.Output.secret(passwords[alias]) if passwords.get(alias) is not None else None)
        for alias in used_clusters(state)
    }
    classes = {name: resource_class(kind, settings.plugin) for name, kind in KINDS.items()}
    declared.acl_groups = acl_groups(state, sources)
    # Rendered now, not when their turn comes: an error here stops ``declare`` before anything is registered.
    deployment_inputs = {r.name: KINDS[r.kind].deployment_inputs(state, r, settings) for r in needs.resources}

    def register(parent_urn: str | None) -> None:
        def options(kind: type, name: str, extra: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
            base = opts if extra is None else pulumi.ResourceOptions.merge(opts, extra)
            aliases = earlier_urns(parent_urn, kind, name) or None
            return pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(aliases=aliases))

        def maker(into: dict, kind: Callable[..., pulumi.Resource], name: str,
                  inputs: Callable[[], dict]) -> Callable[[], pulumi.Resource]:
            """Registers ``kind(name, inputs())`` into ``into`` when its wave comes."""
            def make() -> pulumi.Resource:
                into[name] = kind(name, inputs(), options(kind, name))
                return into[name]
            return make

        acls = [maker(declared.acls, classes[ACL], g.name, partial(acl_inputs, g, connections[g.cluster]))
                for g in declared.acl_groups]
        topics = [maker(declared.topics, classes[TOPIC], t.key, partial(topic_inputs, t, connections[t.cluster]))
                  for t in wanted.topics]
        # A preview registers the ACL resources first: one of a regex statement holds every name it
        # matches, costing the SDK, the engine and the plugin the most CPU of any resource, a tail
        # nothing overlaps when it comes last. An update registers them last: their writes hold the
        # KRaft controller, which the topic creates would then wait behind (pulumi/README.md, Scale).
        makers = acls + topics if pulumi.runtime.is_dry_run() else topics + acls

        def dependents() -> None:
            ready = list(declared.topics.values()) + list(declared.acls.values())
            registered: dict[str, pulumi.Resource] = {}
            for resource in needs.resources:
                kind = classes[resource.kind]
                waits = (ready if resource.after_cluster_resources else []) + [registered[n] for n in resource.after]
                extra = pulumi.ResourceOptions(depends_on=waits) if waits else None
                registered[resource.name] = kind(resource.name, deployment_inputs[resource.name],
                                                 options(kind, resource.name, extra))
                declared.by_kind.setdefault(resource.kind, {})[resource.name] = registered[resource.name]
            if then is not None:
                then(declared)

        in_waves(makers, dependents)

    parent = opts.parent if opts is not None else None
    if parent is None:
        register(None)
    else:
        parent.urn.apply(register)
    return declared


def resource_class(kind: ResourceKind, plugin: bool) -> Callable[..., pulumi.Resource]:
    """The class resources of ``kind`` are registered with: served by the plugin, or dynamic."""
    if plugin:  # imported here: the dynamic resources need none of the plugin's package
        from mm2spec.provision.plugin_package import plugin_class

        return plugin_class(kind)
    return kind.resource


#: Resources registered per wave, and waves in flight at once (see ``in_waves``): the program's CPU
#: grows with the wave's size, and between 20 and 50 (one or two in flight) the preview's time no
#: longer depends on it (``benchmarks/pulumi_scale.py``; pulumi/README.md, "Scale").
WAVE = 25
IN_FLIGHT = 2


def in_waves(makers: list[Callable[[], pulumi.Resource]], then: Callable[[], None], size: int = WAVE,
             in_flight: int = IN_FLIGHT) -> None:
    """Register resources in waves of ``size``, at most ``in_flight`` waves unfinished at once: a
    wave starts when the last resource of the wave ``in_flight`` before it is registered (the
    engine has checked, diffed and, in an update, created it). ``then`` runs once the last wave is
    declared.

    Why: the Pulumi SDK waits for a program's outstanding Outputs with ``asyncio.wait`` over all of
    them, again each time one completes, so its CPU grows with the square of the resources in
    flight (every resource declared in one go: minutes at 10,000). Small waves keep that set small,
    and more than one in flight keeps the engine busy while the program prepares the next.
    """
    waves = [makers[i:i + size] for i in range(0, len(makers), size)]
    started = [0]

    def start(_urn: object = None) -> None:
        if started[0] >= len(waves):
            return
        wave = [make() for make in waves[started[0]]]
        started[0] += 1
        if started[0] == len(waves):
            then()
        else:
            # A resource's URN resolves (in preview too) when the engine has registered it.
            wave[-1].urn.apply(start)

    if not waves:
        then()
    for _ in range(in_flight):
        start()


def export(state: DesiredState, declared: Declared) -> None:
    """Stack outputs a reviewer can read (no secrets: names and counts); each kind that lists its
    names on the component (``ResourceKind.many``) lists them here too (``connectors``)."""
    pulumi.export("spec", state.name)
    pulumi.export("environment", state.environment)
    pulumi.export("engine", state.engine)
    pulumi.export("topics", sorted(t.key for t in declared.resources.topics))
    pulumi.export("aclResources", len(declared.acl_groups))
    for kind in KINDS.values():
        if kind.output and kind.many:
            pulumi.export(kind.output, sorted(declared.deployment.names(kind.name)))
    pulumi.export("patternResolutions", [
        {"flow": r.flow, "field": r.field, "pattern": r.pattern, "matched": list(r.matched)}
        for r in declared.resources.resolutions])


def project_root() -> str:
    """The folder of ``Pulumi.yaml`` (from Pulumi's settings, else found upward from the cwd)."""
    try:
        root = pulumi.get_root_directory()  # None under pulumi.runtime.set_mocks
    except AttributeError:  # an SDK older than the pinned one, without get_root_directory
        root = None
    if root:
        return root
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return str(folder)
    return str(here)


def config_secret_lookup(config: pulumi.Config) -> SecretLookup:
    """Pulumi config of the stack (``pulumi config set --secret NAME``) first, then env var NAME."""

    def lookup(name: str) -> str | None:
        value = config.get(name)
        if value is not None:
            if not pulumi.runtime.is_config_secret(config.full_key(name)):
                pulumi.log.warn(f"the config value {config.full_key(name)} is not encrypted: set it again with "
                                f"`pulumi config set --secret {name} ...`")
            return value
        return os.environ.get(name)

    return lookup


def skip_source_positions() -> None:
    """Do not record each resource's Python stack in the state.

    The SDK walks the stack and turns every frame into a file URI for each resource (a fifth of the
    program's time with thousands of resources, and a kilobyte of state per resource); the positions
    only serve Pulumi Cloud's source links. Guarded: a later SDK without the hook is left as it is.
    """
    from pulumi.runtime import resource as registration

    stack_trace = getattr(registration, "_get_stack_trace", None)
    proto = getattr(getattr(registration, "source_pb2", None), "StackTrace", None)
    if callable(stack_trace) and proto is not None:
        registration._get_stack_trace = proto


#: Set to anything to keep the Pulumi SDK's own debug messages (``pulumi up --debug`` shows them).
SDK_DEBUG_ENV = "MM2SPEC_PULUMI_SDK_DEBUG"


def skip_sdk_debug_messages() -> None:
    """Do not send the Pulumi SDK's debug messages to the engine, unless ``SDK_DEBUG_ENV`` is set.

    The SDK sends four for each resource ("registering resource: ...", ...), each a blocking call
    to the engine, which shows them only with ``--debug``: a quarter of the program's CPU at 1,000
    resources, and work for the engine too. Only ``pulumi.log.debug`` is silenced (mm2spec logs
    nothing at debug); info, warnings and errors go as before."""
    if os.environ.get(SDK_DEBUG_ENV):
        return
    from pulumi import log

    if callable(getattr(log, "debug", None)):
        log.debug = lambda *_args, **_kwargs: None


#: The program's exit status when the engine cancels it (SIGINT): it is not read, the engine has its error.
CANCELLED_EXIT = 130


def exit_quietly_when_cancelled() -> None:
    """End the program at once, printing nothing, on SIGINT.

    The language host sends SIGINT when the engine cancels the run: after a resource failed, or
    on ^C. Python's default would raise KeyboardInterrupt wherever the program happened to be (in
    the SDK's executor, waiting for a registration) and the engine would show that traceback under
    the resource's own error, where it says nothing useful. Nothing the program holds needs
    cleaning up: the resources' work runs in the engine and the providers. Called by the program's
    entry point (``pulumi/__main__.py``), from the main thread."""
    import signal

    signal.signal(signal.SIGINT, lambda _signum, _frame: os._exit(CANCELLED_EXIT))


def failed_over(state: DesiredState, passwords: Mapping[str, str | None]) -> bool:
    """Whether a flow is recorded as failed over on its DR cluster; then the Spark mirror is left
    stopped (a forward mirror would copy over what clients now write to DR) and the run says so."""
    states = read_flow_states(state, cluster_secrets=lambda alias: lambda _name: passwords.get(alias))
    notes = failed_over_notes(states)
    if notes:
        pulumi.log.warn(notes[0])  # one warning says why the job stays stopped; `mm2spec plan` lists every flow
    return bool(notes)
