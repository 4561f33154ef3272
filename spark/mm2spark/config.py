"""The Spark job config that ``mm2spec render`` writes (``spark-mirror.json``) as typed values.

Key names are MirrorMaker 2's wherever MM2 has one (``source.cluster.bootstrap.servers``,
``topics.exclude``, ``offset.lag.max``, ...), so one vocabulary serves both engines, and so are
the defaults of keys the config leaves out (from ``mm2spec.mm2``, which mm2spec's own rendering
and plan use too).
Secrets arrive as ``${env:NAME}`` placeholders (Kafka's EnvVarConfigProvider syntax) and a PEM client
key and certificate chain as ``${dir:FOLDER:FILE}`` ones (DirectoryConfigProvider's); the job resolves
them from its own environment and files and never logs a resolved value. TLS settings reach the JVM
clients in Kafka's Java names and the Python clients through ``mm2spec.mm2.tls.ClientTls``: one rule.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from mm2spec.errors import JobConfigError, SecretMissing, TlsInvalid
from mm2spec.mm2 import defaults, spark_modes
from mm2spec.mm2.policy import (DEFAULT_POLICY, IDENTITY_POLICY, REPLICATION_POLICY_DEFAULT, SEPARATOR_DEFAULT,
                                policy_kind)
from mm2spec.mm2.selection import (GROUPS_EXCLUDE_DEFAULT, GROUPS_INCLUDE_DEFAULT, TOPICS_EXCLUDE_DEFAULT,
                                   TOPICS_INCLUDE_DEFAULT)
from mm2spec.mm2.tls import ClientTls, resolve_references

__all__ = ["ClusterConnection", "JobConfig", "JobConfigError", "MirrorFlowConfig", "SparkSettings",
           "load_job_config", "parse_flow", "parse_job_config", "resolve_env", "trigger_seconds"]

_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def resolve_env(text: str, environ: Mapping[str, str], where: str = "the job config", key: str | None = None) -> str:
    """Replace each ``${env:NAME}`` with the variable's value and each ``${dir:FOLDER:FILE}`` with the
    file's content (``mm2spec.mm2.tls.resolve_references``); a missing variable or an unreadable file
    is a JobConfigError (``where``, the cluster, and ``key``, the job config's key, name the file)."""
    for name in _ENV_REF.findall(text):
        if name not in environ:
            raise JobConfigError(f"environment variable {name} is not set (referenced as ${{env:{name}}})")
    try:
        return resolve_references(text, environ.get, where, key)
    except (SecretMissing, TlsInvalid) as exc:
        raise JobConfigError(str(exc)) from None


@dataclass(frozen=True)
class ClusterConnection:
    """How to reach one cluster. ``repr`` never shows the JAAS config nor the other properties (they
    hold passwords and a PEM private key)."""

    alias: str
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_jaas_config: str | None = field(default=None, repr=False)
    extra: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Other client properties given with the cluster prefix (ssl.*, ...), Java names, references resolved."""
    ssl_references: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """The ``ssl.*`` properties as the job config gives them (``${env:...}``, ``${dir:...}``): what
    ``ClientTls`` reads, so its messages name the spec's files. Empty: ``extra``'s."""
    secret_lookup: Callable[[str], "str | None"] | None = field(default=None, repr=False, compare=False)
    """Where ``ssl_references``' secrets are read (the environment the config was parsed with)."""

    def java_properties(self) -> dict[str, str]:
        """Java Kafka client properties (Spark's ``kafka.*`` options, MM2's Java tools)."""
        props = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.sasl_mechanism:
            props["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_jaas_config:
            props["sasl.jaas.config"] = self.sasl_jaas_config
        props.update(dict(self.extra))
        return props

    def librdkafka(self) -> dict[str, str]:
        """The same connection for confluent-kafka (librdkafka takes username/password, not JAAS)."""
        conf = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_jaas_config:
            options = dict(_JAAS_OPTION.findall(self.sasl_jaas_config))
            if "username" in options:
                conf["sasl.username"] = options["username"]
            if "password" in options:
                conf["sasl.password"] = options["password"].replace('\\"', '"')
        conf.update(self._librdkafka_ssl())
        return conf

    def _librdkafka_ssl(self) -> dict[str, str]:
        """librdkafka's ``ssl.*`` settings, from ``ClientTls`` (a JKS store converted once per process)."""
        raw = dict(self.ssl_references) or {k: v for k, v in self.extra if k.startswith("ssl.")}
        if not raw or not self.security_protocol.upper().endswith("SSL"):
            return {}  # as the Java clients, a client without TLS ignores ssl.*
        key = (self.alias, tuple(sorted(raw.items())), tuple(kv for kv in self.extra if kv[0].startswith("ssl.")))
        if key not in _LIBRDKAFKA_SSL_CACHE:
            lookup = self.secret_lookup or (lambda name: None)  # TlsInvalid names the cluster, field and file
            _LIBRDKAFKA_SSL_CACHE[key] = ClientTls(raw, lookup, where=f'cluster "{self.alias}"').librdkafka()
        return dict(_LIBRDKAFKA_SSL_CACHE[key])


# Each cluster's librdkafka TLS settings, made once: a JKS store is converted with keytool.
_LIBRDKAFKA_SSL_CACHE: dict[tuple, dict[str, str]] = {}


@dataclass(frozen=True)
class MirrorFlowConfig:
    """One replication flow (source -> target), MM2's settings for it; defaults are MM2's."""

    name: str
    source: ClusterConnection
    target: ClusterConnection
    topics: tuple[str, ...]
    topics_exclude: tuple[str, ...]
    groups: tuple[str, ...]
    groups_exclude: tuple[str, ...]
    replication_policy_class: str = REPLICATION_POLICY_DEFAULT
    replication_policy_separator: str = SEPARATOR_DEFAULT
    offset_syncs_topic_location: str = defaults.OFFSET_SYNCS_TOPIC_LOCATION_DEFAULT
    offset_lag_max: int = defaults.OFFSET_LAG_MAX_DEFAULT
    tasks_max: int = 1
    """MM2's ``tasks.max``: the mirror source's tasks per micro-batch, each with one consumer."""
    emit_checkpoints: bool = defaults.EMIT_CHECKPOINTS_ENABLED_DEFAULT
    emit_checkpoints_interval_s: float = float(defaults.EMIT_CHECKPOINTS_INTERVAL_SECONDS_DEFAULT)
    sync_group_offsets: bool = defaults.SYNC_GROUP_OFFSETS_ENABLED_DEFAULT
    sync_group_offsets_interval_s: float = float(defaults.SYNC_GROUP_OFFSETS_INTERVAL_SECONDS_DEFAULT)
    refresh_topics_interval_s: float = float(defaults.REFRESH_TOPICS_INTERVAL_SECONDS_DEFAULT)
    refresh_groups_interval_s: float = float(defaults.REFRESH_GROUPS_INTERVAL_SECONDS_DEFAULT)
    exactly_once: bool = defaults.EXACTLY_ONCE_SOURCE_SUPPORT_DEFAULT == "enabled"
    sync_topic_configs: bool = defaults.SYNC_TOPIC_CONFIGS_ENABLED_DEFAULT
    producer_overrides: tuple[tuple[str, str], ...] = ()
    consumer_overrides: tuple[tuple[str, str], ...] = ()

    @property
    def identity(self) -> bool:
        """Whether the flow keeps topic names (IdentityReplicationPolicy)."""
        return policy_kind(self.replication_policy_class) == "identity"

    @property
    def source_alias(self) -> str:
        return self.source.alias

    @property
    def target_alias(self) -> str:
        return self.target.alias


#: The Spark settings' defaults live with MM2's in mm2spec.mm2.defaults (the spec compiler uses them too).
TRIGGER_INTERVAL_DEFAULT = defaults.SPARK_TRIGGER_INTERVAL_DEFAULT
MAX_OFFSETS_PER_TRIGGER_DEFAULT = defaults.SPARK_MAX_OFFSETS_PER_TRIGGER_DEFAULT


@dataclass(frozen=True)
class SparkSettings:
    """Where and how the streaming queries run."""

    master: str = "local[2]"
    trigger_interval: str = TRIGGER_INTERVAL_DEFAULT
    max_offsets_per_trigger: int | None = MAX_OFFSETS_PER_TRIGGER_DEFAULT
    checkpoint_location: str = "./.mm2spec/checkpoints/mirror"
    executor_instances: int | None = None
    executor_cores: int | None = None
    executor_memory: str | None = None
    driver_memory: str | None = None
    """spark.driver.memory: in local mode the driver JVM runs the executors too (Spark's default: 1g)."""
    conf: tuple[tuple[str, str], ...] = ()
    source: str = defaults.SPARK_SOURCE_DEFAULT
    """The Kafka source: ``mirror`` (mm2spec's, ``tasks.max`` tasks a batch) or ``kafka`` (Spark's)."""
    metrics_port: int | None = None
    """Port of the driver's Prometheus ``/metrics`` (``metrics.port``; 0: any free one); None: not served."""
    mode: str = defaults.SPARK_MODE_DEFAULT
    """``microbatch`` or ``realtime`` (Spark's Real-time Mode; rules in ``mm2spec.mm2.spark_modes``)."""
    realtime_batch_duration: str = defaults.SPARK_REALTIME_BATCH_DURATION_DEFAULT
    """Real-time Mode: how long one batch runs before its offsets are committed."""


@dataclass(frozen=True)
class JobConfig:
    """The whole job: a name, Spark settings and one or more flows."""

    name: str
    environment: str | None
    spark: SparkSettings
    flows: tuple[MirrorFlowConfig, ...]


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


def _list(flow: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list; MM2's default when the key is absent (a value, even empty, replaces it)."""
    return _split(flow[key]) if key in flow else default


def _bool(value: Any, key: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise JobConfigError(f"{key}: expected true or false, got {value!r}")


def _number(value: Any, key: str, cast=float):
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise JobConfigError(f"{key}: expected a number, got {value!r}") from None


def _setting(flow: Mapping[str, Any], key: str, default, cast=float):
    """``key``'s value read as ``cast`` (bool: true/false), MM2's ``default`` when absent."""
    value = flow.get(key, default)
    return _bool(value, key) if cast is bool else _number(value, key, cast)


def _tasks_max(flow: Mapping[str, Any], name: str) -> int:
    tasks = _setting(flow, "tasks.max", 1, int)
    if tasks < 1:
        raise JobConfigError(f"flow {name!r}: tasks.max must be at least 1, got {tasks}")
    return tasks


def _source(value: Any) -> str:
    if value not in defaults.SPARK_SOURCES:
        raise JobConfigError(f"spark.source must be one of {', '.join(defaults.SPARK_SOURCES)}, got {value!r}")
    return str(value)


def _port(value: Any) -> int | None:
    if value in (None, ""):
        return None
    port = _number(value, "spark.metrics.port", int)
    if not 0 <= port <= 65535:
        raise JobConfigError(f"spark.metrics.port must be a port number (1-65535), got {value!r}")
    return port
def _mode(value: Any) -> str:
    if value not in defaults.SPARK_MODES:
        raise JobConfigError(f"spark.mode must be one of {', '.join(defaults.SPARK_MODES)}, got {value!r}")
    return str(value)


def check_mode(job: JobConfig, slots: int | None) -> None:
    """The job can run in its mode with ``slots`` task slots (None: unknown); JobConfigError otherwise."""
    spark = job.spark
    problems = spark_modes.mode_problems(
        spark.mode, source=spark.source, max_offsets_per_trigger=spark.max_offsets_per_trigger,
        batch_duration=spark.realtime_batch_duration,
        flows=[(f.name, f.tasks_max) for f in job.flows], slots=slots)
    if problems:
        raise JobConfigError("; ".join(p.message for p in problems))


def _cluster(flow: Mapping[str, Any], role: str, environ: Mapping[str, str]) -> ClusterConnection:
    prefix = f"{role}.cluster."
    alias = flow.get(f"{prefix}alias")
    bootstrap = flow.get(f"{prefix}bootstrap.servers")
    if not alias or not bootstrap:
        raise JobConfigError(f"flow {flow.get('name')!r}: {prefix}alias and {prefix}bootstrap.servers are required")
    known = {"alias", "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config"}
    given = {k[len(prefix):]: str(v) for k, v in flow.items() if k.startswith(prefix) and k[len(prefix):] not in known}
    where = f'cluster "{alias}"'
    extra = tuple(sorted((k, resolve_env(v, environ, where, prefix + k)) for k, v in given.items()))
    jaas = flow.get(f"{prefix}sasl.jaas.config")
    return ClusterConnection(
        alias=str(alias),
        bootstrap_servers=str(bootstrap),
        security_protocol=str(flow.get(f"{prefix}security.protocol", "PLAINTEXT")),
        sasl_mechanism=flow.get(f"{prefix}sasl.mechanism"),
        sasl_jaas_config=resolve_env(str(jaas), environ) if jaas else None,
        extra=extra,
        ssl_references=tuple(sorted((k, v) for k, v in given.items() if k.startswith("ssl."))),
        secret_lookup=environ.get,
    )


def parse_flow(flow: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> MirrorFlowConfig:
    """One entry of ``flows``; unknown keys are ignored as MM2 ignores them."""
    environ = os.environ if environ is None else environ
    name = flow.get("name") or f"{flow.get('source.cluster.alias')}-to-{flow.get('target.cluster.alias')}"
    eos = str(flow.get("exactly.once.source.support", defaults.EXACTLY_ONCE_SOURCE_SUPPORT_DEFAULT)).strip().lower()
    if eos not in ("enabled", "disabled", "preparing"):
        raise JobConfigError(f"flow {name!r}: exactly.once.source.support must be enabled or disabled, got {eos!r}")
    location = str(flow.get("offset-syncs.topic.location", defaults.OFFSET_SYNCS_TOPIC_LOCATION_DEFAULT))
    if location not in ("source", "target"):
        raise JobConfigError(f"flow {name!r}: offset-syncs.topic.location must be source or target")
    policy = str(flow.get("replication.policy.class", REPLICATION_POLICY_DEFAULT))
    if policy_kind(policy) is None:
        raise JobConfigError(f"flow {name!r}: replication.policy.class {policy} is not supported by the Spark "
                             f"engine; use {IDENTITY_POLICY} or {DEFAULT_POLICY}")
    topics = _list(flow, "topics", TOPICS_INCLUDE_DEFAULT)
    if not topics:
        raise JobConfigError(f"flow {name!r}: topics is empty")
    return MirrorFlowConfig(
        name=str(name),
        source=_cluster(flow, "source", environ),
        target=_cluster(flow, "target", environ),
        topics=topics,
        topics_exclude=_list(flow, "topics.exclude", TOPICS_EXCLUDE_DEFAULT),
        groups=_list(flow, "groups", GROUPS_INCLUDE_DEFAULT),
        groups_exclude=_list(flow, "groups.exclude", GROUPS_EXCLUDE_DEFAULT),
        replication_policy_class=policy,
        replication_policy_separator=str(flow.get("replication.policy.separator", SEPARATOR_DEFAULT)),
        offset_syncs_topic_location=location,
        offset_lag_max=_setting(flow, "offset.lag.max", defaults.OFFSET_LAG_MAX_DEFAULT, int),
        tasks_max=_tasks_max(flow, str(name)),
        emit_checkpoints=_setting(flow, "emit.checkpoints.enabled", defaults.EMIT_CHECKPOINTS_ENABLED_DEFAULT, bool),
        emit_checkpoints_interval_s=_setting(flow, "emit.checkpoints.interval.seconds",
                                             defaults.EMIT_CHECKPOINTS_INTERVAL_SECONDS_DEFAULT),
        sync_group_offsets=_setting(flow, "sync.group.offsets.enabled", defaults.SYNC_GROUP_OFFSETS_ENABLED_DEFAULT, bool),
        sync_group_offsets_interval_s=_setting(flow, "sync.group.offsets.interval.seconds",
                                               defaults.SYNC_GROUP_OFFSETS_INTERVAL_SECONDS_DEFAULT),
        refresh_topics_interval_s=_setting(flow, "refresh.topics.interval.seconds",
                                           defaults.REFRESH_TOPICS_INTERVAL_SECONDS_DEFAULT),
        refresh_groups_interval_s=_setting(flow, "refresh.groups.interval.seconds",
                                           defaults.REFRESH_GROUPS_INTERVAL_SECONDS_DEFAULT),
        exactly_once=eos == "enabled",
        sync_topic_configs=_setting(flow, "sync.topic.configs.enabled", defaults.SYNC_TOPIC_CONFIGS_ENABLED_DEFAULT, bool),
        producer_overrides=tuple(sorted((k[len("producer.override."):], str(v)) for k, v in flow.items()
                                        if k.startswith("producer.override."))),
        consumer_overrides=tuple(sorted((k[len("consumer."):], str(v)) for k, v in flow.items()
                                        if k.startswith("consumer.") and not k.startswith("consumer.override."))
                                 + [(k[len("consumer.override."):], str(v)) for k, v in flow.items()
                                    if k.startswith("consumer.override.")]),
    )


def parse_job_config(data: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> JobConfig:
    """The whole ``spark-mirror.json`` document."""
    if data.get("apiVersion") != "mm2spec/v1":
        raise JobConfigError(f"apiVersion must be mm2spec/v1, got {data.get('apiVersion')!r}")
    spark = data.get("spark") or {}
    max_offsets = spark.get("max.offsets.per.trigger")
    mode = _mode(spark.get("mode", defaults.SPARK_MODE_DEFAULT))
    if max_offsets in (None, "") and mode == spark_modes.REALTIME:
        max_offsets_default = None  # a Real-time batch has no record cap
    else:
        max_offsets_default = MAX_OFFSETS_PER_TRIGGER_DEFAULT
    settings = SparkSettings(
        master=str(spark.get("master", "local[2]")),
        trigger_interval=str(spark.get("trigger.interval", TRIGGER_INTERVAL_DEFAULT)),
        max_offsets_per_trigger=int(max_offsets) if max_offsets not in (None, "") else max_offsets_default,
        checkpoint_location=str(spark.get("checkpoint.location") or f"./.mm2spec/checkpoints/{data.get('name', 'mirror')}"),
        executor_instances=spark.get("executor.instances"),
        executor_cores=spark.get("executor.cores"),
        executor_memory=spark.get("executor.memory"),
        driver_memory=spark.get("driver.memory"),
        conf=tuple(sorted((str(k), str(v)) for k, v in (spark.get("conf") or {}).items())),
        source=_source(spark.get("source", defaults.SPARK_SOURCE_DEFAULT)),
        metrics_port=_port(spark.get("metrics.port")),
        mode=mode,
        realtime_batch_duration=str(spark.get("realtime.batch.duration", defaults.SPARK_REALTIME_BATCH_DURATION_DEFAULT)),
    )
    flows = tuple(parse_flow(f, environ) for f in data.get("flows") or [])
    if not flows:
        raise JobConfigError("the job config has no flows")
    check_mode_offline = JobConfig(name="", environment=None, spark=settings, flows=flows)
    check_mode(check_mode_offline, spark_modes.local_slots(settings.master))
    names = [f.name for f in flows]
    if len(set(names)) != len(names):
        raise JobConfigError(f"flow names must be unique, got {names}")
    return JobConfig(name=str(data.get("name", "mirror")), environment=data.get("environment"),
                     spark=settings, flows=flows)


def load_job_config(path: str | Path, environ: Mapping[str, str] | None = None) -> JobConfig:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise JobConfigError(f"{path}: cannot read the job config: {exc}") from None
    return parse_job_config(data, environ)


def trigger_seconds(interval: str) -> float:
    """Spark's trigger interval text ("1 second", "500 milliseconds", "2 minutes") in seconds."""
    seconds = spark_modes.duration_seconds(interval)
    if seconds is None:
        raise JobConfigError(f"trigger.interval: cannot read {interval!r} (e.g. '1 second', '500 milliseconds')")
    return seconds
