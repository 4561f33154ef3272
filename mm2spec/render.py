"""Render desired state into the files an operator deploys.

- ``connect-distributed.properties``: the Kafka Connect worker (seed 000, section 5.6)
- ``<flow>-MirrorSourceConnector.json`` / ``-MirrorCheckpointConnector.json`` / ``-MirrorHeartbeatConnector.json``:
  ``{"name": ..., "config": {...}}``; the config part is what ``PUT /connectors/{name}/config`` takes
- ``mm2.properties``: every flow for MM2's dedicated mode
- ``spark-mirror.json``: the Spark mirroring job's config, in MM2's key names
- ``resources.json`` / ``resources.txt``: the internal topics and ACL bindings

Passwords are never written: SASL settings use Kafka's EnvVarConfigProvider (``${env:NAME}``), so
the worker (or the Spark job) reads the secret from its environment when it starts. All functions
here are pure: they return file contents; ``write_files`` is the only one that touches the disk.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from mm2spec.model import Cluster, DesiredState, MirrorFlow, Security

BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
ENV_PROVIDER = (("config.providers", "env"),
                ("config.providers.env.class", "org.apache.kafka.common.config.provider.EnvVarConfigProvider"))
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def jaas_config(security: Security) -> str | None:
    """sasl.jaas.config with the password as a config-provider reference, never the value."""
    module = _LOGIN_MODULES.get(security.sasl_mechanism or "")
    if not security.uses_sasl or module is None or not security.username:
        return None
    return f'{module} required username="{security.username}" password="${{env:{security.password_secret}}}";'


def client_properties(cluster: Cluster) -> list[tuple[str, str]]:
    """Java client connection settings for a cluster (no bootstrap.servers), passwords as ${env:...}."""
    props = [("security.protocol", cluster.security.protocol)] if cluster.security.protocol != "PLAINTEXT" else []
    if cluster.security.uses_sasl and cluster.security.sasl_mechanism:
        props.append(("sasl.mechanism", cluster.security.sasl_mechanism))
        jaas = jaas_config(cluster.security)
        if jaas:
            props.append(("sasl.jaas.config", jaas))
    props.extend(cluster.config)
    return props


# --------------------------------------------------------------------------------- Connect worker

def worker_properties(state: DesiredState) -> list[tuple[str, str]]:
    """connect-distributed.properties as ordered (key, value) pairs."""
    connect = state.connect
    cluster = state.cluster(connect.cluster)
    props: list[tuple[str, str]] = [
        ("bootstrap.servers", cluster.bootstrap),
        ("group.id", connect.group_id),
        ("plugin.discovery", "service_load"),
        ("key.converter", BYTE_ARRAY_CONVERTER),
        ("value.converter", BYTE_ARRAY_CONVERTER),
        # Connect's default SimpleHeaderConverter would write mirrored header values base64-encoded.
        ("header.converter", BYTE_ARRAY_CONVERTER),
        ("offset.storage.topic", connect.offsets_topic),
        ("offset.storage.replication.factor", "-1"),
        ("offset.storage.partitions", "25"),
        ("config.storage.topic", connect.config_topic),
        ("config.storage.replication.factor", "-1"),
        ("status.storage.topic", connect.status_topic),
        ("status.storage.replication.factor", "-1"),
        ("status.storage.partitions", "5"),
    ]
    if state.exactly_once:
        props.append(("exactly.once.source.support", "enabled"))
    props.append(("listeners", ",".join(connect.listeners)))
    props.extend(ENV_PROVIDER)
    security = client_properties(cluster)
    props.extend(security)
    # The worker's own clients take the top-level settings; the producers, consumers and admin
    # clients it creates for connectors only take prefixed ones.
    for prefix in ("producer.", "consumer.", "admin."):
        props.extend((prefix + key, value) for key, value in security)
    return _apply(props, connect.config)


def _apply(props: list[tuple[str, str]], overrides: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """Overrides win: an existing key keeps its place with the new value, new keys are appended."""
    result = dict(props)
    for key, value in overrides:
        result[key] = value
    return list(result.items())


# ------------------------------------------------------------------------------------ connectors

def _flow_common(state: DesiredState, flow: MirrorFlow, connector_class: str) -> dict[str, str]:
    source, target = state.cluster(flow.source), state.cluster(flow.target)
    config = {
        "connector.class": f"org.apache.kafka.connect.mirror.{connector_class}",
        "tasks.max": str(flow.tasks_max),
        "source.cluster.alias": flow.source,
        "target.cluster.alias": flow.target,
        "source.cluster.bootstrap.servers": source.bootstrap,
        "target.cluster.bootstrap.servers": target.bootstrap,
    }
    for prefix, cluster in (("source.cluster.", source), ("target.cluster.", target)):
        config.update({prefix + key: value for key, value in client_properties(cluster)})
    config["replication.policy.class"] = flow.policy_class
    if flow.separator != ".":
        config["replication.policy.separator"] = flow.separator
    return config


def _topics(flow: MirrorFlow) -> dict[str, str]:
    return {"topics": ",".join(p.text for p in flow.topics),
            "topics.exclude": ",".join(flow.topics_exclude_all)}


def source_connector(state: DesiredState, flow: MirrorFlow) -> dict[str, str]:
    config = _flow_common(state, flow, "MirrorSourceConnector")
    config.update({
        "offset-syncs.topic.location": flow.offset_syncs_topic_location,
        "heartbeats.replication.enabled": _bool(flow.heartbeats),
        "replication.factor": "-1",
        "offset-syncs.topic.replication.factor": "-1",
        "sync.topic.configs.enabled": _bool(flow.sync_topic_configs),
        "sync.topic.acls.enabled": _bool(flow.sync_topic_acls),
        "refresh.topics.interval.seconds": str(flow.refresh_topics_interval_seconds),
        "offset.lag.max": str(flow.offset_lag_max),
    })
    if flow.exactly_once:
        config["consumer.isolation.level"] = "read_committed"
    config.update(_topics(flow))
    config.update({f"producer.override.{k}": v for k, v in flow.producer_overrides})
    config.update({f"consumer.{k}": v for k, v in flow.consumer_overrides})
    config.update(dict(flow.config))
    return config


def checkpoint_connector(state: DesiredState, flow: MirrorFlow) -> dict[str, str]:
    config = _flow_common(state, flow, "MirrorCheckpointConnector")
    config.update({
        "offset-syncs.topic.location": flow.offset_syncs_topic_location,
        "checkpoints.topic.replication.factor": "-1",
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": str(flow.emit_checkpoints_interval_seconds),
        "sync.group.offsets.enabled": _bool(flow.sync_group_offsets),
        "sync.group.offsets.interval.seconds": str(flow.sync_group_offsets_interval_seconds),
        "refresh.groups.interval.seconds": str(flow.refresh_groups_interval_seconds),
        "groups": ",".join(p.text for p in flow.groups),
        "groups.exclude": ",".join(flow.groups_exclude_all),
    })
    config.update(_topics(flow))
    config.update(dict(flow.config))
    return config


def heartbeat_connector(state: DesiredState, flow: MirrorFlow) -> dict[str, str]:
    config = _flow_common(state, flow, "MirrorHeartbeatConnector")
    config.update({"heartbeats.topic.replication.factor": "-1", "emit.heartbeats.enabled": "true"})
    config.update(dict(flow.config))
    return config


def connectors(state: DesiredState) -> list[dict]:
    """Every connector of every flow as ``{"name": ..., "config": {...}}``."""
    result = []
    for flow in state.mirrors:
        result.append({"name": flow.connector_name("Source"), "config": source_connector(state, flow)})
        if flow.groups:
            result.append({"name": flow.connector_name("Checkpoint"), "config": checkpoint_connector(state, flow)})
        if flow.heartbeats:
            result.append({"name": flow.connector_name("Heartbeat"), "config": heartbeat_connector(state, flow)})
    return result


# ---------------------------------------------------------------------------- dedicated-mode MM2

def mm2_properties(state: DesiredState) -> list[tuple[str, str]]:
    """mm2.properties for ``org.apache.kafka.connect.mirror.MirrorMaker``, every flow of the spec."""
    used = []
    for flow in state.mirrors:
        for alias in (flow.source, flow.target):
            if alias not in used:
                used.append(alias)
    props: list[tuple[str, str]] = [("clusters", ", ".join(used))]
    for alias in used:
        cluster = state.cluster(alias)
        props.append((f"{alias}.bootstrap.servers", cluster.bootstrap))
        props.extend((f"{alias}.{k}", v) for k, v in client_properties(cluster))
    props.extend(ENV_PROVIDER)
    props.extend([
        ("replication.factor", "-1"),
        ("checkpoints.topic.replication.factor", "-1"),
        ("heartbeats.topic.replication.factor", "-1"),
        ("offset-syncs.topic.replication.factor", "-1"),
        ("offset.storage.replication.factor", "-1"),
        ("status.storage.replication.factor", "-1"),
        ("config.storage.replication.factor", "-1"),
    ])
    if state.exactly_once:
        # Exactly-once in dedicated mode needs the internal REST server (KIP-710) for task configs.
        props.append(("dedicated.mode.enable.internal.rest", "true"))
    for flow in state.mirrors:
        f = f"{flow.source}->{flow.target}."
        props.extend([
            (f + "enabled", "true"),
            (f + "replication.policy.class", flow.policy_class),
            (f + "topics", ",".join(p.text for p in flow.topics)),
            (f + "topics.exclude", ",".join(flow.topics_exclude_all)),
            (f + "groups", ",".join(p.text for p in flow.groups)),
            (f + "groups.exclude", ",".join(flow.groups_exclude_all)),
            (f + "tasks.max", str(flow.tasks_max)),
            (f + "offset-syncs.topic.location", flow.offset_syncs_topic_location),
            (f + "sync.topic.configs.enabled", _bool(flow.sync_topic_configs)),
            (f + "sync.topic.acls.enabled", _bool(flow.sync_topic_acls)),
            (f + "emit.checkpoints.enabled", _bool(bool(flow.groups))),
            (f + "emit.checkpoints.interval.seconds", str(flow.emit_checkpoints_interval_seconds)),
            (f + "sync.group.offsets.enabled", _bool(flow.sync_group_offsets)),
            (f + "sync.group.offsets.interval.seconds", str(flow.sync_group_offsets_interval_seconds)),
            (f + "refresh.topics.interval.seconds", str(flow.refresh_topics_interval_seconds)),
            (f + "refresh.groups.interval.seconds", str(flow.refresh_groups_interval_seconds)),
            (f + "offset.lag.max", str(flow.offset_lag_max)),
            (f + "emit.heartbeats.enabled", _bool(flow.heartbeats)),
            (f + "heartbeats.replication.enabled", _bool(flow.heartbeats)),
        ])
        if flow.separator != ".":
            props.append((f + "replication.policy.separator", flow.separator))
        if flow.exactly_once:
            props.append((f"{flow.target}.exactly.once.source.support", "enabled"))
            props.append((f + "consumer.isolation.level", "read_committed"))
        props.extend((f + "producer.override." + k, v) for k, v in flow.producer_overrides)
        props.extend((f + k, v) for k, v in flow.config)
    return props


# ------------------------------------------------------------------------------------ Spark job

def spark_job_config(state: DesiredState) -> dict:
    """The Spark mirroring job's config: MM2 key names wherever MM2 has one (see spark/README.md)."""
    spark = state.spark
    spark_conf: dict = {
        "master": spark.master,
        "trigger.interval": spark.trigger_interval,
        "checkpoint.location": spark.checkpoint_location,
    }
    optional = {"max.offsets.per.trigger": spark.max_offsets_per_trigger,
                "executor.instances": spark.executor_instances,
                "executor.cores": spark.executor_cores,
                "executor.memory": spark.executor_memory}
    spark_conf.update({k: v for k, v in optional.items() if v is not None})
    if spark.config:
        spark_conf["conf"] = dict(spark.config)
    flows = []
    for flow in state.mirrors:
        source, target = state.cluster(flow.source), state.cluster(flow.target)
        entry = {
            "name": flow.name,
            "source.cluster.alias": flow.source,
            "target.cluster.alias": flow.target,
            "source.cluster.bootstrap.servers": source.bootstrap,
            "target.cluster.bootstrap.servers": target.bootstrap,
            "source.cluster.security.protocol": source.security.protocol,
            "target.cluster.security.protocol": target.security.protocol,
        }
        for prefix, cluster in (("source.cluster.", source), ("target.cluster.", target)):
            entry.update({prefix + k: v for k, v in client_properties(cluster) if k != "security.protocol"})
        entry.update({
            "topics": ",".join(p.text for p in flow.topics),
            "topics.exclude": ",".join(flow.topics_exclude_all),
            "groups": ",".join(p.text for p in flow.groups),
            "groups.exclude": ",".join(flow.groups_exclude_all),
            "replication.policy.class": flow.policy_class,
            "replication.policy.separator": flow.separator,
            "offset-syncs.topic.location": flow.offset_syncs_topic_location,
            "offset.lag.max": str(flow.offset_lag_max),
            "emit.checkpoints.enabled": _bool(bool(flow.groups)),
            "emit.checkpoints.interval.seconds": str(flow.emit_checkpoints_interval_seconds),
            "sync.group.offsets.enabled": _bool(flow.sync_group_offsets),
            "sync.group.offsets.interval.seconds": str(flow.sync_group_offsets_interval_seconds),
            "refresh.topics.interval.seconds": str(flow.refresh_topics_interval_seconds),
            "refresh.groups.interval.seconds": str(flow.refresh_groups_interval_seconds),
            "exactly.once.source.support": "enabled" if flow.exactly_once else "disabled",
            "sync.topic.configs.enabled": _bool(flow.sync_topic_configs),
        })
        entry.update({f"producer.override.{k}": v for k, v in flow.producer_overrides})
        entry.update({f"consumer.{k}": v for k, v in flow.consumer_overrides})
        flows.append(entry)
    return {"apiVersion": "mm2spec/v1", "name": state.name, "environment": state.environment,
            "spark": spark_conf, "flows": flows}


def anchor_checkpoint(job: dict, root: str | Path) -> dict:
    """The job config with a relative local ``checkpoint.location`` made absolute against ``root``.

    A relative location means "relative to the project root"; whoever starts the job (or compares a
    running job with the spec) anchors it the same way, so the two never differ by spelling alone.
    """
    spark = job.get("spark") or {}
    location = spark.get("checkpoint.location")
    if not location or "://" in location or Path(location).is_absolute():
        return job
    return {**job, "spark": {**spark, "checkpoint.location": str(Path(root) / location)}}


# ------------------------------------------------------------------------ internal topics / ACLs

def resources(state: DesiredState) -> dict:
    """Internal topics and ACL bindings as data (the JSON listing)."""
    return {
        "internalTopics": [
            {"cluster": t.cluster, "name": t.name, "partitions": t.partitions,
             "replicationFactor": t.replication_factor, "configs": dict(t.configs), "purpose": t.purpose}
            for t in state.internal_topics
        ],
        "aclsManaged": state.manage_acls,
        "aclBindings": [
            {"cluster": b.cluster, "principal": b.principal, "resourceType": b.resource_type,
             "resourceName": b.resource_name, "patternType": b.pattern_type, "operation": b.operation,
             "permission": b.permission, "host": b.host, "reason": b.reason}
            for b in state.acl_bindings
        ],
        "aclPatterns": [
            {"cluster": p.cluster, "principal": p.principal, "resourceType": p.resource_type,
             "sourceCluster": p.source_cluster, "regex": p.regex, "namePrefix": p.name_prefix,
             "operations": list(p.operations), "reason": p.reason,
             "note": "a regular expression cannot be an ACL: `mm2spec plan` resolves it against the live cluster"}
            for p in state.acl_patterns
        ],
    }


def resources_text(state: DesiredState) -> str:
    """Internal topics and ACL bindings as an aligned, human-readable listing."""
    lines = ["# Internal topics (replication factor -1 = broker default)"]
    for t in state.internal_topics:
        configs = ",".join(f"{k}={v}" for k, v in t.configs)
        lines.append(f"{t.cluster:<12} {t.name:<50} partitions={t.partitions:<3} rf=-1 {configs}  # {t.purpose}")
    lines.append("")
    managed = "managed" if state.manage_acls else "not managed (acls.manage: false)"
    lines.append(f"# ACL bindings for {state.principal}: {managed}")
    for b in sorted(state.acl_bindings, key=lambda b: (b.cluster, b.resource_type, b.resource_name, b.operation)):
        lines.append(f"{b.cluster:<12} {b.permission} {b.operation:<17} {b.resource_type:<16} "
                     f"{b.pattern_type:<8} {b.resource_name}  # {b.reason}")
    for p in state.acl_patterns:
        lines.append(f"{p.cluster:<12} ALLOW {'+'.join(p.operations)} {p.resource_type} matching /{p.regex}/ "
                     f"on {p.source_cluster} (prefix {p.name_prefix!r}): resolved by `mm2spec plan`  # {p.reason}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------- files

def _bool(value: bool) -> str:
    return "true" if value else "false"


def _escape_properties(text: str, is_key: bool) -> str:
    """java.util.Properties escaping: backslashes, and in keys also '=', ':' and spaces."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n")
    if is_key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    return out


def properties_text(props: list[tuple[str, str]], header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"{_escape_properties(k, True)}={_escape_properties(v, False)}" for k, v in props]
    return "\n".join(lines) + "\n"


def render_files(state: DesiredState) -> dict[str, str]:
    """File name -> content for everything ``mm2spec render`` writes."""
    env = state.environment or "base"
    header = (f"Rendered by mm2spec from {Path(state.source_file).name} (environment: {env}). Do not edit:\n"
              "change the DR spec and render again. Secrets are read from the environment (${env:NAME}).")
    files = {
        "connect-distributed.properties": properties_text(worker_properties(state), header),
        "mm2.properties": properties_text(mm2_properties(state), header),
        "spark-mirror.json": json.dumps(spark_job_config(state), indent=2) + "\n",
        "resources.json": json.dumps(resources(state), indent=2) + "\n",
        "resources.txt": resources_text(state),
    }
    for connector in connectors(state):
        files[f"{connector['name']}.json"] = json.dumps(connector, indent=2) + "\n"
    return files


def write_files(files: dict[str, str], out_dir: str | Path) -> list[Path]:
    """Write files atomically (temp file + rename), so a failed render never leaves half a file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in sorted(files.items()):
        path = out / name
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(path)
    return written
