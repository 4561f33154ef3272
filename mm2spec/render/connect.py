"""Kafka Connect and MirrorMaker 2 files: ``connect-distributed.properties`` (the worker settings of
Red Hat's guide "Setting up MirrorMaker for disaster recovery", section 5.6), one ``{"name", "config"}``
document per MM2 connector (the config part is what ``PUT /connectors/{name}/config`` takes), and
``mm2.properties`` for MM2's dedicated mode."""

from __future__ import annotations

import json

from mm2spec.errors import TlsInvalid
from mm2spec.mm2.policy import SEPARATOR_DEFAULT
from mm2spec.mm2.tls import java_properties
from mm2spec.render.properties import (BYTE_ARRAY_CONVERTER, client_properties, config_providers, kafka_bool,
                                       properties_text, rendered_header)
from mm2spec.spec.model import Cluster, DesiredState, MirrorFlow

WORKER_FILE = "connect-distributed.properties"
"""The Connect worker's properties file (render and Pulumi write it under this name)."""


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
    security = client_properties(cluster)
    # The worker's own clients take the top-level settings; the producers, consumers and admin
    # clients it creates for connectors only take prefixed ones.
    clients = list(security)
    for prefix in ("producer.", "consumer.", "admin."):
        clients.extend((prefix + key, value) for key, value in security)
    # The worker resolves its connectors' configs with its own providers: they count too.
    props.extend(config_providers(clients, connect.config, *(c["config"] for c in connectors(state))))
    props.extend(clients)
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
    if flow.target != state.connect.cluster:
        config.update(_producer_to_target(flow, state.cluster(state.connect.cluster), target))
    config["replication.policy.class"] = flow.policy_class
    if flow.separator != SEPARATOR_DEFAULT:  # MM2's default needs no key
        config["replication.policy.separator"] = flow.separator
    return config


def _producer_to_target(flow: MirrorFlow, worker: Cluster, target: Cluster) -> dict[str, str]:
    """A Connect worker's producers write to the worker's own cluster: MM2's connectors of a flow
    into another cluster (active-active: one Connect cluster runs both directions) would write the
    records, checkpoints and heartbeats there. Their producer overrides point them at the target
    (``connector.client.config.override.policy``, ``All`` by default); the worker's own offsets
    stay on its cluster. The protocol is always set, as the worker's own would apply otherwise."""
    props = {"bootstrap.servers": target.bootstrap, "security.protocol": target.security.protocol}
    props.update(client_properties(target))
    props.update(_tls_left_over(flow, worker, target, props))
    return {f"producer.override.{key}": value for key, value in props.items()}


_KEYSTORE_KEYS = ("ssl.keystore.", "ssl.key.password")


def _tls_left_over(flow: MirrorFlow, worker: Cluster, target: Cluster, override: dict[str, str]) -> dict[str, str]:
    """Connect merges a connector's producer overrides into the worker's ``producer.*`` settings: an
    override can replace a key, never remove one. The worker's TLS keys the target's do not replace
    would reach the producer to the target: hostname verification turned off is turned on again; a
    client certificate of the worker's is harmless where the target has none (it is offered only to a
    broker that asks); any other left-over key (a truststore of the wrong CA, a store password next to
    a PEM CA, a PEM key next to a keystore) makes a producer that cannot connect, refused here."""
    if not (worker.security.uses_tls and target.security.uses_tls):
        return {}  # a producer without TLS ignores every ssl.* key
    left = [k for k, _ in java_properties(worker.tls) if k not in override]
    fixed = {}
    if "ssl.endpoint.identification.algorithm" in left:
        left.remove("ssl.endpoint.identification.algorithm")
        fixed["ssl.endpoint.identification.algorithm"] = "https"
    if not any(k.startswith(_KEYSTORE_KEYS) for k in override):
        left = [k for k in left if not k.startswith(_KEYSTORE_KEYS)]
    if left:
        raise TlsInvalid(
            f'flow "{flow.name}": Connect\'s workers connect to cluster "{worker.alias}" and write this flow\'s records '
            f'to cluster "{target.alias}" through producer overrides, which cannot remove the worker\'s '
            f"{', '.join(sorted(left))}: give both clusters' tls the same form (ca on both or truststore on both; "
            f"certificate and key on both or keystore on both; a cluster verified with the system's CAs can name "
            f"their bundle as ca, e.g. /etc/ssl/certs/ca-certificates.crt)")
    return fixed


def _topics(flow: MirrorFlow) -> dict[str, str]:
    return {"topics": ",".join(flow.topic_selection),
            "topics.exclude": ",".join(flow.topics_exclude_all)}


def source_connector(state: DesiredState, flow: MirrorFlow) -> dict[str, str]:
    config = _flow_common(state, flow, "MirrorSourceConnector")
    config.update({
        "offset-syncs.topic.location": flow.offset_syncs_topic_location,
        "heartbeats.replication.enabled": kafka_bool(flow.heartbeats),
        "replication.factor": "-1",
        "offset-syncs.topic.replication.factor": "-1",
        "sync.topic.configs.enabled": kafka_bool(flow.sync_topic_configs),
        "sync.topic.acls.enabled": kafka_bool(flow.sync_topic_acls),
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
        "sync.group.offsets.enabled": kafka_bool(flow.sync_group_offsets),
        "sync.group.offsets.interval.seconds": str(flow.sync_group_offsets_interval_seconds),
        "refresh.groups.interval.seconds": str(flow.refresh_groups_interval_seconds),
        "groups": ",".join(flow.group_selection),
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
    providers_at = len(props)
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
            (f + "topics", ",".join(flow.topic_selection)),
            (f + "topics.exclude", ",".join(flow.topics_exclude_all)),
            (f + "groups", ",".join(flow.group_selection)),
            (f + "groups.exclude", ",".join(flow.groups_exclude_all)),
            (f + "tasks.max", str(flow.tasks_max)),
            (f + "offset-syncs.topic.location", flow.offset_syncs_topic_location),
            (f + "sync.topic.configs.enabled", kafka_bool(flow.sync_topic_configs)),
            (f + "sync.topic.acls.enabled", kafka_bool(flow.sync_topic_acls)),
            (f + "emit.checkpoints.enabled", kafka_bool(bool(flow.groups))),
            (f + "emit.checkpoints.interval.seconds", str(flow.emit_checkpoints_interval_seconds)),
            (f + "sync.group.offsets.enabled", kafka_bool(flow.sync_group_offsets)),
            (f + "sync.group.offsets.interval.seconds", str(flow.sync_group_offsets_interval_seconds)),
            (f + "refresh.topics.interval.seconds", str(flow.refresh_topics_interval_seconds)),
            (f + "refresh.groups.interval.seconds", str(flow.refresh_groups_interval_seconds)),
            (f + "offset.lag.max", str(flow.offset_lag_max)),
            (f + "emit.heartbeats.enabled", kafka_bool(flow.heartbeats)),
            (f + "heartbeats.replication.enabled", kafka_bool(flow.heartbeats)),
        ])
        if flow.separator != SEPARATOR_DEFAULT:  # MM2's default needs no key
            props.append((f + "replication.policy.separator", flow.separator))
        if flow.exactly_once:
            props.append((f"{flow.target}.exactly.once.source.support", "enabled"))
            props.append((f + "consumer.isolation.level", "read_committed"))
        props.extend((f + "producer.override." + k, v) for k, v in flow.producer_overrides)
        props.extend((f + k, v) for k, v in flow.config)
    props[providers_at:providers_at] = config_providers(props)
    return props


def engine_files(state: DesiredState) -> dict[str, str]:
    """Engine connect's deployment (its ``EngineFacts.renderer``): the worker's properties, MM2's
    dedicated-mode properties and one JSON document per connector."""
    header = rendered_header(state)
    files = {WORKER_FILE: properties_text(worker_properties(state), header),
             "mm2.properties": properties_text(mm2_properties(state), header)}
    for connector in connectors(state):
        files[f"{connector['name']}.json"] = json.dumps(connector, indent=2) + "\n"
    return files
