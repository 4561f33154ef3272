"""Desired state: what a DR spec means for one environment, as frozen dataclasses.

Everything downstream (render, plan, Pulumi, playbooks, the Spark job config) reads these types,
never raw YAML. ``mm2spec.spec.compile`` builds them from a validated document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mm2spec.errors import UnknownCluster
from mm2spec.mm2 import policy, selection
from mm2spec.spec.patterns import NamePattern


@dataclass(frozen=True)
class Security:
    """How clients authenticate. ``password_secret`` is the *name* of the secret, never its value."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password_secret: str | None = None
    admin_username: str | None = None
    admin_password_secret: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    def as_admin(self) -> "Security":
        """The credentials mm2spec provisions with: ``security.admin`` when set, else the mirror's."""
        if not self.admin_username:
            return self
        return Security(self.protocol, self.sasl_mechanism, self.admin_username, self.admin_password_secret)


@dataclass(frozen=True)
class Cluster:
    """A Kafka cluster by alias."""

    alias: str
    bootstrap_servers: tuple[str, ...]
    security: Security = Security()
    config: tuple[tuple[str, str], ...] = ()

    @property
    def bootstrap(self) -> str:
        return ",".join(self.bootstrap_servers)


@dataclass(frozen=True)
class MirrorFlow:
    """One replication flow (source -> target) with MM2's settings in spec terms."""

    name: str
    source: str
    target: str
    replication_policy: Literal["identity", "default"]
    separator: str
    topics: tuple[NamePattern, ...]
    topics_exclude: tuple[str, ...]
    groups: tuple[NamePattern, ...]
    groups_exclude: tuple[str, ...]
    exactly_once: bool
    sync_group_offsets: bool
    sync_group_offsets_interval_seconds: int
    emit_checkpoints_interval_seconds: int
    refresh_topics_interval_seconds: int
    refresh_groups_interval_seconds: int
    sync_topic_configs: bool
    sync_topic_acls: bool
    heartbeats: bool
    offset_lag_max: int
    offset_syncs_topic_location: Literal["target", "source"]
    tasks_max: int
    allow_topic_replacement: bool
    producer_overrides: tuple[tuple[str, str], ...]
    consumer_overrides: tuple[tuple[str, str], ...]
    config: tuple[tuple[str, str], ...]

    # MM2's rules (mm2spec.mm2) applied to this flow: the plan, Pulumi and the Spark job share them.

    @property
    def policy_class(self) -> str:
        """The ``replication.policy.class`` MM2 runs with."""
        return policy.policy_class(self.replication_policy)

    def target_topic(self, source_topic: str) -> str:
        """The name MM2's replication policy gives ``source_topic`` on the target cluster."""
        return policy.target_topic(self.source, source_topic, identity=self.replication_policy == "identity",
                                   separator=self.separator)

    @property
    def offset_syncs_topic(self) -> str:
        """mm2-offset-syncs.<alias>.internal; the alias is the cluster the topic is *not* on (MM2's rule)."""
        return policy.offset_syncs_topic(self.source, self.target, self.offset_syncs_topic_location, self.separator)

    @property
    def offset_syncs_cluster(self) -> str:
        """The alias of the cluster holding the offset-syncs topic."""
        return policy.offset_syncs_cluster(self.source, self.target, self.offset_syncs_topic_location)

    @property
    def checkpoints_topic(self) -> str:
        """<source>.checkpoints.internal, on the target cluster."""
        return policy.checkpoints_topic(self.source, self.separator)

    @property
    def topics_exclude_all(self) -> tuple[str, ...]:
        """MM2's default topic excludes, then the spec's."""
        return selection.topics_exclude(self.topics_exclude)

    @property
    def topics_never_mirrored(self) -> tuple[str, ...]:
        """What MM2's replication policy never replicates, whatever ``topics`` says: Kafka's and
        MM2's internal topics, and (default policy) topics that came from the target: a cycle."""
        return selection.never_replicated(identity=self.replication_policy == "identity", target_alias=self.target,
                                          separator=self.separator)

    @property
    def groups_exclude_all(self) -> tuple[str, ...]:
        """MM2's default group excludes, then the spec's."""
        return selection.groups_exclude(self.groups_exclude)

    def connector_name(self, kind: str) -> str:
        """<name>-Mirror<Kind>Connector, e.g. primary-to-dr-MirrorSourceConnector (seed 000)."""
        return f"{self.name}-Mirror{kind}Connector"


@dataclass(frozen=True)
class InternalTopic:
    """A topic MM2 or Connect needs; replication factor -1 means the broker default."""

    cluster: str
    name: str
    partitions: int
    configs: tuple[tuple[str, str], ...]
    purpose: str
    replication_factor: int = -1


ResourceType = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]


@dataclass(frozen=True)
class AclBinding:
    """One ALLOW ACL for the mirroring principal. ``reason`` says why it is needed (not part of identity)."""

    cluster: str
    principal: str
    resource_type: ResourceType
    resource_name: str
    pattern_type: Literal["LITERAL", "PREFIXED"]
    operation: str
    permission: str = "ALLOW"
    host: str = "*"
    reason: str = field(default="", compare=False)

    @property
    def key(self) -> tuple:
        return (self.cluster, self.principal, self.resource_type, self.resource_name, self.pattern_type,
                self.operation, self.permission, self.host)


@dataclass(frozen=True)
class AclPattern:
    """ACLs wanted on every topic or group a true regex selects: only a live cluster can resolve them.

    The plan lists the source cluster's topics (or groups) matching ``regex`` on ``source_cluster``
    and wants, for each, ``operations`` on ``name_prefix + name`` on ``cluster`` (the prefix is the
    replication policy's ``<source>.`` for target topics, empty otherwise).
    """

    cluster: str
    principal: str
    resource_type: ResourceType
    source_cluster: str
    regex: str
    name_prefix: str
    operations: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class ConnectCluster:
    """The Kafka Connect cluster running MM2 (its configs are rendered for either engine)."""

    cluster: str
    group_id: str
    internal_topic_prefix: str
    listeners: tuple[str, ...]
    rest_url: str | None
    config: tuple[tuple[str, str], ...]

    @property
    def config_topic(self) -> str:
        return f"{self.internal_topic_prefix}-configs"

    @property
    def offsets_topic(self) -> str:
        return f"{self.internal_topic_prefix}-offsets"

    @property
    def status_topic(self) -> str:
        return f"{self.internal_topic_prefix}-status"


@dataclass(frozen=True)
class SparkDeployment:
    """Where and how the Spark mirroring job runs."""

    master: str
    trigger_interval: str
    max_offsets_per_trigger: int | None
    checkpoint_location: str
    executor_instances: int | None
    executor_cores: int | None
    executor_memory: str | None
    config: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DesiredState:
    """Everything a DR spec asks for in one environment."""

    name: str
    environment: str | None
    source_file: str
    labels: tuple[tuple[str, str], ...]
    clusters: tuple[Cluster, ...]
    mirrors: tuple[MirrorFlow, ...]
    engine: Literal["spark", "connect"]
    connect: ConnectCluster
    spark: SparkDeployment
    manage_acls: bool
    principal: str
    internal_topics: tuple[InternalTopic, ...]
    acl_bindings: tuple[AclBinding, ...]
    acl_patterns: tuple[AclPattern, ...]

    def cluster(self, alias: str) -> Cluster:
        for cluster in self.clusters:
            if cluster.alias == alias:
                return cluster
        raise UnknownCluster(f'cluster "{alias}" is not defined in spec {self.name}; defined: '
                             f"{', '.join(c.alias for c in self.clusters)}")

    @property
    def exactly_once(self) -> bool:
        return any(m.exactly_once for m in self.mirrors)
