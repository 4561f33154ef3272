"""The concrete resources a DR spec asks for, given what the live source clusters hold.

Compile knows patterns; this module turns them into resources by looking at the source cluster:
which topics each flow mirrors (``MirrorFlow.mirrored_topics``: patterns minus excludes, as MM2
selects them), the target topics they need (the source's partition count and, with
``syncTopicConfigs``, its configs), and the ACL bindings once regular expressions are resolved to
the names they match today. Both ``mm2spec plan`` and the Pulumi program build their resource lists
here, from the same snapshot types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

from mm2spec.live.types import LiveTopic
from mm2spec.mm2.policy import PROBE_TOPIC_PARTITIONS
from mm2spec.mm2.selection import config_synced
from mm2spec.spec.model import AclBinding, DesiredState, MirrorFlow
from mm2spec.spec.patterns import python_regex


@dataclass(frozen=True)
class SourceSnapshot:
    """What a source cluster holds right now: its topics (with set configs) and consumer groups."""

    cluster: str
    """The source cluster's alias in the spec."""
    topics: Mapping[str, LiveTopic]
    """Its topics by name, each with its partition count and the configs set on the topic itself."""
    groups: tuple[str, ...] = ()
    """Its consumer group IDs; empty when no flow from this cluster mirrors groups (not read)."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic the DR setup manages on a cluster. ``replication_factor`` -1 is the broker default."""

    cluster: str
    """The alias of the cluster the topic belongs on."""
    name: str
    """The topic's name there (for a mirror: the replication policy's name for the source topic)."""
    partitions: int
    """The partition count wanted (for a mirror: the source topic's)."""
    configs: tuple[tuple[str, str], ...]
    """Topic-level configs, sorted by name (for a mirror: the source's, minus those MM2 never syncs)."""
    purpose: str
    """Why the topic exists, for a reader of the plan (``<flow>: mirror of <source>/<topic>``, ...)."""
    kind: Literal["internal", "mirror"]
    """``internal``: a topic MM2 or Connect needs; ``mirror``: the target of a mirrored topic."""
    replication_factor: int = -1
    """The replication factor; -1 lets the brokers' ``default.replication.factor`` decide."""
    allow_replacement: bool = False
    """Whether a partition decrease may delete and recreate the topic (the flow's ``allowTopicReplacement``)."""
    source_topic: str | None = None
    """For a mirror: the topic it mirrors on the flow's source cluster; None for internal topics."""

    @property
    def key(self) -> str:
        """``<cluster>/<name>``: one topic, whichever flow or purpose asks for it."""
        return f"{self.cluster}/{self.name}"


@dataclass(frozen=True)
class PatternResolution:
    """What one spec pattern matched on the live source cluster (shown in plans)."""

    flow: str
    """The name of the flow the pattern belongs to."""
    field: str
    """Which list it comes from: ``topics`` or ``groups``."""
    pattern: str
    """The pattern as the spec writes it."""
    matched: tuple[str, ...]
    """The names it selects today, sorted; only names the flow really mirrors (excludes and what the
    replication policy never replicates are taken out)."""


@dataclass(frozen=True)
class DesiredResources:
    """Everything to create or keep: topics, ACL bindings, and how patterns resolved."""

    topics: tuple[TopicSpec, ...]
    """Internal topics first, then the mirrors' target topics; one per ``TopicSpec.key``."""
    acls: tuple[AclBinding, ...]
    """The ACL bindings wanted, regexes resolved to literal names (empty when ACLs are not managed)."""
    resolutions: tuple[PatternResolution, ...] = field(default=())
    """What each flow's ``topics`` and then ``groups`` patterns matched, flow by flow in spec order."""


def _resolve_patterns(flow: MirrorFlow, field: str, patterns, selected: list[str]) -> list[PatternResolution]:
    """What each pattern matched among the selected names (a literal matches at most itself)."""
    chosen = set(selected)
    out = []
    for pattern in patterns:
        if pattern.kind == "literal" and pattern.value != "*":
            matched = (pattern.value,) if pattern.value in chosen else ()
        else:
            matched = tuple(n for n in selected if pattern.matches(n))
        out.append(PatternResolution(flow.name, field, pattern.text, matched))
    return out


Selected = Mapping[str, "list[str]"]
"""Per flow name, the source topics the flow mirrors (``mirrored_by_flow``)."""


def mirrored_by_flow(state: DesiredState, sources: Mapping[str, SourceSnapshot]) -> dict[str, list[str]]:
    """Per flow name, the source topics it mirrors (``MirrorFlow.mirrored_topics``). Matching every
    pattern against 10,000 names takes a tenth of a second: a plan computes it once and passes it on."""
    return {flow.name: flow.mirrored_topics(sources[flow.source].topics) for flow in state.mirrors}


def desired_resources(state: DesiredState, sources: Mapping[str, SourceSnapshot], selected: Selected | None = None,
                      acls: tuple[AclBinding, ...] | None = None) -> DesiredResources:
    """Topics and ACLs for ``state`` given a snapshot of every flow's source cluster.

    ``selected`` (``mirrored_by_flow`` of the same topic names) and ``acls`` (``desired_acls``, which
    topic configs do not change) skip recomputing them."""
    selected = mirrored_by_flow(state, sources) if selected is None else selected
    topics: dict[str, TopicSpec] = {}
    for internal in state.internal_topics:
        spec = TopicSpec(internal.cluster, internal.name, internal.partitions, internal.configs,
                         internal.purpose, "internal", internal.replication_factor)
        topics.setdefault(spec.key, spec)
    resolutions: list[PatternResolution] = []
    for flow in state.mirrors:
        source = sources[flow.source]
        mirrored = selected[flow.name]
        resolutions += _resolve_patterns(flow, "topics", flow.topics, mirrored)
        for name in mirrored:
            live = source.topics[name]
            configs = ()
            if flow.sync_topic_configs:
                configs = tuple(sorted((k, v) for k, v in live.configs.items() if config_synced(k)))
            spec = TopicSpec(flow.target, flow.target_topic(name), live.partitions, configs,
                             f"{flow.name}: mirror of {flow.source}/{name}", "mirror",
                             allow_replacement=flow.allow_topic_replacement, source_topic=name)
            topics.setdefault(spec.key, spec)
        if flow.probe_topic not in source.topics:
            # Created with the internal topics in this same run: its copy is known before it exists,
            # so one apply leaves no change behind.
            spec = TopicSpec(flow.target, flow.target_topic(flow.probe_topic), PROBE_TOPIC_PARTITIONS, (),
                             f"{flow.name}: mirror of {flow.source}/{flow.probe_topic}", "mirror",
                             allow_replacement=flow.allow_topic_replacement, source_topic=flow.probe_topic)
            topics.setdefault(spec.key, spec)
        resolutions += _resolve_patterns(flow, "groups", flow.groups, flow.mirrored_groups(source.groups))
    if acls is None:
        acls = tuple(desired_acls(state, sources, selected))
    return DesiredResources(tuple(topics.values()), acls, tuple(resolutions))


def desired_acls(state: DesiredState, sources: Mapping[str, SourceSnapshot],
                 selected: Selected | None = None) -> list[AclBinding]:
    """The spec's ACL bindings plus its regex patterns resolved to today's names (if ACLs are managed)."""
    if not state.manage_acls:
        return []
    wanted: dict[tuple, AclBinding] = {b.key: b for b in state.acl_bindings}
    if not state.acl_patterns:
        return list(wanted.values())
    mirrored = mirrored_by_flow(state, sources) if selected is None else selected
    # A regex grants rights only on names some flow from that source really mirrors.
    by_source: dict[tuple[str, str], set[str]] = {}
    for flow in state.mirrors:
        source = sources[flow.source]
        by_source.setdefault((flow.source, "TOPIC"), set()).update(mirrored[flow.name])
        by_source.setdefault((flow.source, "GROUP"), set()).update(flow.mirrored_groups(source.groups))
    for pattern in state.acl_patterns:
        names = by_source.get((pattern.source_cluster, pattern.resource_type), set())
        regex = python_regex(pattern.regex)
        for name in sorted(names):
            if not regex.fullmatch(name):
                continue
            for operation in pattern.operations:
                binding = AclBinding(pattern.cluster, pattern.principal, pattern.resource_type,
                                     pattern.name_prefix + name, "LITERAL", operation,
                                     reason=f"{pattern.reason} (matches /{pattern.regex}/)")
                wanted.setdefault(binding.key, binding)
    return list(wanted.values())


def snapshot_sources(state: DesiredState, admin_for) -> dict[str, SourceSnapshot]:
    """Read every flow's source cluster once: its topics, the configs of those a flow mirrors with
    ``syncTopicConfigs`` (the only configs desired state uses), and its groups when a flow mirrors groups.

    ``admin_for(alias)`` returns a ``KafkaAdmin``; injected so tests and the Pulumi program choose
    how credentials are found.
    """
    return with_source_configs(state, list_sources(state, admin_for), admin_for)


def list_sources(state: DesiredState, admin_for) -> dict[str, SourceSnapshot]:
    """Every flow's source cluster without topic configs: one metadata request (and one ListGroups).

    Enough to name every resource (``desired_resources`` gives the right topic names and ACLs from
    it); ``with_source_configs`` adds the configs the target topics copy."""
    snapshots = {}
    for alias in dict.fromkeys(flow.source for flow in state.mirrors):
        admin = admin_for(alias)
        need_groups = any(f.groups for f in state.mirrors if f.source == alias)
        snapshots[alias] = SourceSnapshot(alias, admin.topics(with_configs=False),
                                          tuple(admin.groups()) if need_groups else ())
    return snapshots


def topics_needing_configs(state: DesiredState, sources: Mapping[str, SourceSnapshot],
                           selected: Selected | None = None) -> dict[str, list[str]]:
    """Per source alias, the topics whose configs desired state copies: those a flow mirrors with
    ``syncTopicConfigs``. A source with none is absent."""
    mirrored = mirrored_by_flow(state, sources) if selected is None else selected
    needed: dict[str, set[str]] = {}
    for flow in state.mirrors:
        if flow.sync_topic_configs:
            needed.setdefault(flow.source, set()).update(mirrored[flow.name])
    return {alias: sorted(names) for alias, names in needed.items() if names}


def with_source_configs(state: DesiredState, sources: Mapping[str, SourceSnapshot], admin_for,
                        names: Mapping[str, list[str]] | None = None) -> dict[str, SourceSnapshot]:
    """``sources`` with the configs of the topics desired state copies (``topics_needing_configs``,
    or ``names`` when given), read with one batched DescribeConfigs per source."""
    wanted = topics_needing_configs(state, sources) if names is None else names
    full = dict(sources)
    for alias, topics in wanted.items():
        full[alias] = with_configs(sources[alias], admin_for(alias).topic_configs(topics))
    return full


def with_configs(snapshot: SourceSnapshot, configs: Mapping[str, Mapping[str, str]]) -> SourceSnapshot:
    """``snapshot`` with ``configs`` (by topic name) set on its topics; topics not in ``configs`` keep theirs."""
    topics = {name: (LiveTopic(name, t.partitions, t.replication_factor, dict(configs[name])) if name in configs else t)
              for name, t in snapshot.topics.items()}
    return SourceSnapshot(snapshot.cluster, topics, snapshot.groups)
