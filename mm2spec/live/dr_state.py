"""The durable DR-operation state, kept on the DR cluster itself (not on an operator's laptop).

Topic ``mm2spec.dr-state.internal`` on each flow's target cluster: compacted, one partition,
replication factor -1 (the broker's default). One record per flow, keyed ``<spec name>/<flow name>``
(two specs may both call a flow ``primary-to-dr``), its value a ``FailoverState`` as JSON; a
tombstone (failback) clears it. The ``.internal`` suffix keeps it out of every MM2 topic selection,
so no mirror copies it back.

Written by the failover playbook; read (``read_flow_states``) by the playbooks, ``mm2spec plan`` and
the Pulumi program, which leave a failed-over flow's forward mirror stopped.

The same topic keeps, keyed ``topic-ids/<spec name>/<flow name>``, the topic IDs each mirrored
source topic (and its DR copy) had when a check first saw them (``read_topic_ids``): a source topic
deleted and created again under the same name gets a new ID, which is how the loss check knows.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable

from confluent_kafka import KafkaError, KafkaException, Producer

from mm2spec.errors import KafkaOperationFailed, RecordMalformed
from mm2spec.live import KAFKA_REQUEST_TIMEOUT_S
from mm2spec.live.kafka import KafkaAdmin, SecretLookup, client_config, env_secrets
from mm2spec.live.records import RecordReader
from mm2spec.live.types import FailoverState
from mm2spec.spec.model import Cluster, DesiredState, MirrorFlow

STATE_TOPIC = "mm2spec.dr-state.internal"
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}


def _key(spec: str, flow: str) -> str:
    return f"{spec}/{flow}"


def read_states(cluster: Cluster, spec: str, secrets: SecretLookup = env_secrets) -> dict[str, FailoverState]:
    """The recorded state of every flow of spec ``spec`` whose target is ``cluster``, by flow name
    (none when the topic is absent)."""
    admin = KafkaAdmin(cluster, secrets)
    if not admin.topics([STATE_TOPIC], with_configs=False):
        return {}
    states: dict[str, FailoverState] = {}
    with RecordReader(cluster, secrets) as reader:
        for record in reader.read_topic(STATE_TOPIC):
            key = (record.key or b"").decode("utf-8", "replace")
            owner, _, flow = key.rpartition("/")
            if owner != spec:
                continue
            if record.value is None:
                states.pop(flow, None)
                continue
            try:
                states[flow] = FailoverState.from_json(json.loads(record.value))
            except (ValueError, KeyError, TypeError) as exc:
                raise RecordMalformed(f'cluster "{cluster.alias}": {STATE_TOPIC} holds an unreadable record for '
                                      f"flow {flow!r} at offset {record.offset} ({exc}); delete it or fix it "
                                      "before running a DR operation") from None
    return states


def read_flow_states(spec: DesiredState, flows: Iterable[MirrorFlow] | None = None,
                     secrets: SecretLookup = env_secrets, *,
                     cluster_secrets: Callable[[str], SecretLookup] | None = None) -> dict[str, FailoverState]:
    """Which flows are failed over (or switching): the recorded state of each of ``flows`` (default:
    every flow of ``spec``) that has one, by flow name in ``flows``' order.

    The one reader of the DR state for ``mm2spec plan``, the Pulumi program and the playbooks: each
    DR cluster that is the target of one of ``flows`` is read once, with ``secrets``, or with
    ``cluster_secrets(alias)`` where each cluster has its own lookup (the Pulumi program's passwords).
    """
    flows = list(spec.mirrors if flows is None else flows)
    found: dict[str, FailoverState] = {}
    for target in sorted({f.target for f in flows}):
        lookup = cluster_secrets(target) if cluster_secrets is not None else secrets
        found.update(read_states(spec.cluster(target), spec.name, lookup))
    return {f.name: found[f.name] for f in flows if f.name in found}


def topic_ids_key(spec: str, flow: str) -> str:
    """The key of a flow's recorded topic IDs (split at the last "/", it never reads as a flow's state)."""
    return f"topic-ids/{spec}/{flow}"


def read_topic_ids(cluster: Cluster, spec: str, flow: str, secrets: SecretLookup = env_secrets) -> dict[str, dict]:
    """The topic IDs recorded for a flow: per source topic ``{"source": ID, "dr": ID or None,
    "since": ms}`` (empty when none was recorded)."""
    admin = KafkaAdmin(cluster, secrets)
    if not admin.topics([STATE_TOPIC], with_configs=False):
        return {}
    wanted, found = topic_ids_key(spec, flow).encode(), {}
    with RecordReader(cluster, secrets) as reader:
        for record in reader.read_topic(STATE_TOPIC):
            if record.key != wanted:
                continue
            try:
                found = {} if record.value is None else dict(json.loads(record.value)["topics"])
            except (ValueError, KeyError, TypeError) as exc:
                raise RecordMalformed(f'cluster "{cluster.alias}": {STATE_TOPIC} holds an unreadable topic-ID record '
                                      f"for flow {flow!r} at offset {record.offset} ({exc}); delete it (it is "
                                      "recorded again by the next verify)") from None
    return found


def write_topic_ids(cluster: Cluster, spec: str, flow: str, topics: dict[str, dict],
                    secrets: SecretLookup = env_secrets) -> None:
    """Record (replace) a flow's topic IDs, as ``read_topic_ids`` returns them."""
    _produce(cluster, secrets, topic_ids_key(spec, flow),
             json.dumps({"formatVersion": 1, "topics": topics}, sort_keys=True).encode())


def _produce(cluster: Cluster, secrets: SecretLookup, key: str, value: bytes | None) -> None:
    admin = KafkaAdmin(cluster, secrets)
    admin.create_topic(STATE_TOPIC, 1, -1, STATE_TOPIC_CONFIGS, exist_ok=True)
    config = client_config(cluster, secrets)
    config.update({"acks": "all", "enable.idempotence": True})
    producer = Producer(config)
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message) -> None:
        if error is not None:
            failures.append(f"{error.name()}: {error.str()}")

    try:
        producer.produce(STATE_TOPIC, key=key.encode(), value=value, on_delivery=delivered)
        left = producer.flush(KAFKA_REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        failures.append(str(exc))
        left = 0
    if left:
        failures.append(f"not acknowledged within {KAFKA_REQUEST_TIMEOUT_S:.0f}s")
    if failures:
        raise KafkaOperationFailed(f'cluster "{cluster.alias}": recording DR state of flow {key} in {STATE_TOPIC}: '
                                   + "; ".join(failures))


def write_state(cluster: Cluster, state: FailoverState, secrets: SecretLookup = env_secrets) -> None:
    """Record (or replace) a flow's failover state on its DR cluster."""
    _produce(cluster, secrets, _key(state.spec, state.flow), json.dumps(state.to_json(), sort_keys=True).encode())


def clear_state(cluster: Cluster, spec: str, flow: str, secrets: SecretLookup = env_secrets) -> None:
    """Remove a flow's failover state (a tombstone; compaction drops the history)."""
    _produce(cluster, secrets, _key(spec, flow), None)
