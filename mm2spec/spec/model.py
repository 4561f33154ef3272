"""Desired state: what a DR spec means for one environment, as frozen dataclasses.

Everything downstream (render, plan, Pulumi, playbooks, the Spark job config) reads these types,
never raw YAML. ``mm2spec.spec.compile`` builds them from a validated document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal

from mm2spec.errors import UnknownCluster
from mm2spec.mm2 import defaults, metric_names, policy, selection
from mm2spec.mm2.tls import TlsSettings
from mm2spec.spec.patterns import NamePattern, NameSelector


@dataclass(frozen=True)
class Security:
    """How clients authenticate. ``password_secret`` is the *name* of the secret, never its value."""

    protocol: str = "PLAINTEXT"
    """``security.protocol``, as in Kafka: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``."""
    sasl_mechanism: str | None = None
    """Kafka ``sasl.mechanism`` (``security.saslMechanism``): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI
    or OAUTHBEARER; None: not set. A JAAS config is rendered only for PLAIN and SCRAM."""
    username: str | None = None
    """SASL user of the mirror's clients, and of mm2spec unless ``admin`` is set (``security.username``)."""
    password_secret: str | None = None
    """Env variable or Pulumi secret holding ``username``'s password (``security.passwordSecret``)."""
    admin_username: str | None = None
    """SASL user mm2spec plans and provisions as (``security.admin.username``); None: ``username``."""
    admin_password_secret: str | None = None
    """Env variable or Pulumi secret holding the admin's password (``security.admin.passwordSecret``)."""
    principal: str | None = None
    """The Kafka principal the mirror's clients have on this cluster, e.g. ``User:CN=mm2`` with a client
    certificate (``security.principal``); None: ``acls.principal``. Its ACLs are granted to it."""

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    @property
    def uses_tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def as_admin(self) -> "Security":
        """The credentials mm2spec provisions with: ``security.admin`` when set, else the mirror's."""
        if not self.admin_username:
            return self
        return Security(self.protocol, self.sasl_mechanism, self.admin_username, self.admin_password_secret)


@dataclass(frozen=True)
class Cluster:
    """A Kafka cluster by alias."""

    alias: str
    """Its key under ``clusters``; MM2 puts it in mirrored and internal topic names (``<alias>.<topic>``)."""
    bootstrap_servers: tuple[str, ...]
    """Brokers to bootstrap from, each ``host:port`` (``bootstrapServers``)."""
    security: Security = Security()
    """How clients authenticate to it (``security``); PLAINTEXT when the spec says nothing."""
    config: tuple[tuple[str, str], ...] = ()
    """Extra properties for every client of this cluster, e.g. ``ssl.cipher.suites`` (``config``)."""
    tls: TlsSettings | None = None
    """How clients verify its brokers and which client certificate they present (``tls``); None:
    the system's CAs and no client certificate (with an ``SSL`` protocol)."""

    @property
    def bootstrap(self) -> str:
        return ",".join(self.bootstrap_servers)


def _selected(names: Iterable[str], include: Iterable[str], exclude: Iterable[str]) -> list[str]:
    """The names some ``include`` pattern and no ``exclude`` pattern matches, sorted."""
    wanted, unwanted = NameSelector(include), NameSelector(exclude)
    return sorted(n for n in names if wanted.matches(n) and not unwanted.matches(n))


@dataclass(frozen=True)
class Objectives:
    """What a flow promises (``objectives``): ``mm2spec verify`` checks them, the drill report compares
    its figures with them, and the rendered alert rules fire when they break. None: no objective."""

    rpo_seconds: float | None = None
    """The oldest source record not yet on the target may be at most this old (``rpoSeconds``)."""
    checkpoint_age_seconds: float | None = None
    """A group's newest checkpoint may be at most this old once the group committed since
    (``checkpointAgeSeconds``)."""


@dataclass(frozen=True)
class MirrorFlow:
    """One replication flow (source -> target) with MM2's settings in spec terms."""

    name: str
    """The flow's name (``name``, default ``<source>-to-<target>``); its connectors are named after it."""
    source: str
    """Alias of the cluster mirrored from (``source``)."""
    target: str
    """Alias of the cluster mirrored to (``target``)."""
    replication_policy: Literal["identity", "default"]
    """``identity``: same topic names on the target; ``default``: ``<source><separator><topic>``."""
    separator: str
    """``replication.policy.separator`` (``separator``); MM2's internal topic names use it too."""
    topics: tuple[NamePattern, ...]
    """Topics to mirror (``topics``): exact names or Java regexes matched against whole names."""
    topics_exclude: tuple[str, ...]
    """The spec's topic patterns never mirrored (``topicsExclude``), without MM2's defaults."""
    groups: tuple[NamePattern, ...]
    """Groups whose offsets are checkpointed (``groups``), written like ``topics``; empty: no checkpoints."""
    groups_exclude: tuple[str, ...]
    """The spec's group patterns never mirrored (``groupsExclude``), without MM2's defaults."""
    exactly_once: bool
    """Mirror with exactly-once delivery (``exactlyOnce``): Connect's exactly-once source support with
    ``read_committed``, or the Spark job's transactional writer."""
    sync_group_offsets: bool
    """Commit translated offsets to target groups with no active members (``syncGroupOffsets``)."""
    sync_group_offsets_interval_seconds: int
    """Seconds between commits of translated group offsets (``syncGroupOffsetsIntervalSeconds``)."""
    emit_checkpoints_interval_seconds: int
    """Seconds between checkpoints of group offsets (``emitCheckpointsIntervalSeconds``)."""
    refresh_topics_interval_seconds: int
    """Seconds between scans for new source topics: the longest a new topic waits to be
    mirrored (``refreshTopicsIntervalSeconds``)."""
    refresh_groups_interval_seconds: int
    """Seconds between scans for new source groups (``refreshGroupsIntervalSeconds``)."""
    sync_topic_configs: bool
    """Keep target topic configs in line with the source's (``syncTopicConfigs``)."""
    sync_topic_acls: bool
    """Copy source topic ACLs to the target (``syncTopicAcls``); for clusters that use authorization."""
    heartbeats: bool
    """Run MirrorHeartbeatConnector and mirror the ``heartbeats`` topic (``heartbeats``)."""
    offset_lag_max: int
    """Records per partition between two offset-syncs (``offsetLagMax``, MM2's ``offset.lag.max``)."""
    offset_syncs_topic_location: Literal["target", "source"]
    """Which cluster holds the offset-syncs topic: ``target`` or ``source`` (``offsetSyncsTopicLocation``)."""
    tasks_max: int
    """Most tasks (units of parallelism) per connector, MM2's ``tasks.max`` (``tasksMax``)."""
    allow_topic_replacement: bool
    """Whether a target topic may be deleted and re-created, losing its data, when a change
    cannot be made in place (``allowTopicReplacement``); otherwise the change is refused."""
    producer_overrides: tuple[tuple[str, str], ...]
    """Producer settings for the target, rendered as ``producer.override.<key>`` (``producerOverrides``)."""
    consumer_overrides: tuple[tuple[str, str], ...]
    """Consumer settings for the source, rendered as ``consumer.<key>`` (``consumerOverrides``)."""
    config: tuple[tuple[str, str], ...]
    """Raw MM2 connector properties (``config``), applied last to each connector of the flow: they win."""
    objectives: Objectives = Objectives()
    """The flow's RPO and checkpoint-age objectives (``objectives``); none when the spec sets none."""

    # MM2's rules (mm2spec.mm2) applied to this flow: the plan, Pulumi and the Spark job share them.

    @property
    def policy_class(self) -> str:
        """The ``replication.policy.class`` MM2 runs with."""
        return policy.policy_class(self.replication_policy)

    def target_topic(self, source_topic: str) -> str:
        """The name MM2's replication policy gives ``source_topic`` on the target cluster."""
        return policy.target_topic(self.source, source_topic, identity=self.replication_policy == "identity",
                                   separator=self.separator)

    def source_topic(self, target_topic: str) -> str | None:
        """The source topic a target topic mirrors (``target_topic`` backwards); None when the
        replication policy did not name it after this flow's source."""
        return policy.upstream_topic(self.source, target_topic, identity=self.replication_policy == "identity",
                                     separator=self.separator)

    @property
    def probe_topic(self) -> str:
        """The flow's probe topic on its source (``mm2spec-probe-<flow>``, ``policy.probe_topic``): the
        mirror always carries it, the drill writes only there, provisioned with the internal topics."""
        return policy.probe_topic(self.name)

    @property
    def topic_selection(self) -> tuple[str, ...]:
        """The topic patterns the mirror runs with (``topics`` in MM2's and the Spark job's config):
        the spec's, then the probe topic as a literal pattern."""
        return selection.with_probe((p.text for p in self.topics), self.probe_topic)

    @property
    def probe_group(self) -> str:
        """The flow's probe group (``policy.probe_group``): checkpointed whenever the flow checkpoints groups."""
        return policy.probe_group(self.name)

    @property
    def group_selection(self) -> tuple[str, ...]:
        """The group patterns the mirror runs with (``groups``): the spec's, then the probe group as a
        literal pattern; none when the spec checkpoints no group."""
        if not self.groups:
            return ()
        return selection.with_probe((p.text for p in self.groups), self.probe_group)

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

    def mirrored_topics(self, source_topics: Iterable[str]) -> list[str]:
        """Of ``source_topics``, those the flow mirrors, sorted, as MM2 decides: any ``topics``
        pattern or the probe topic, no exclude (MM2's defaults included), nothing its replication policy never
        replicates (internal topics, cycles)."""
        return _selected(source_topics, self.topic_selection, self.topics_exclude_all + self.topics_never_mirrored)

    def mirrored_groups(self, groups: Iterable[str]) -> list[str]:
        """Of ``groups``, the consumer groups the flow checkpoints, sorted, as MM2 decides: any
        ``groups`` pattern or the probe group, no exclude (MM2's defaults included)."""
        return _selected(groups, self.group_selection, self.groups_exclude_all)

    def connector_name(self, kind: str) -> str:
        """<name>-Mirror<Kind>Connector, e.g. primary-to-dr-MirrorSourceConnector (the naming Red Hat's DR guide uses)."""
        return f"{self.name}-Mirror{kind}Connector"


@dataclass(frozen=True)
class InternalTopic:
    """A topic MM2 or Connect needs; replication factor -1 means the broker default."""

    cluster: str
    """Alias of the cluster the topic lives on."""
    name: str
    """The topic's name, e.g. ``mm2-offset-syncs.primary.internal`` or ``<internal_topic_prefix>-configs``."""
    partitions: int
    """Partition count: Connect's defaults for its own (configs 1, offsets 25, status 5), 1 for MM2's."""
    configs: tuple[tuple[str, str], ...]
    """Topic configs as (key, value) pairs, e.g. ``cleanup.policy=compact``."""
    purpose: str
    """What the topic is for, shown in the plan (e.g. ``Connect source offsets``)."""
    replication_factor: int = -1
    """Replicas per partition; -1 asks for the broker's ``default.replication.factor``, never compared."""


ResourceType = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]


@dataclass(frozen=True)
class AclBinding:
    """One ALLOW ACL for the mirroring principal. ``reason`` says why it is needed (not part of identity)."""

    cluster: str
    """Alias of the cluster the ACL is on."""
    principal: str
    """The Kafka principal it applies to, e.g. ``User:mm2`` (``acls.principal``)."""
    resource_type: ResourceType
    """``TOPIC``, ``GROUP``, ``CLUSTER`` (named ``kafka-cluster``) or ``TRANSACTIONAL_ID``."""
    resource_name: str
    """The resource's name, or the prefix when ``pattern_type`` is ``PREFIXED``; ``*``: every name."""
    pattern_type: Literal["LITERAL", "PREFIXED"]
    """``LITERAL`` (``resource_name`` exactly, or ``*``) or ``PREFIXED`` (names starting with it)."""
    operation: str
    """The Kafka ACL operation, e.g. ``READ``, ``WRITE``, ``DESCRIBE_CONFIGS``, ``IDEMPOTENT_WRITE``."""
    permission: str = "ALLOW"
    """``ALLOW`` in every binding mm2spec wants; one read from a cluster may be ``DENY``."""
    host: str = "*"
    """The host the client connects from; ``*``: any host."""
    reason: str = field(default="", compare=False)
    """Why the binding is needed, shown in the plan; not part of its identity (``key``)."""

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
    """Alias of the cluster the ACLs go on: the flow's source or target."""
    principal: str
    """The Kafka principal they apply to (``acls.principal``)."""
    resource_type: ResourceType
    """``TOPIC`` or ``GROUP``."""
    source_cluster: str
    """Alias of the flow's source cluster, whose topics or groups ``regex`` is matched against."""
    regex: str
    """The Java regex from the flow's ``topics`` or ``groups``, matched against whole names."""
    name_prefix: str
    """Put before each matched name: the policy's ``<source><separator>`` for target topics, else empty."""
    operations: tuple[str, ...]
    """The operations allowed on each matched name, e.g. ``READ``, ``DESCRIBE``, ``DESCRIBE_CONFIGS``."""
    reason: str
    """Why the ACLs are needed; each resolved binding's reason adds the regex."""


@dataclass(frozen=True)
class ConnectCluster:
    """The Kafka Connect cluster running MM2 (its configs are rendered for either engine)."""

    cluster: str
    """Where Connect's internal topics live (``connect.cluster``; default: the first flow's target)."""
    group_id: str
    """The workers' ``group.id`` (``connect.groupId``; default ``connect-mirrormaker-<metadata.name>``)."""
    internal_topic_prefix: str
    """Prefix of the ``-configs``, ``-offsets`` and ``-status`` topics (``connect.internalTopicPrefix``;
    default ``__<group_id>``: the leading ``__`` keeps MM2 from mirroring them)."""
    listeners: tuple[str, ...]
    """REST API listeners, e.g. ``http://:8083`` (``connect.listeners``); rendered comma-separated."""
    rest_url: str | None
    """Where mm2spec reaches the REST API to register connectors (``connect.restUrl``); None: connectors
    are not compared, and engine ``connect`` cannot be applied."""
    config: tuple[tuple[str, str], ...]
    """Extra worker properties (``connect.config``), applied last: they win over what mm2spec renders."""
    metrics_port: int = metric_names.CONNECT_METRICS_PORT_DEFAULT
    """Port of the Prometheus JMX exporter agent on each worker (``connect.metrics.port``)."""
    exporter_port: int = metric_names.DR_EXPORTER_PORT_DEFAULT
    """Port of mm2spec's DR exporter, the RPO and failover figures for engine connect
    (``connect.metrics.exporterPort``); engine spark's is ``spark.metrics.exporterPort``."""
    ready_timeout_seconds: int = defaults.CONNECT_READY_TIMEOUT_SECONDS_DEFAULT
    """How long ``pulumi up`` waits for a registered or updated connector and all its tasks to be
    RUNNING (``connect.readyTimeoutSeconds``); 0: it does not wait."""

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
class KubernetesDeployment:
    """How the Spark job runs on Kubernetes through the Kubeflow Spark Operator (``spark.kubernetes``)."""

    namespace: str
    """Namespace of the SparkApplication, its ConfigMap and its Secret (``namespace``)."""
    image: str
    """The job's container image, built from the rendered Dockerfile (``image``)."""
    service_account: str
    """Service account the driver runs as; it must be allowed to create executor pods (``serviceAccount``)."""
    secret_name: str
    """Kubernetes Secret holding each secret the spec names, under the secret's name as key (``secretName``)."""
    image_pull_policy: str
    """``Always``, ``IfNotPresent`` or ``Never`` (``imagePullPolicy``)."""
    restart_backoff_seconds: int
    """Seconds the operator waits before restarting a failed job or retrying a failed submission
    (``restartBackoffSeconds``)."""
    driver_cores: int
    """Cores of the driver pod (``driver.cores``)."""
    driver_memory: str
    """Memory of the driver's JVM, e.g. ``1g`` (``driver.memory``)."""


@dataclass(frozen=True)
class SparkDeployment:
    """Where and how the Spark mirroring job runs."""

    master: str
    """Spark master: ``local[N]``, ``local[*]``, ``spark://host:port`` or ``k8s://...`` (``spark.master``)."""
    trigger_interval: str
    """Micro-batch trigger interval, e.g. ``1 second``, ``500 milliseconds`` (``spark.triggerInterval``)."""
    max_offsets_per_trigger: int | None
    """Most records per micro-batch over all partitions (``spark.maxOffsetsPerTrigger``); None: no cap."""
    checkpoint_location: str
    """Folder (relative: to the project root) or HDFS/S3 URL of the streaming checkpoints a restart
    resumes from (``spark.checkpointLocation``; default ``./.mm2spec/checkpoints/<metadata.name>``)."""
    executor_instances: int | None
    """``spark.executor.instances`` (``spark.executors.instances``); None: Spark's default."""
    executor_cores: int | None
    """``spark.executor.cores`` (``spark.executors.cores``); None: Spark's default."""
    executor_memory: str | None
    """``spark.executor.memory``, e.g. ``4g`` (``spark.executors.memory``); None: Spark's default."""
    config: tuple[tuple[str, str], ...]
    """Extra Spark properties (``spark.*``) as sorted (key, value) pairs (``spark.config``)."""
    kubernetes: KubernetesDeployment | None = None
    """Set when ``master`` is ``k8s://...``: the SparkApplication's settings (``spark.kubernetes``)."""
    driver_memory: str = "1g"
    """``spark.driver.memory`` (``spark.driverMemory``); with ``local[N]`` the driver JVM runs the tasks too."""
    source: str = defaults.SPARK_SOURCE_DEFAULT
    """The job's Kafka source (``spark.source``): ``mirror`` (mm2spec's: ``tasksMax`` tasks per batch) or ``kafka`` (Spark's)."""
    metrics_port: int = metric_names.SPARK_METRICS_PORT_DEFAULT
    """Port of the driver's Prometheus ``/metrics`` (``spark.metrics.port``)."""
    exporter_port: int = metric_names.DR_EXPORTER_PORT_DEFAULT
    """Port of mm2spec's DR exporter for engine spark (``spark.metrics.exporterPort``); engine
    connect's is ``connect.metrics.exporterPort``."""
    mode: str = defaults.SPARK_MODE_DEFAULT
    """``microbatch`` or ``realtime`` (``spark.mode``; what each needs: ``mm2.spark_modes``)."""
    realtime_batch_duration: str = defaults.SPARK_REALTIME_BATCH_DURATION_DEFAULT
    """Real-time Mode: how long one batch runs (``spark.realTimeBatchDuration``)."""


@dataclass(frozen=True)
class FailoverSettings:
    """How a failover treats the applications (``failover``)."""

    clients: tuple[str, ...] = ()
    """Client principals (``User:orders-svc``) whose WRITE is fenced on the source and who are
    granted READ/WRITE on DR (``failover.clients``)."""
    fence: bool = False
    """Deny ``clients`` WRITE on the source's mirrored topics before draining (``failover.fence``)."""


@dataclass(frozen=True)
class DesiredState:
    """Everything a DR spec asks for in one environment."""

    name: str
    """``metadata.name``, in Pulumi resource names, the default Connect group id and checkpoint folder."""
    environment: str | None
    """The environment whose overlay was merged in (``environments.<name>``); None: the base spec."""
    source_file: str
    """The spec file, as given on the command line."""
    labels: tuple[tuple[str, str], ...]
    """``metadata.labels`` as sorted (key, value) pairs, values as strings."""
    clusters: tuple[Cluster, ...]
    """Every cluster under ``clusters``, in the spec's order."""
    mirrors: tuple[MirrorFlow, ...]
    """The replication flows (``mirrors``), in the spec's order."""
    engine: str
    """What moves the data (``engine``): a name of ``mm2.engine_facts.ENGINE_FACTS`` (the schema's
    enum), e.g. ``spark`` (the PySpark job) or ``connect`` (MM2 on Kafka Connect)."""
    connect: ConnectCluster
    """The Connect cluster (``connect``); set for either engine, as its configs are always rendered."""
    spark: SparkDeployment
    """The Spark deployment (``spark``); set for either engine, used when ``engine`` is ``spark``."""
    manage_acls: bool
    """Whether mm2spec plans and creates ``acl_bindings`` and ``acl_patterns`` (``acls.manage``)."""
    principal: str
    """Kafka principal MM2, Connect and the Spark job run as, e.g. ``User:mm2`` (``acls.principal``);
    a cluster's ``security.principal`` replaces it there (``principal_on``)."""
    internal_topics: tuple[InternalTopic, ...]
    """The topics Connect and the flows need: Connect's three, offset-syncs, checkpoints, heartbeats."""
    acl_bindings: tuple[AclBinding, ...]
    """The literal and prefixed ACLs ``principal`` needs, one per operation."""
    acl_patterns: tuple[AclPattern, ...]
    """ACLs on names a true regex selects, resolved against the live source clusters when planning."""
    failover: FailoverSettings = FailoverSettings()
    """What a failover does for the applications (``failover``); empty when the spec says nothing."""

    def cluster(self, alias: str) -> Cluster:
        for cluster in self.clusters:
            if cluster.alias == alias:
                return cluster
        raise UnknownCluster(f'cluster "{alias}" is not defined in spec {self.name}; defined: '
                             f"{', '.join(c.alias for c in self.clusters)}")

    def principal_on(self, alias: str) -> str:
        """The mirror's principal on cluster ``alias``: its ``security.principal``, else ``principal``."""
        return self.cluster(alias).security.principal or self.principal

    @property
    def exactly_once(self) -> bool:
        return any(m.exactly_once for m in self.mirrors)
