"""Data for the local demo: seed the example's source topics, then check what arrived on the target.

    mm2spec dev seed SPEC --env dev [--records 3000]
    mm2spec dev wait-mirrored SPEC --env dev [--timeout 180]

``seed`` creates the source topics the spec's patterns name (plain names and one topic per
prefix), produces keyed records with headers, and commits offsets for the spec's literal groups.
``wait_mirrored`` waits until every mirrored partition on the target holds as many records as its source
partition (per the replication policy's names) and prints a table; exit 1 if it never does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live.kafka import KafkaAdmin, client_config
from mm2spec.spec.model import DesiredState

PARTITIONS = 3
# A fresh cluster's group coordinator loads its partition in about a second; a minute means the
# cluster is unwell. Retry twice a second meanwhile.
COORDINATOR_WAIT_S = 60.0
COORDINATOR_RETRY_S = 0.5
# Counting end offsets costs two ListOffsets per topic; every 2 s is plenty for a wait of minutes.
COUNT_POLL_S = 2.0
# Delivery of a few thousand demo records takes well under a second; a minute means a broken cluster.
FLUSH_TIMEOUT_S = 60.0


def _source_topics(state: DesiredState) -> dict[str, list[str]]:
    """Per source cluster, the demo topics: literal names, and ``<prefix>demo`` for prefixes."""
    topics: dict[str, list[str]] = {}
    for flow in state.mirrors:
        names = [p.value if p.kind == "literal" else p.value + "demo" for p in flow.topics
                 if p.kind in ("literal", "prefix") and p.value != "*"]
        topics.setdefault(flow.source, [])
        topics[flow.source] += [n for n in names if n not in topics[flow.source]]
    return topics


def _end_offsets(admin: KafkaAdmin, topic: str) -> list[int]:
    """End offsets per partition; empty while the topic does not exist yet (e.g. on the target)."""
    live = admin.topics(names=[topic], with_configs=False).get(topic)
    return admin.end_offsets(topic, live.partitions) if live else []


def seed(state: DesiredState, records: int) -> Iterator[str]:
    """Create and fill the source topics; yields a line per step for the caller to show."""
    for alias, names in _source_topics(state).items():
        cluster = state.cluster(alias)
        admin = KafkaAdmin(cluster)
        existing = admin.topics(names=names)
        for name in names:
            if name not in existing:
                admin.create_topic(name, PARTITIONS, -1, {})
        producer = Producer({**client_config(cluster), "linger.ms": 20})
        for name in names:
            for i in range(records):
                producer.produce(name, key=f"key-{i % 97}".encode(), value=f"{name} record {i}".encode(),
                                 headers=[("source", alias.encode()), ("seq", str(i).encode())])
                if i % 1000 == 0:
                    producer.poll(0)
        if producer.flush(FLUSH_TIMEOUT_S):
            raise KafkaOperationFailed(f"cluster {alias}: records were not all delivered within {FLUSH_TIMEOUT_S:.0f} s")
        yield f"seeded {alias}: {', '.join(names)} ({records} records each, {PARTITIONS} partitions)"
        yield from _commit_groups(state, alias, names)
    yield from _probe_topics(state)


def _probe_topics(state: DesiredState) -> Iterator[str]:
    """Each flow's probe topic on its source, empty, as provisioning creates it with the internal
    topics (the mirror carries it from its start, so a drill need not wait for a topic refresh)."""
    for flow in state.mirrors:
        admin = KafkaAdmin(state.cluster(flow.source))
        if not admin.topics(names=[flow.probe_topic], with_configs=False):
            admin.create_topic(flow.probe_topic, PARTITIONS, -1, {})
            yield f"probe topic {flow.probe_topic} on {flow.source} (the drill's, always mirrored)"


def _commit_groups(state: DesiredState, alias: str, names: list[str]) -> Iterator[str]:
    """Commit offsets half-way through each topic for the spec's literal groups (idle afterwards)."""
    config = client_config(state.cluster(alias))
    admin = KafkaAdmin(state.cluster(alias))
    for flow in state.mirrors:
        if flow.source != alias:
            continue
        for group in (p.value for p in flow.groups if p.kind == "literal"):
            consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
            offsets = [TopicPartition(n, p, end // 2) for n in names
                       for p, end in enumerate(_end_offsets(admin, n))]
            try:
                _commit_when_coordinator_ready(consumer, offsets)
            finally:
                consumer.close()
            yield f"group {group} on {alias}: committed offsets half-way through {len(names)} topics"


def _commit_when_coordinator_ready(consumer: Consumer, offsets: list, timeout: float = COORDINATOR_WAIT_S) -> None:
    """Commit, retrying while a freshly started cluster's group coordinator is still loading."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                            KafkaError.COORDINATOR_NOT_AVAILABLE) or time.monotonic() > deadline:
                raise KafkaOperationFailed(f"commit offsets for {len(offsets)} partitions: {exc}") from None
            time.sleep(COORDINATOR_RETRY_S)


@dataclass(frozen=True)
class MirroredCount:
    """Records of one mirrored topic on its source and on the target."""

    flow: str
    source_topic: str
    target_topic: str
    source_records: int
    target_records: int


def wait_mirrored(state: DesiredState, timeout: float) -> tuple[bool, list[MirroredCount]]:
    """Wait until every demo topic's partitions on the target hold as many records as on the
    source; (caught up, the last counts)."""
    deadline = time.monotonic() + timeout
    while True:
        rows, complete = [], True
        for flow in state.mirrors:
            source_admin, target_admin = KafkaAdmin(state.cluster(flow.source)), KafkaAdmin(state.cluster(flow.target))
            for name in _source_topics(state).get(flow.source, []):
                source = _end_offsets(source_admin, name)
                target = _end_offsets(target_admin, flow.target_topic(name))
                rows.append(MirroredCount(flow.name, name, flow.target_topic(name), sum(source), sum(target)))
                complete &= target == source
        if complete or time.monotonic() > deadline:
            return complete, rows
        time.sleep(COUNT_POLL_S)
