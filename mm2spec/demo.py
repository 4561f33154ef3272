"""Data for the local demo: seed the example's source topics, then check what arrived on the target.

    python -m mm2spec.demo seed SPEC --env dev [--records 3000]
    python -m mm2spec.demo verify SPEC --env dev [--timeout 180]

``seed`` creates the source topics the spec's patterns name (plain names and one topic per
prefix), produces keyed records with headers, and commits offsets for the spec's literal groups.
``verify`` waits until every mirrored partition on the target holds as many records as its source
partition (per the replication policy's names) and prints a table; exit 1 if it never does.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mm2spec.compile import load_desired_state
from mm2spec.errors import Mm2specError
from mm2spec.kafka import KafkaAdmin, client_config
from mm2spec.model import DesiredState

PARTITIONS = 3


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


def seed(state: DesiredState, records: int) -> None:
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
        if producer.flush(60):
            raise Mm2specError(f"cluster {alias}: records were not all delivered within 60 s")
        print(f"seeded {alias}: {', '.join(names)} ({records} records each, {PARTITIONS} partitions)")
        _commit_groups(state, alias, names)


def _commit_groups(state: DesiredState, alias: str, names: list[str]) -> None:
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
            print(f"group {group} on {alias}: committed offsets half-way through {len(names)} topics")


def _commit_when_coordinator_ready(consumer: Consumer, offsets: list, timeout: float = 60.0) -> None:
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
                raise
            time.sleep(0.5)


def verify(state: DesiredState, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    rows: list[tuple] = []
    while True:
        rows, complete = [], True
        for flow in state.mirrors:
            source_admin, target_admin = KafkaAdmin(state.cluster(flow.source)), KafkaAdmin(state.cluster(flow.target))
            for name in _source_topics(state).get(flow.source, []):
                source = _end_offsets(source_admin, name)
                target = _end_offsets(target_admin, flow.target_topic(name))
                rows.append((flow.name, name, flow.target_topic(name), sum(source), sum(target)))
                complete &= target == source
        if complete or time.monotonic() > deadline:
            break
        time.sleep(2)
    print(f"{'flow':<16} {'source topic':<18} {'target topic':<24} {'source':>8} {'target':>8}")
    for flow, name, target_name, source_count, target_count in rows:
        print(f"{flow:<16} {name:<18} {target_name:<24} {source_count:>8} {target_count:>8}")
    return complete


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mm2spec.demo")
    parser.add_argument("action", choices=["seed", "verify"])
    parser.add_argument("spec")
    parser.add_argument("--env")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args(argv)
    try:
        state = load_desired_state(args.spec, args.env)
        if args.action == "seed":
            seed(state, args.records)
            return 0
        if verify(state, args.timeout):
            print("every mirrored partition holds as many records as its source")
            return 0
        print(f"error: the target did not catch up within {args.timeout:.0f} s", file=sys.stderr)
        return 1
    except (Mm2specError, KafkaException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
