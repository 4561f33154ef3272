"""The job's own Kafka client work (confluent-kafka), on the driver: topic metadata and creation,
end offsets, consumer groups, internal topics. Futures are resolved here and nowhere else; a
failure is raised as mm2spec's ``ClusterUnreachable`` or ``KafkaOperationFailed``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic,
                                   OffsetSpec)

from mm2spark.config import ClusterConnection
from mm2spark.records import OffsetSync
from mm2spec.errors import ClusterUnreachable, KafkaOperationFailed
from mm2spec.mm2.retry import (IDEMPOTENT_RETRIABLE, MAX_RESOURCES_PER_DESCRIBE, LeaderLossWatch, chunks, is_retriable,
                               retry_call, retry_each)
from mm2spec.mm2.selection import config_synced

log = logging.getLogger("mm2spark.kafka")

TIMEOUT = 30.0
#: While librdkafka's queue is full, serve delivery reports for this long before producing again.
QUEUE_FULL_POLL_S = 0.1
#: What a ListOffsets of a partition whose leader is still taking it over answers, besides the retriable
#: errors of ``mm2.retry``: the client's leader epoch (from metadata) is newer than the broker's (seen on
#: 1,000 new partitions), or older, or the new leader has no offsets to give yet. Kafka retries all three.
LEADER_ON_ITS_WAY = frozenset({"UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE"})


def admin(conn: ClusterConnection) -> AdminClient:
    return AdminClient({**conn.librdkafka(), "client.id": f"mm2spark-admin-{conn.alias}"})


def _result(future, what: str, timeout: float = TIMEOUT):
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        raise KafkaOperationFailed(f"{what}: {exc.args[0] if exc.args else exc}") from None


def partition_counts(client: AdminClient, topics: Iterable[str] | None = None) -> dict[str, int]:
    """Partition count of each existing topic (all topics when ``topics`` is None)."""
    try:
        metadata = client.list_topics(timeout=TIMEOUT)
    except KafkaException as exc:
        raise ClusterUnreachable(f"the cluster did not answer a metadata request: "
                                 f"{exc.args[0] if exc.args else exc}") from None
    wanted = None if topics is None else set(topics)
    return {name: len(t.partitions) for name, t in metadata.topics.items()
            if t.error is None and (wanted is None or name in wanted)}


def dynamic_topic_configs(client: AdminClient, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """Configs set on each topic itself (not broker defaults), minus those MM2 never copies."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    if not resources:
        return {}
    configs: dict[str, dict[str, str]] = {}
    futures = {}
    # Chunked as mm2spec.live does: one DescribeConfigs of thousands of topics can run a broker out of heap.
    for chunk in chunks(resources, budget=MAX_RESOURCES_PER_DESCRIBE):
        futures.update(client.describe_configs(chunk, request_timeout=TIMEOUT))
    for resource, future in futures.items():
        entries = _result(future, f"describe configs of topic {resource.name}")
        configs[resource.name] = {
            name: entry.value for name, entry in entries.items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and config_synced(name)
            and entry.value is not None and not entry.is_sensitive
        }
    return configs


def ensure_topics(client: AdminClient, wanted: dict[str, int], configs: dict[str, dict[str, str]] | None = None,
                  existing: dict[str, int] | None = None) -> dict[str, int]:
    """Create missing topics and add missing partitions; replication factor -1 = broker default.

    ``wanted`` maps topic -> minimum partition count. Returns the partition counts afterwards.
    """
    existing = dict(existing if existing is not None else partition_counts(client, wanted))
    new = [NewTopic(t, num_partitions=n, replication_factor=-1, config=(configs or {}).get(t, {}))
           for t, n in wanted.items() if t not in existing]
    # Chunked as mm2spec.live does: one CreateTopics for 10,000 topics exceeds what a broker accepts.
    for chunk in chunks(new, weight=lambda t: 1 + t.num_partitions + len(t.config or {})):
        for topic, future in client.create_topics(chunk, operation_timeout=TIMEOUT).items():
            try:
                future.result(timeout=TIMEOUT)
                log.info("created topic %s (%d partitions, replication factor: broker default)", topic, wanted[topic])
            except KafkaException as exc:
                if exc.args and exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
                    continue
                raise KafkaOperationFailed(f"create topic {topic}: {exc.args[0] if exc.args else exc}") from None
            existing[topic] = wanted[topic]
    grow = [NewPartitions(t, n) for t, n in wanted.items() if t in existing and existing[t] < n]
    for chunk in chunks(grow, weight=lambda g: g.new_total_count):
        for topic, future in client.create_partitions(chunk, operation_timeout=TIMEOUT).items():
            _result(future, f"add partitions to {topic}")
            log.info("topic %s now has %d partitions (as upstream)", topic, wanted[topic])
            existing[topic] = wanted[topic]
    if new or grow:
        _await_metadata(client, {t: wanted[t] for t in [n.topic for n in new] + [g.topic for g in grow]})
    return existing


def _await_metadata(client: AdminClient, wanted: dict[str, int], timeout: float = TIMEOUT) -> None:
    """Return once every topic of ``wanted`` shows its partitions in metadata. Gives up only after
    ``timeout`` without progress: a broker brings 10,000 new topics online in minutes, so a flat
    deadline would fail the job's first batch on them (and every retry would ask again)."""
    pending = dict(wanted)
    deadline, pause = time.monotonic() + timeout, 0.1
    while True:
        counts = partition_counts(client, pending)
        still = {t: n for t, n in pending.items() if counts.get(t, 0) < n}
        if not still:
            return
        if len(still) < len(pending):
            deadline = time.monotonic() + timeout
        pending = still
        if time.monotonic() > deadline:
            shown = ", ".join(sorted(pending)[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")
            raise KafkaOperationFailed(f"{len(pending)} new topic(s) made no progress to appear in metadata "
                                       f"in {timeout:.0f}s: {shown}")
        time.sleep(pause)
        pause = min(pause * 2, 1.0)  # each look lists every topic of the cluster: not 10 times a second


def await_leaders(client: AdminClient, partitions: Iterable[tuple[str, int]], timeout: float = TIMEOUT) -> None:
    """Return once the leader of every partition answers for it: a ListOffsets of it succeeds.

    A broker names a new partition's leader in its metadata before that leader hosts it, and until
    then refuses produce requests for it (NOT_LEADER_OR_FOLLOWER): for seconds when hundreds of
    partitions are created at once (1,000 took 3-14 s on the dev broker). A producer with several
    requests in flight meanwhile can have a later batch appended first (the broker takes any first
    sequence number from a producer it has no state for) and the first batch refused for good
    (OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms: KAFKA-15591, fixed in brokers 4.5). So
    the job sends to no partition before its leader answers. Gives up with KafkaOperationFailed after
    ``timeout`` without progress (a bound on a stall: thousands of partitions come online over minutes).
    """
    failed: dict[tuple[str, int], BaseException] = {}

    def attempt(pending: list[tuple[str, int]]) -> dict[tuple[str, int], BaseException]:
        failed.clear()
        for chunk in chunks(pending, budget=MAX_RESOURCES_PER_DESCRIBE):
            request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in chunk}
            for tp, future in client.list_offsets(request, request_timeout=TIMEOUT).items():
                try:
                    future.result(timeout=TIMEOUT)
                except KafkaException as exc:
                    failed[(tp.topic, tp.partition)] = exc
        return dict(failed)

    try:
        # ListOffsets is a read: one that timed out can be sent again.
        left = retry_each(attempt, sorted(set(partitions)), unknown_topic_ok=True, stall_s=timeout,
                          also=IDEMPOTENT_RETRIABLE | LEADER_ON_ITS_WAY)
    except KafkaException as exc:  # not retriable, e.g. not authorized
        topic, partition = next((tp for tp, e in failed.items() if e is exc), ("?", -1))
        raise KafkaOperationFailed(f"list offsets of {topic}-{partition}: {exc.args[0] if exc.args else exc}") from None
    if left:
        (topic, partition), exc = next(iter(sorted(left.items())))
        more = f" and {len(left) - 1} more" if len(left) > 1 else ""
        raise KafkaOperationFailed(f"{len(left)} target partition(s) made no progress to a leader that answers in "
                                   f"{timeout:.0f}s: {topic}-{partition} ({exc.args[0] if exc.args else exc}){more}")


def ensure_internal_topic(client: AdminClient, topic: str) -> None:
    """MM2's offset-syncs and checkpoints topics: one partition, compacted, broker-default RF."""
    ensure_topics(client, {topic: 1}, {topic: {"cleanup.policy": "compact"}})


def end_offsets(client: AdminClient, partitions: Iterable[tuple[str, int]], earliest: bool = False) -> dict[tuple[str, int], int]:
    """Latest (or earliest) offsets in one ListOffsets round; read_uncommitted (the high watermark)."""
    request = {TopicPartition(t, p): (OffsetSpec.earliest() if earliest else OffsetSpec.latest())
               for t, p in partitions}
    if not request:
        return {}
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + TIMEOUT
    while request:
        retry = {}
        for tp, future in client.list_offsets(request, request_timeout=TIMEOUT).items():
            try:
                out[(tp.topic, tp.partition)] = future.result(timeout=TIMEOUT).offset
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                # A partition created a moment ago may not have a leader everywhere yet.
                if is_retriable(exc, unknown_topic_ok=True) and time.monotonic() < deadline:
                    retry[tp] = request[tp]
                else:
                    raise KafkaOperationFailed(f"list offsets of {tp.topic}-{tp.partition}: {error or exc}") from None
        request = retry
        if request:
            time.sleep(0.2)
    return out


def group_offsets(client: AdminClient, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT)
    result = _result(futures[group], f"list offsets of group {group}")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def list_groups(client: AdminClient) -> list[str]:
    result = _result(client.list_consumer_groups(request_timeout=TIMEOUT), "list consumer groups")
    return sorted(g.group_id for g in result.valid)


def group_states(client: AdminClient, groups: list[str]) -> dict[str, tuple[str, int]]:
    """(state name, member count) of each group; a group that does not exist reads as DEAD."""
    if not groups:
        return {}
    out = {}
    for group, future in client.describe_consumer_groups(groups, request_timeout=TIMEOUT).items():
        try:
            description = future.result(timeout=TIMEOUT)
            out[group] = (description.state.name, len(description.members))
        except KafkaException as exc:
            if exc.args and exc.args[0].name() in ("GROUP_ID_NOT_FOUND",):
                out[group] = ("DEAD", 0)
            else:
                raise KafkaOperationFailed(f"describe group {group}: {exc.args[0]}") from None
    return out


def alter_group_offsets(client: AdminClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
    futures = client.alter_consumer_group_offsets([request], request_timeout=TIMEOUT)
    _result(futures[group], f"commit translated offsets for group {group}")


class InternalProducer:
    """The producer of MM2's internal records (offset syncs, checkpoints) on one cluster: idempotent,
    acks=all, for the job's whole life, which a librdkafka client cannot always last.

    librdkafka leaves a partition whose leader it saw as -1 (its only broker restarting) without a
    leader for good (``mm2.retry.LOST_LEADER_TEXT``): the client would queue every later offset sync
    and never send one. ``client()`` watches the client's log for that and then replaces it; the
    records it still held are dropped (each reported to its delivery callback as purged) and counted
    in ``dropped``: the next batches write newer syncs and checkpoints.
    """

    def __init__(self, conn: ClusterConnection):
        self.conn = conn
        self.replaced = 0
        self.dropped = 0
        self._watch, self._client = self._new()

    def _new(self) -> tuple[LeaderLossWatch, Producer]:
        name = f"mm2spark-internal-{self.conn.alias}"
        watch = LeaderLossWatch(name, log)
        return watch, Producer({**self.conn.librdkafka(), "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                "client.id": name, "logger": watch.logger})

    def client(self) -> Producer:
        """The client to send with now: the current one, or a new one if it lost a leader for good."""
        self._client.poll(0)  # hands its log over (and serves delivery reports)
        if self._watch.lost:
            held = len(self._client)
            self._client.purge(in_queue=True, in_flight=True)
            self._client.flush(0)  # the purged records' delivery reports
            self.replaced += 1
            self.dropped += held
            log.warning("%s: librdkafka lost a partition leader for good after a broker restart (librdkafka "
                        "issue 5430); a new producer replaces it, %d records it held are dropped",
                        self.conn.alias, held)
            self._watch, self._client = self._new()
        return self._client

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery) -> None:
        """Queues one record for partition 0; while librdkafka's queue is full, serves delivery
        reports and tries again (on a new client if this one lost a leader for good: it would never
        drain)."""
        while True:
            try:
                self.client().produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
                return
            except BufferError:
                self.client().poll(QUEUE_FULL_POLL_S)

    def poll(self, timeout: float) -> int:
        return self.client().poll(timeout)

    def flush(self, timeout: float) -> int:
        """Waits for what the client holds; returns how many records are left (see ``Producer.flush``)."""
        return self.client().flush(timeout)


def internal_producer(conn: ClusterConnection) -> InternalProducer:
    """For MM2's internal records (offset syncs, checkpoints): idempotent, acks=all, replaced when
    its client wedges (``InternalProducer``)."""
    return InternalProducer(conn)


def produce_all(producer: InternalProducer, topic: str, records: Iterable[tuple[bytes, bytes]]) -> int:
    """Write and wait for every record; raises if any failed."""
    errors: list = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    count = 0
    for key, value in records:
        producer.produce(topic, key, value, delivered)
        count += 1
    remaining = producer.flush(TIMEOUT)
    if remaining or errors:
        raise KafkaOperationFailed(f"writing to {topic}: {errors[0] if errors else f'{remaining} records not acknowledged'}")
    return count


def produce_nowait(producer: InternalProducer, topic: str, key: bytes, value: bytes, on_failure) -> None:
    """Queue one record for partition 0 without waiting; ``on_failure(message)`` if its delivery fails."""

    def delivered(err, _msg):
        if err is not None:
            on_failure(str(err))

    producer.produce(topic, key, value, delivered)


def read_compacted(conn: ClusterConnection, topic: str, timeout: float = 60.0) -> list[tuple[bytes, bytes]]:
    """Every record of a one-partition internal topic, from the beginning to the current end."""
    consumer = Consumer({**conn.librdkafka(), "group.id": "mm2spark-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "client.id": f"mm2spark-reader-{conn.alias}"})
    try:
        # Right after the topic is created its leader may not be known yet (seen at start under load).
        low, high = retry_call(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT),
                               unknown_topic_ok=True)
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, 0, low)])
        records: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        position = low
        while position < high and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10000, timeout=1.0):
                if msg.error():
                    continue
                position = msg.offset() + 1
                if msg.key() is not None and msg.value() is not None:
                    records.append((msg.key(), msg.value()))
            if position < high:
                position = max(position, consumer.position([TopicPartition(topic, 0)])[0].offset)
        return records
    finally:
        consumer.close()


def load_offset_syncs(conn: ClusterConnection, topic: str) -> list[OffsetSync]:
    syncs = []
    for key, value in read_compacted(conn, topic):
        try:
            syncs.append(OffsetSync.from_record(key, value))
        except (ValueError, IndexError, Exception):  # noqa: BLE001 - a foreign record must not stop the mirror
            log.warning("skipping an unreadable record in %s", topic)
    return syncs


class SyncTail(threading.Thread):
    """Reads the offset syncs other writers append to ``topic`` as they are written (Real-time Mode:
    the executors' tasks write them, mm2spec.spark.SyncWriter) and hands each poll's syncs to
    ``on_syncs``: the driver's store, which the checkpoints translate with. Starts at the topic's
    end: what was there before was read at start (``load_offset_syncs``)."""

    def __init__(self, conn: ClusterConnection, topic: str, on_syncs):
        super().__init__(name=f"mm2spark-sync-tail-{topic}", daemon=True)
        self._on_syncs = on_syncs
        # not ``_stop``: threading.Thread's own method of that name runs when a join sees the thread end
        self.stopping = threading.Event()
        self._consumer = Consumer({**conn.librdkafka(), "group.id": "mm2spark-reader", "enable.auto.commit": False,
                                   "isolation.level": "read_committed", "client.id": f"mm2spark-sync-tail-{conn.alias}"})
        _low, high = retry_call(lambda: self._consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT),
                                unknown_topic_ok=True)
        self._consumer.assign([TopicPartition(topic, 0, high)])
        self.topic = topic

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                syncs = []
                for msg in self._consumer.consume(num_messages=10000, timeout=0.5):
                    if msg.error() or msg.key() is None or msg.value() is None:
                        continue
                    try:
                        syncs.append(OffsetSync.from_record(msg.key(), msg.value()))
                    except Exception:  # noqa: BLE001 - a foreign record must not stop the mirror
                        log.warning("skipping an unreadable record in %s", self.topic)
                if syncs:
                    self._on_syncs(syncs)
        finally:
            self._consumer.close()

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        self.join(timeout)
