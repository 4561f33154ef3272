"""Compile a validated DR spec for one environment into ``DesiredState``.

This is where the spec's meaning lives: defaults, the internal topics each flow needs (all with
replication factor -1; each flow's probe topic with them), and the ACL bindings of the mirroring
principal (those of Red Hat's guide "Setting up MirrorMaker for disaster recovery", section 5.7,
plus each flow's probe topic) plus those the Connect worker needs for itself (internal topics,
group, transactional IDs, idempotence).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mm2spec.mm2 import defaults, metric_names, spark_eos, spark_modes
from mm2spec.mm2.engine_facts import DEFAULT_ENGINE, engine_facts
from mm2spec.mm2.policy import PROBE_TOPIC_PARTITIONS, SEPARATOR_DEFAULT
from mm2spec.mm2.tls import Identity, Store, TlsSettings, store_type
from mm2spec.spec.document import Node, to_plain
from mm2spec.spec.model import (
    AclBinding,
    AclPattern,
    Cluster,
    ConnectCluster,
    DesiredState,
    FailoverSettings,
    InternalTopic,
    KubernetesDeployment,
    MirrorFlow,
    Objectives,
    Security,
    SparkDeployment,
)
from mm2spec.spec.patterns import NamePattern, classify

COMPACT = (("cleanup.policy", "compact"),)

# Operations by role, as Red Hat's guide "Setting up MirrorMaker for disaster recovery" lists them
# (section 5.7, "Configuring authorizations for MirrorMaker").
SOURCE_TOPIC_OPS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
TARGET_TOPIC_OPS = ("CREATE", "DESCRIBE", "WRITE", "ALTER", "ALTER_CONFIGS", "READ")
OFFSET_SYNCS_OPS = ("CREATE", "DESCRIBE", "WRITE", "READ")
CHECKPOINTS_OPS = ("CREATE", "DESCRIBE", "WRITE")
CONNECT_TOPIC_OPS = ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE")


def _props(mapping: Any) -> tuple[tuple[str, str], ...]:
    """A free-form map as sorted (key, string value) pairs; booleans as Kafka writes them."""
    if not mapping:
        return ()
    return tuple(sorted((str(k), str(v).lower() if isinstance(v, bool) else str(v)) for k, v in mapping.items()))


def compile_spec(doc: Node, env: str | None, source_file: str = "<spec>") -> DesiredState:
    """Turn a validated, environment-resolved document into DesiredState."""
    data = to_plain(doc)
    base = Path(source_file).resolve().parent if not source_file.startswith("<") else Path.cwd()
    clusters = tuple(_cluster(alias, spec, base) for alias, spec in data["clusters"].items())
    mirrors = tuple(_mirror(spec) for spec in data["mirrors"])
    name = data["metadata"]["name"]

    connect_spec = data.get("connect") or {}
    group_id = connect_spec.get("groupId") or f"connect-mirrormaker-{name}"
    connect = ConnectCluster(
        cluster=connect_spec.get("cluster") or mirrors[0].target,
        group_id=group_id,
        internal_topic_prefix=connect_spec.get("internalTopicPrefix") or f"__{group_id}",
        listeners=tuple(connect_spec.get("listeners") or ["http://:8083"]),
        rest_url=connect_spec.get("restUrl"),
        config=_props(connect_spec.get("config")),
        metrics_port=(connect_spec.get("metrics") or {}).get("port", metric_names.CONNECT_METRICS_PORT_DEFAULT),
        exporter_port=(connect_spec.get("metrics") or {}).get("exporterPort", metric_names.DR_EXPORTER_PORT_DEFAULT),
        ready_timeout_seconds=connect_spec.get("readyTimeoutSeconds", defaults.CONNECT_READY_TIMEOUT_SECONDS_DEFAULT),
    )
    spark_spec = data.get("spark") or {}
    executors = spark_spec.get("executors") or {}
    spark = SparkDeployment(
        master=spark_spec.get("master", "local[*]"),
        trigger_interval=spark_spec.get("triggerInterval", defaults.SPARK_TRIGGER_INTERVAL_DEFAULT),
        max_offsets_per_trigger=spark_spec.get(
            "maxOffsetsPerTrigger",
            None if spark_spec.get("mode") == spark_modes.REALTIME else defaults.SPARK_MAX_OFFSETS_PER_TRIGGER_DEFAULT),
        checkpoint_location=spark_spec.get("checkpointLocation") or f"./.mm2spec/checkpoints/{name}",
        executor_instances=executors.get("instances"),
        executor_cores=executors.get("cores"),
        executor_memory=executors.get("memory"),
        config=_props(spark_spec.get("config")),
        kubernetes=_kubernetes(name, spark_spec),
        driver_memory=spark_spec.get("driverMemory", "1g"),
        source=spark_spec.get("source", defaults.SPARK_SOURCE_DEFAULT),
        metrics_port=(spark_spec.get("metrics") or {}).get("port", metric_names.SPARK_METRICS_PORT_DEFAULT),
        exporter_port=(spark_spec.get("metrics") or {}).get("exporterPort", metric_names.DR_EXPORTER_PORT_DEFAULT),
        mode=spark_spec.get("mode", defaults.SPARK_MODE_DEFAULT),
        realtime_batch_duration=spark_spec.get("realTimeBatchDuration", defaults.SPARK_REALTIME_BATCH_DURATION_DEFAULT),
    )
    acls = data.get("acls") or {}
    principal = acls.get("principal", "User:mm2")
    engine = data.get("engine", DEFAULT_ENGINE)
    writer_job = name if engine_facts(engine).writer_names_on_target else None
    principals = {c.alias: c.security.principal for c in clusters if c.security.principal}
    bindings, patterns = derive_acls(mirrors, connect, principal, spark_job=writer_job, principals=principals)
    return DesiredState(
        name=name,
        environment=env,
        source_file=source_file,
        labels=_props((data["metadata"].get("labels") or {})),
        clusters=clusters,
        mirrors=mirrors,
        engine=engine,
        connect=connect,
        spark=spark,
        failover=FailoverSettings(tuple((data.get("failover") or {}).get("clients") or ()),
                                  bool((data.get("failover") or {}).get("fence", False))),
        manage_acls=acls.get("manage", True),
        principal=principal,
        internal_topics=derive_internal_topics(mirrors, connect),
        acl_bindings=bindings,
        acl_patterns=patterns,
    )


def _kubernetes(name: str, spark_spec: dict) -> KubernetesDeployment | None:
    """The Spark Operator settings, only for a ``k8s://`` master (validation made sure they are named)."""
    if not str(spark_spec.get("master", "")).startswith("k8s://"):
        return None
    k8s = spark_spec.get("kubernetes") or {}
    driver = k8s.get("driver") or {}
    return KubernetesDeployment(
        namespace=k8s["namespace"],
        image=k8s["image"],
        service_account=k8s.get("serviceAccount", "spark-operator-spark"),
        secret_name=k8s.get("secretName") or f"{name}-kafka-credentials",
        image_pull_policy=k8s.get("imagePullPolicy", "IfNotPresent"),
        restart_backoff_seconds=k8s.get("restartBackoffSeconds", 30),
        driver_cores=driver.get("cores", 1),
        driver_memory=driver.get("memory", "1g"),
    )


def _path(base: Path, path: str | None) -> str | None:
    """A path of the spec, absolute: a relative one is the spec file's folder's."""
    return None if path is None else str(base / Path(path).expanduser())


def _store(base: Path, spec: dict | None) -> Store | None:
    if not spec:
        return None
    path = _path(base, spec["path"]) or ""
    return Store(path, store_type(path, spec.get("type")) or "", spec.get("passwordSecret"))


def _identity(base: Path, spec: dict) -> Identity | None:
    if not any(spec.get(k) for k in ("certificate", "key", "keystore")):
        return None
    return Identity(_path(base, spec.get("certificate")), _path(base, spec.get("key")), spec.get("keyPasswordSecret"),
                    _store(base, spec.get("keystore")))


def _tls(base: Path, spec: dict | None) -> TlsSettings | None:
    if spec is None:
        return None
    return TlsSettings(ca=_path(base, spec.get("ca")), truststore=_store(base, spec.get("truststore")),
                       identity=_identity(base, spec), admin=_identity(base, spec.get("admin") or {}),
                       verify_hostname=spec.get("verifyHostname", True))


def _cluster(alias: str, spec: dict, base: Path) -> Cluster:
    security = spec.get("security") or {}
    return Cluster(
        alias=alias,
        bootstrap_servers=tuple(spec["bootstrapServers"]),
        security=Security(
            protocol=security.get("protocol", "PLAINTEXT"),
            sasl_mechanism=security.get("saslMechanism"),
            username=security.get("username"),
            password_secret=security.get("passwordSecret"),
            admin_username=(security.get("admin") or {}).get("username"),
            admin_password_secret=(security.get("admin") or {}).get("passwordSecret"),
            principal=security.get("principal"),
        ),
        config=_props(spec.get("config")),
        tls=_tls(base, spec.get("tls")),
    )


def _mirror(spec: dict) -> MirrorFlow:
    source, target = spec["source"], spec["target"]
    return MirrorFlow(
        name=spec.get("name") or f"{source}-to-{target}",
        source=source,
        target=target,
        replication_policy=spec.get("replicationPolicy", "default"),
        separator=spec.get("separator", SEPARATOR_DEFAULT),
        topics=tuple(classify(t) for t in spec["topics"]),
        topics_exclude=tuple(spec.get("topicsExclude") or ()),
        groups=tuple(classify(g) for g in spec.get("groups") or ()),
        groups_exclude=tuple(spec.get("groupsExclude") or ()),
        exactly_once=spec.get("exactlyOnce", False),
        sync_group_offsets=spec.get("syncGroupOffsets", True),
        sync_group_offsets_interval_seconds=spec.get("syncGroupOffsetsIntervalSeconds", 60),
        emit_checkpoints_interval_seconds=spec.get("emitCheckpointsIntervalSeconds", 60),
        refresh_topics_interval_seconds=spec.get("refreshTopicsIntervalSeconds", 600),
        refresh_groups_interval_seconds=spec.get("refreshGroupsIntervalSeconds", 600),
        sync_topic_configs=spec.get("syncTopicConfigs", True),
        sync_topic_acls=spec.get("syncTopicAcls", False),
        heartbeats=spec.get("heartbeats", False),
        offset_lag_max=spec.get("offsetLagMax", 100),
        offset_syncs_topic_location=spec.get("offsetSyncsTopicLocation", "target"),
        tasks_max=spec.get("tasksMax", 1),
        allow_topic_replacement=spec.get("allowTopicReplacement", False),
        producer_overrides=_props(spec.get("producerOverrides")),
        consumer_overrides=_props(spec.get("consumerOverrides")),
        config=_props(spec.get("config")),
        objectives=Objectives(rpo_seconds=(spec.get("objectives") or {}).get("rpoSeconds"),
                              checkpoint_age_seconds=(spec.get("objectives") or {}).get("checkpointAgeSeconds")),
    )


def derive_internal_topics(mirrors: tuple[MirrorFlow, ...], connect: ConnectCluster) -> tuple[InternalTopic, ...]:
    """The internal topics of Connect and of each flow, all with replication factor -1 (broker default)."""
    topics: dict[tuple[str, str], InternalTopic] = {}

    def add(topic: InternalTopic) -> None:
        topics.setdefault((topic.cluster, topic.name), topic)

    # Connect's defaults: one partition for configs (it must be totally ordered), 25 offsets, 5 status.
    add(InternalTopic(connect.cluster, connect.config_topic, 1, COMPACT, "Connect connector configs"))
    add(InternalTopic(connect.cluster, connect.offsets_topic, 25, COMPACT, "Connect source offsets"))
    add(InternalTopic(connect.cluster, connect.status_topic, 5, COMPACT, "Connect connector and task status"))
    for flow in mirrors:
        add(InternalTopic(flow.offset_syncs_cluster, flow.offset_syncs_topic, 1, COMPACT,
                          f"{flow.name}: offset-syncs (source offset -> target offset)"))
        if flow.groups:
            add(InternalTopic(flow.target, flow.checkpoints_topic, 1, COMPACT,
                              f"{flow.name}: consumer group checkpoints"))
        if flow.heartbeats:
            add(InternalTopic(flow.target, "heartbeats", 1, COMPACT, f"{flow.name}: heartbeats"))
        # The mirror creates the probe's copy on the target, as any mirrored topic's.
        add(InternalTopic(flow.source, flow.probe_topic, PROBE_TOPIC_PARTITIONS, (),
                          f"{flow.name}: the drill's probe topic (always mirrored)"))
    return tuple(topics.values())


def derive_acls(mirrors: tuple[MirrorFlow, ...], connect: ConnectCluster, principal: str,
                spark_job: str | None = None, principals: dict[str, str] | None = None,
                ) -> tuple[tuple[AclBinding, ...], tuple[AclPattern, ...]]:
    """ACLs for the mirroring principal (those of Red Hat's DR guide, section 5.7) and for the
    Connect worker itself; with ``spark_job`` (the job's name when the Spark engine mirrors) also
    those of its exactly-once writer. ``principals``: the principal on a cluster whose
    ``security.principal`` names its own (a client certificate's subject), by alias."""
    on = principals or {}
    bindings: dict[tuple, AclBinding] = {}
    patterns: dict[tuple, AclPattern] = {}

    def allow(cluster: str, rtype: str, name: str, ops: tuple[str, ...], reason: str, pattern: str = "LITERAL") -> None:
        for op in ops:
            binding = AclBinding(cluster, on.get(cluster, principal), rtype, name, pattern, op, reason=reason)
            bindings.setdefault(binding.key, binding)

    def allow_names(cluster: str, rtype: str, selector: NamePattern, prefix: str, ops: tuple[str, ...],
                    reason: str, source_cluster: str) -> None:
        if selector.kind == "literal" and selector.value == "*":
            if prefix:
                allow(cluster, rtype, prefix, ops, reason, "PREFIXED")
            else:
                allow(cluster, rtype, "*", ops, reason)
        elif selector.kind == "literal":
            allow(cluster, rtype, prefix + selector.value, ops, reason)
        elif selector.kind == "prefix":
            allow(cluster, rtype, prefix + selector.value, ops, reason, "PREFIXED")
        else:
            pending = AclPattern(cluster, on.get(cluster, principal), rtype, source_cluster, selector.value, prefix, ops,
                                 reason)
            patterns.setdefault((cluster, rtype, selector.value, prefix), pending)

    for flow in mirrors:
        s, t = flow.source, flow.target
        target_prefix = flow.target_topic("")  # the policy's prefix: "" (identity) or "<source><sep>"
        allow(s, "CLUSTER", "kafka-cluster", ("DESCRIBE",), f"{flow.name}: describe the source cluster")
        allow(t, "CLUSTER", "kafka-cluster", ("DESCRIBE", "ALTER"), f"{flow.name}: describe and alter the target cluster")
        for selector in flow.topics:
            allow_names(s, "TOPIC", selector, "", SOURCE_TOPIC_OPS, f"{flow.name}: read mirrored topic", s)
            allow_names(t, "TOPIC", selector, target_prefix, TARGET_TOPIC_OPS,
                        f"{flow.name}: create, write and configure mirror topic", s)
        for selector in flow.groups:
            allow_names(s, "GROUP", selector, "", ("DESCRIBE",), f"{flow.name}: read offsets of mirrored group", s)
            allow_names(t, "GROUP", selector, "", ("DESCRIBE", "READ"), f"{flow.name}: commit translated offsets", s)
        allow(flow.offset_syncs_cluster, "TOPIC", flow.offset_syncs_topic, OFFSET_SYNCS_OPS, f"{flow.name}: offset-syncs")
        if flow.groups:
            allow(t, "TOPIC", flow.checkpoints_topic, CHECKPOINTS_OPS, f"{flow.name}: checkpoints")
        if flow.heartbeats:
            allow(t, "TOPIC", "heartbeats", ("CREATE", "DESCRIBE", "WRITE"), f"{flow.name}: emit heartbeats")
            allow(s, "TOPIC", "heartbeats", SOURCE_TOPIC_OPS, f"{flow.name}: mirror heartbeats")
        if flow.groups:  # the probe group is checkpointed whatever the patterns say
            allow(s, "GROUP", flow.probe_group, ("DESCRIBE",), f"{flow.name}: read offsets of the probe group")
            allow(t, "GROUP", flow.probe_group, ("DESCRIBE", "READ"), f"{flow.name}: commit the probe group's offsets")
        # The probe topic is mirrored whatever the patterns say: the same grants as a literal topic's.
        allow(s, "TOPIC", flow.probe_topic, SOURCE_TOPIC_OPS, f"{flow.name}: read the probe topic")
        allow(t, "TOPIC", flow.target_topic(flow.probe_topic), TARGET_TOPIC_OPS,
              f"{flow.name}: create, write and configure the probe topic's copy")

    c = connect.cluster
    for topic in (connect.config_topic, connect.offsets_topic, connect.status_topic):
        allow(c, "TOPIC", topic, CONNECT_TOPIC_OPS, "Connect worker: internal topic")
    allow(c, "GROUP", connect.group_id, ("READ", "DESCRIBE"), "Connect worker: group membership")
    if any(flow.exactly_once for flow in mirrors):
        # KIP-618: the leader writes the config topic with transactional ID connect-cluster-<group.id>
        # (a real worker is refused leadership without it), source tasks use <group.id>-<connector>-<task>.
        # Exactly-once also needs idempotence.
        allow(c, "TRANSACTIONAL_ID", f"connect-cluster-{connect.group_id}", ("WRITE", "DESCRIBE"),
              "Connect worker: config topic writes as the leader")
        allow(c, "TRANSACTIONAL_ID", f"{connect.group_id}-", ("WRITE", "DESCRIBE"),
              "Connect worker: exactly-once transactions of source tasks", "PREFIXED")
        allow(c, "CLUSTER", "kafka-cluster", ("IDEMPOTENT_WRITE",), "Connect worker: idempotent producer")
        for flow in mirrors:
            if flow.exactly_once and flow.target != c:
                allow(flow.target, "TRANSACTIONAL_ID", f"{connect.group_id}-", ("WRITE", "DESCRIBE"),
                      f"{flow.name}: exactly-once transactions", "PREFIXED")
                allow(flow.target, "CLUSTER", "kafka-cluster", ("IDEMPOTENT_WRITE",), f"{flow.name}: idempotent producer")
    for flow in mirrors:
        if spark_job is not None and flow.exactly_once:
            # The Spark writer's own names (mm2spec.mm2.spark_eos): its progress is read from and
            # committed to a group in each partition's transaction.
            allow(flow.target, "GROUP", spark_eos.progress_group(spark_job, flow.name), ("READ", "DESCRIBE"),
                  f"{flow.name}: Spark exactly-once progress")
            allow(flow.target, "TRANSACTIONAL_ID", spark_eos.transactional_id_prefix(spark_job, flow.name),
                  ("WRITE", "DESCRIBE"), f"{flow.name}: Spark exactly-once transactions", "PREFIXED")
    return tuple(bindings.values()), tuple(patterns.values())


__all__ = ["compile_spec", "derive_acls", "derive_internal_topics"]
