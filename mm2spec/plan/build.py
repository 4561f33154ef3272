"""``mm2spec plan``: desired state against the live clusters, as data.

The planner reads each cluster a bounded number of times (its version: one ApiVersions request, and
the Connect worker's ``GET /``; a source: one metadata listing and one
batched DescribeConfigs of the topics it mirrors; a target: the Metadata and, at the
same time, DescribeConfigs of the topics it should hold (both over Kafka's protocol, the configs
without synonyms and over a few connections: ``mm2spec.live.wire``);
one DescribeAcls per principal; the DR state; one Connect request for
every connector), all clusters at once, compares with
the shared diff (``mm2spec.plan.diff``) and returns a ``Plan``. It never prints: ``mm2spec.plan.formats``
renders a plan as text, markdown or JSON. Where the time goes at 10,000 topics, and the figures:
benchmarks/README.md, plan_1000_topics.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Callable, Mapping

from mm2spec.errors import VersionUnsupported
from mm2spec.live.dr_state import read_flow_states
from mm2spec.live.kafka import BrokerVersion, KafkaAdmin
from mm2spec.mm2 import versions
from mm2spec.mm2.engine_facts import engine_facts
from mm2spec.mm2.versions import VersionFinding, spec_needs
from mm2spec.live.types import FailoverState
from mm2spec.plan.desired import (TopicSpec, desired_acls, desired_resources, list_sources, mirrored_by_flow,
                                  topics_needing_configs, with_configs)
from mm2spec.plan.diff import diff_acls, diff_topic
from mm2spec.plan.model import ClusterInfo, FlowSummary, Plan, ResourceChange
from mm2spec.spec.model import AclBinding, DesiredState

AdminFactory = Callable[[str], KafkaAdmin]
DeploymentChanges = Callable[[bool], "tuple[list[ResourceChange], list[str]]"]
"""The engine's part of a plan (``mm2spec.engines``, ``Engine.plan_changes``): given whether a flow
is failed over (its mirror stopped on purpose), the changes to the engine's deployment and notes."""


def failed_over_notes(states: Mapping[str, FailoverState]) -> list[str]:
    """One note per flow recorded as failed over (or switching) on its DR cluster."""
    notes = []
    for name, s in sorted(states.items()):
        when = datetime.fromtimestamp(s.started_at / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        then = ("a failback is in progress: run mm2spec failback again to finish it" if s.phase == "failing-back"
                else "run mm2spec failback to mirror again")
        notes.append(f"flow {name} failed over to {s.target} at {when} ({s.mode}, {s.phase}): its mirror stays "
                     f"stopped; {then}")
    return notes


def version_findings(state: DesiredState, brokers: Mapping[str, BrokerVersion], worker: str | None,
                     worker_url: str | None = None) -> tuple[list[VersionFinding], list[str]]:
    """The version rules (``mm2spec.mm2.versions``) the clusters' and the Connect worker's versions
    do not meet for what ``state`` uses, and a note for each version that could not be read."""
    needs = spec_needs(on_connect_workers=engine_facts(state.engine).runs_on_connect_workers,
                       exactly_once=any(f.exactly_once for f in state.mirrors),
                       groups=any(f.groups for f in state.mirrors))
    findings: list[VersionFinding] = []
    notes: list[str] = []
    for alias, version in brokers.items():
        findings += versions.check("kafka", f'Kafka cluster "{alias}"', version.release, needs, alias)
        if version.release is None:
            notes.append(f'cluster "{alias}": version {version.shown}: its version rules are not checked')
    if worker is not None:
        where = f"Kafka Connect at {worker_url}" if worker_url else "Kafka Connect"
        release = versions.parse_version(worker)
        findings += versions.check("connect", where, release, needs, "connect")
        if release is None:
            notes.append(f"{where}: version {worker!r} not understood: its version rules are not checked")
    return findings, notes


def refuse_versions(findings: list[VersionFinding]) -> None:
    """Raise VersionUnsupported naming every refusing finding (plan and verify share the words)."""
    refused = [f.message() for f in findings if f.refuses]
    if refused:
        raise VersionUnsupported("; ".join(refused))


def build_plan(state: DesiredState, admin_for: AdminFactory, deployment: DeploymentChanges | None = None,
               failover_states: Callable[[DesiredState], Mapping[str, FailoverState]] | None = None,
               worker_version: Callable[[], "str | None"] | None = None) -> Plan:
    """Compare ``state`` with the live clusters (and the engine's deployment, when ``deployment``
    compares it: the Connect connectors, or the Spark job).

    ``failover_states`` (default: read from each DR cluster) names failed-over flows: their mirror
    is meant to stay stopped, so a stopped Spark job is no change, and the plan says so.
    ``worker_version`` (the engine's ``worker_version``) reads the Connect worker's version. A
    version older than the spec needs is refused (VersionUnsupported) or noted (``versions``)."""
    aliases = list(dict.fromkeys([m.source for m in state.mirrors] + [m.target for m in state.mirrors]
                                 + [state.connect.cluster]))
    admins = {alias: admin_for(alias) for alias in aliases}

    def cluster_info(alias: str) -> ClusterInfo:
        admins[alias].ping()  # an unreachable cluster is an error that names it, never an empty plan
        authorizer = admins[alias].authorizer_enabled() if state.manage_acls else None
        return ClusterInfo(alias, state.cluster(alias).bootstrap, admins[alias].default_replication_factor(), authorizer,
                           brokers[alias].shown)

    # The versions first: a plan the clusters cannot carry out is refused before anything else is read.
    brokers = dict(zip(aliases, _each(lambda alias: admins[alias].broker_version(), aliases)))
    worker = worker_version() if worker_version is not None else None
    findings, version_notes = version_findings(state, brokers, worker, state.connect.rest_url)
    refuse_versions(findings)

    # Clusters are independent: read them concurrently (the clients wait on the network, not the GIL).
    infos = _each(cluster_info, aliases)
    by_alias = {i.alias: i for i in infos}
    # The source listings name every resource; only the target topics' configs wait for the sources'
    # configs. So the reads that take time (DescribeConfigs of thousands of topics on each side, the
    # ACLs) all run at once instead of source then target; the ACLs and the DR state are read during
    # the listings, and the desired ACLs are worked out and compared while the topics are read.
    with ThreadPoolExecutor(max_workers=3 * len(aliases) + 1) as pool:
        failover = pool.submit(failover_states or read_flow_states, state)
        live_acls = {alias: pool.submit(admins[alias].acls, state.principal_on(alias))
                     for alias in aliases if state.manage_acls and by_alias[alias].authorizer}
        listed = list_sources(state, lambda alias: admins[alias])
        selected = mirrored_by_flow(state, listed)
        needed = topics_needing_configs(state, listed, selected)
        source_configs = {alias: pool.submit(admins[alias].topic_configs, names) for alias, names in needed.items()}
        # The topics' names only: the target reads start before the ACLs are worked out.
        draft = desired_resources(state, listed, selected, acls=())
        live = {alias: pool.submit(_live_topics, admins[alias], [t.name for t in draft.topics if t.cluster == alias])
                for alias in aliases}
        # The same names, so the same selection and ACLs whatever the topics' configs are.
        acls = tuple(desired_acls(state, listed, selected))
        acl_notes: dict[str, list[str]] = {alias: [] for alias in aliases}
        acl_changes: dict[str, list[ResourceChange]] = {alias: [] for alias in aliases}
        if state.manage_acls:
            for alias in aliases:
                found = live_acls[alias].result() if alias in live_acls else None
                acl_changes[alias] = _acl_changes(alias, acls, found, acl_notes[alias])
        sources = {alias: with_configs(listed[alias], future.result()) for alias, future in source_configs.items()}
        resources = desired_resources(state, {**listed, **sources}, selected, acls)
        changes: list[ResourceChange] = []
        for alias in aliases:
            changes += _topic_changes(alias, [t for t in resources.topics if t.cluster == alias],
                                      live[alias].result(), by_alias[alias])
            changes += acl_changes[alias]
        failed_over = failover.result()
    notes: list[str] = [f.message() for f in findings] + version_notes
    notes += [note for alias in aliases for note in acl_notes[alias]]
    notes += failed_over_notes(failed_over)
    if deployment is not None:
        engine_changes, engine_notes = deployment(bool(failed_over))
        changes += engine_changes
        notes += engine_notes
    flows = tuple(FlowSummary(f.name, f.source, f.target, f.replication_policy, f.exactly_once,
                              tuple(p.text for p in f.topics), tuple(p.text for p in f.groups)) for f in state.mirrors)
    return Plan(state.name, state.environment, state.source_file, state.engine, tuple(infos), flows,
                tuple(changes), resources.resolutions, tuple(notes), worker)


def _rf_detail(spec: TopicSpec, info) -> str:
    if spec.replication_factor != -1:
        return f"replication factor {spec.replication_factor}"
    default = info.default_replication_factor if info else None
    return f"replication factor -1 (broker default: {default if default is not None else 'unknown'})"


def _each(fn, items: list) -> list:
    """``fn`` over ``items`` in threads, results in order; the first exception propagates."""
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        return list(pool.map(fn, items))


def _live_topics(admin: KafkaAdmin, names: list[str]):
    """The named topics as they are (one DescribeTopics and one DescribeConfigs, both batched)."""
    return admin.topics(names=names) if names else {}


def _topic_changes(alias: str, specs: list[TopicSpec], live: Mapping, info: ClusterInfo) -> list[ResourceChange]:
    changes = []
    for spec in specs:
        change = diff_topic(spec.name, spec.partitions, dict(spec.configs), live.get(spec.name),
                            spec.replication_factor, spec.allow_replacement)
        plural = "s" if spec.partitions != 1 else ""
        detail = f"{spec.partitions} partition{plural}, {_rf_detail(spec, info)}; {spec.purpose}"
        changes.append(ResourceChange(alias, "topic", spec.name, change.action, change.changes, change.reason, detail))
    return changes


def acl_label(b: AclBinding) -> str:
    return f"{b.permission} {b.principal} {b.operation} {b.resource_type} {b.pattern_type} {b.resource_name}"


def _acl_changes(alias: str, acls: tuple[AclBinding, ...], live: "set[AclBinding] | None",
                 notes: list[str]) -> list[ResourceChange]:
    """The ACL changes on ``alias`` given the desired bindings (of every cluster) and the principal's
    live bindings (None: the cluster has no authorizer, so nothing is compared and a note says so)."""
    desired = [b for b in acls if b.cluster == alias]
    if live is None:
        if desired:
            notes.append(f'cluster "{alias}" has no authorizer: its {len(desired)} ACL bindings are not compared')
        return []
    create, delete = diff_acls(desired, live)  # one DescribeAcls
    return ([ResourceChange(alias, "acl", acl_label(b), "create", detail=b.reason) for b in create] +
            [ResourceChange(alias, "acl", acl_label(b), "delete", detail="bound to the principal but not needed by the spec")
             for b in delete])
