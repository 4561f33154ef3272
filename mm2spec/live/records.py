"""Reading records and group offsets: what the DR playbooks need beyond the admin calls.

``RecordReader`` reads exact offset ranges of partitions with one assign-only consumer (no group,
nothing committed), so reading never changes a cluster; ``read_many`` and ``bounds`` read many
partitions at once (a failover's drain and translation: each cluster once, not once per partition).
``GroupOffsets`` reads and writes consumer-group offsets and members through the AdminClient.
Both raise ``ClusterUnreachable`` / ``KafkaOperationFailed`` naming the cluster, never a raw
client exception.
"""

from __future__ import annotations

import time
import uuid
from typing import Iterable, Iterator, Mapping

from confluent_kafka import (
    Consumer, ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from mm2spec.errors import ClusterUnreachable, KafkaOperationFailed
from mm2spec.live import KAFKA_REQUEST_TIMEOUT_S
from mm2spec.live.kafka import SecretLookup, client_config, env_secrets, retrying
from mm2spec.live.types import GroupState, Record
from mm2spec.mm2.retry import chunks
from mm2spec.spec.model import Cluster

# One fetch returns up to this many records: large enough to read a 100-record gap between two
# offset syncs in one round trip, small enough that a range read never pulls a whole partition.
_FETCH_BATCH = 500
# A request's future is waited on this much longer than the request's own timeout, so the client's
# error (which names the cause) arrives first.
_FUTURE_MARGIN_S = 5.0
# librdkafka reports "no offset committed" as -1001 (OFFSET_INVALID).
_NO_OFFSET = -1001
# How long the broker may hold a fetch that finds no new data. A reader prefetches past its range
# up to the log end, where the default (500 ms) long poll then holds the broker connection: the
# next range read (or watermark query) waits for it, 0.5 s each. Ranges read here already exist.
_FETCH_WAIT_MS = 10
# One consume() call's wait in a range read: the position is checked between calls (``messages``).
_CONSUME_WAIT_S = 0.05
# Records one consume() call may return when many partitions are read at once (``read_many``).
_BULK_BATCH = 5000
# How far ``last_records`` looks back from a partition's end for its last record, past transaction
# markers (an exactly-once writer leaves one per partition per transaction).
_LOOKBACK = 50
# The admin API takes one group per offsets request: this many are sent before the first answer
# is awaited, so 1,000 groups cost a few round trips instead of 1,000 (a failover reads and
# writes every selected group's offsets).
_GROUPS_IN_FLIGHT = 200


def _record(message) -> Record:
    kind, stamp = message.timestamp()
    headers = tuple(message.headers() or ())  # (key, value) tuples already
    return Record(message.topic(), message.partition(), message.offset(), message.key(), message.value(),
                  stamp if kind else -1, headers)


class RecordReader:
    """Reads offset ranges of partitions; ``read_committed`` skips aborted transactional records
    (what a consumer of an exactly-once mirror sees)."""

    def __init__(self, cluster: Cluster, secrets: SecretLookup = env_secrets, read_committed: bool = False,
                 timeout: float = KAFKA_REQUEST_TIMEOUT_S):
        self.cluster = cluster
        self.timeout = timeout
        config = client_config(cluster, secrets, admin=True)
        config.update({"group.id": f"mm2spec-reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                       "enable.partition.eof": False, "auto.offset.reset": "earliest",
                       "fetch.wait.max.ms": _FETCH_WAIT_MS,
                       "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
        self._consumer = Consumer(config)
        self._isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        self._admin_config = client_config(cluster, secrets, admin=True)
        self._admin: AdminClient | None = None  # for ``bounds``, made on first use

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> "RecordReader":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, end) offsets of a partition."""
        def call():
            return self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout, cached=False)
        try:
            found = retrying(call, f"offsets of {topic}-{partition}", self.cluster, unknown_topic_ok=True)
        except KafkaOperationFailed as exc:
            if "TRANSPORT" in str(exc) or "TIMED_OUT" in str(exc):
                raise ClusterUnreachable(f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) '
                                         f'is unreachable: {exc}') from None
            raise
        if found is None:
            raise ClusterUnreachable(f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) did not answer')
        return found

    def bounds(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """``watermarks`` of many partitions in two ListOffsets requests (earliest, latest), not a
        round trip each; the end is at the reader's isolation level, as ``watermarks``' (read
        committed: the last stable offset, past which such a reader gets nothing yet)."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        if self._admin is None:
            self._admin = AdminClient(self._admin_config)

        def offsets(spec: OffsetSpec) -> dict[tuple[str, int], int]:
            futures = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                               isolation_level=self._isolation, request_timeout=self.timeout)
            return {(tp.topic, tp.partition): future.result(timeout=self.timeout + _FUTURE_MARGIN_S).offset
                    for tp, future in futures.items()}
        try:
            low = retrying(lambda: offsets(OffsetSpec.earliest()), f"log-start offsets of {len(wanted)} partitions",
                           self.cluster)
            high = retrying(lambda: offsets(OffsetSpec.latest()), f"end offsets of {len(wanted)} partitions",
                            self.cluster)
        except TimeoutError:
            raise ClusterUnreachable(f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) did not answer '
                                     f"within {self.timeout + _FUTURE_MARGIN_S:.0f}s") from None
        except KafkaOperationFailed as exc:
            if "TRANSPORT" in str(exc) or "TIMED_OUT" in str(exc):
                raise ClusterUnreachable(f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) '
                                         f"is unreachable: {exc}") from None
            raise
        return {tp: (low[tp], high[tp]) for tp in wanted}

    def read(self, topic: str, partition: int, start: int, end: int) -> list[Record]:
        """Records at offsets ``start`` <= offset < ``end`` (fewer where the log has gaps:
        compaction, transaction markers, aborted records under read_committed)."""
        return list(self.iterate(topic, partition, start, end))

    def iterate(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        for message in self.messages(topic, partition, start, end):
            yield _record(message)

    def messages(self, topic: str, partition: int, start: int, end: int, batch: int = _FETCH_BATCH) -> Iterator:
        """The client's own messages of the range (a bulk copy passes them on without building a
        ``Record`` each); ``batch`` records per fetch at most."""
        return self._stream({(topic, partition): (start, end)}, batch)

    def read_many(self, ranges: Mapping[tuple[str, int], tuple[int, int]],
                  batch: int = _BULK_BATCH) -> dict[tuple[str, int], list[Record]]:
        """``read`` of one range per partition, all partitions at once with the one consumer: the
        brokers serve them together, and a range ending in transaction markers (which delivers
        nothing after its last record) waits for the others instead of alone. 60 partitions cost
        about what one read costs, not 60 round trips and 60 waits."""
        found: dict[tuple[str, int], list[Record]] = {tp: [] for tp in ranges}
        for message in self._stream(ranges, batch):
            found[(message.topic(), message.partition())].append(_record(message))
        return found

    def _stream(self, ranges: Mapping[tuple[str, int], tuple[int, int]], batch: int) -> Iterator:
        """Messages at ``start`` <= offset < ``end`` of each partition's range, in the order they
        arrive (in offset order within a partition)."""
        # Per partition still to read: [next offset wanted, end].
        pending = {tp: [start, end] for tp, (start, end) in ranges.items() if end > start}
        if not pending:
            return
        self._consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _end) in pending.items()])
        paused: list[TopicPartition] = []

        def finish(key: tuple[str, int]) -> None:
            del pending[key]
            paused.append(TopicPartition(*key))
            self._consumer.pause(paused[-1:])  # no more fetching past its end
        try:
            deadline = time.monotonic() + self.timeout
            while pending:
                # consume() waits until it has ``num_messages`` or the timeout passes: never ask for
                # more than the ranges still hold, or every short read would wait out the timeout.
                # The wait is short because a range that ends in transaction markers (every
                # partition an exactly-once writer commits to) delivers nothing more: consume()
                # moves the position past the markers and then waits out its timeout, which the
                # position check below ends.
                left = sum(end - position for position, end in pending.values())
                fetched = self._consumer.consume(max(1, min(batch, left)), timeout=_CONSUME_WAIT_S)
                if not fetched:
                    # Nothing came: either ranges end in markers/aborted records (the position moved
                    # past them) or the broker is slow. Ask where the consumer stands.
                    for tp in self._consumer.position([TopicPartition(t, p) for t, p in pending]):
                        if tp.offset >= pending[(tp.topic, tp.partition)][1]:
                            finish((tp.topic, tp.partition))
                    if pending and time.monotonic() > deadline:
                        (topic, partition), (position, end) = min(pending.items())
                        raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": reading {topic}-{partition} '
                                                   f"stopped at offset {position} before {end} "
                                                   f"(no records within {self.timeout:.0f}s)")
                    continue
                deadline = time.monotonic() + self.timeout
                for message in fetched:
                    if message.error():
                        if message.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": reading '
                                                   f"{message.topic()}-{message.partition()}: {message.error().str()}")
                    key = (message.topic(), message.partition())
                    span = pending.get(key)
                    if span is None:
                        continue  # fetched past a range already finished
                    if message.offset() >= span[1]:
                        finish(key)
                        continue
                    span[0] = message.offset() + 1
                    yield message
                    if span[0] >= span[1]:
                        finish(key)
        finally:
            # A partition stays paused across assignments: the next read of it would get nothing.
            if paused:
                self._consumer.resume(paused)
            self._consumer.unassign()

    def around(self, topic: str, partition: int, positions: Iterable[int], lookback: int = 64,
               batch: int = 5000) -> dict[int, tuple[Record | None, Record | None]]:
        """For each offset of ``positions``: the last record before it (within ``lookback`` offsets
        of the lowest) and the first record at or after it, from one sequential read of the span
        (many positions on one partition cost one pass, not a read each)."""
        wanted = sorted(set(positions))
        found: dict[int, tuple[Record | None, Record | None]] = {}
        if not wanted:
            return found
        low, high = self.watermarks(topic, partition)
        last, index = None, 0
        for message in self.messages(topic, partition, max(low, wanted[0] - lookback), min(high, wanted[-1] + 1), batch):
            while index < len(wanted) and wanted[index] <= message.offset():
                found[wanted[index]] = (last, _record(message))
                index += 1
            if index == len(wanted):
                break
            # Only records that may be the last one before the next position become Records.
            last = _record(message) if message.offset() + lookback >= wanted[index] else None
        for position in wanted[index:]:
            found[position] = (last, None)
        return found

    def last_record(self, topic: str, partition: int, end: int | None = None,
                    lookback: int = _LOOKBACK) -> Record | None:
        """The last record before ``end`` (default: the partition's end), looking back past
        transaction markers up to ``lookback`` offsets."""
        low, high = self.watermarks(topic, partition)
        end = high if end is None else end
        records = self.read(topic, partition, max(low, end - lookback), end)
        return records[-1] if records else None

    def read_topic(self, topic: str, partitions: int = 1) -> Iterator[Record]:
        """Every record of a (small, compacted) internal topic, from its start to its end now."""
        for partition in range(partitions):
            low, high = self.watermarks(topic, partition)
            yield from self.iterate(topic, partition, low, high)


def last_records(reader: RecordReader, partitions: Iterable[tuple[str, int]],
                 lookback: int = _LOOKBACK) -> dict[tuple[str, int], Record | None]:
    """``last_record`` of many partitions: their bounds in one request, their last ``lookback``
    offsets in one ``read_many`` (None: no record there, e.g. an empty partition)."""
    ends = reader.bounds(partitions)
    found = reader.read_many({tp: (max(low, high - lookback), high) for tp, (low, high) in ends.items()})
    return {tp: (found[tp][-1] if found.get(tp) else None) for tp in ends}


class GroupOffsets:
    """Consumer-group offsets and members on one cluster (AdminClient)."""

    def __init__(self, cluster: Cluster, secrets: SecretLookup = env_secrets, timeout: float = KAFKA_REQUEST_TIMEOUT_S):
        self.cluster = cluster
        self.timeout = timeout
        self._client = AdminClient(client_config(cluster, secrets))

    def _result(self, future, what: str):
        """A future's result, waiting a little longer than the request's own timeout so the client
        reports its error; a future that still has none is KafkaOperationFailed, never a traceback."""
        try:
            return future.result(timeout=self.timeout + _FUTURE_MARGIN_S)
        except TimeoutError:
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": {what}: no answer within '
                                       f"{self.timeout + _FUTURE_MARGIN_S:.0f}s") from None

    def groups(self) -> list[str]:
        def call():
            return self._result(self._client.list_consumer_groups(request_timeout=self.timeout), "list groups")
        try:
            listing = retrying(call, "list groups", self.cluster)
        except KafkaOperationFailed as exc:
            raise ClusterUnreachable(f'cluster "{self.cluster.alias}" ({self.cluster.bootstrap}) did not answer: {exc}') from None
        return sorted(g.group_id for g in listing.valid)

    def describe(self, groups: Iterable[str]) -> dict[str, GroupState]:
        """Committed offsets and active members of each group (absent groups: empty offsets)."""
        names = sorted(set(groups))
        if not names:
            return {}
        members = self._members(names)
        listed = self._each_group(names, lambda name: self._client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(name)], request_timeout=self.timeout)[name], "offsets of group {}")
        out = {}
        for name in names:
            found = listed[name]
            offsets = {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions or ()
                       if tp.offset >= 0 and tp.offset != _NO_OFFSET}
            state, active = members.get(name, ("", ()))
            out[name] = GroupState(name, offsets, active, state)
        return out

    def _each_group(self, names: list[str], send, what: str) -> dict:
        """``send(name)``'s answer for each group: ``_GROUPS_IN_FLIGHT`` requests sent at a time; a
        group whose request failed is sent again alone, retried while the error is retriable."""
        answers = {}
        for chunk in chunks(names, budget=_GROUPS_IN_FLIGHT):
            futures = {name: send(name) for name in chunk}
            for name, future in futures.items():
                try:
                    answers[name] = self._result(future, what.format(name))
                except KafkaException:
                    answers[name] = retrying(lambda name=name: self._result(send(name), what.format(name)),
                                             what.format(name), self.cluster)
        return answers

    def _members(self, names: list[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
        def call():
            futures = self._client.describe_consumer_groups(names, request_timeout=self.timeout)
            return {g: self._result(f, f"describe group {g}") for g, f in futures.items()}
        described = retrying(call, "describe groups", self.cluster)
        return {g: (getattr(d.state, "name", str(d.state)),
                    tuple(sorted(f"{m.client_id}@{m.host}" for m in d.members or ())))
                for g, d in described.items()}

    def commit(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Set a group's offsets (AlterConsumerGroupOffsets; the broker refuses while it has members)."""
        if not offsets:
            return
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]

        def call():
            request = [ConsumerGroupTopicPartitions(group, partitions)]
            return self._result(self._client.alter_consumer_group_offsets(request, request_timeout=self.timeout)[group],
                                f"commit offsets of group {group}")
        result = retrying(call, f"commit offsets of group {group}", self.cluster)
        failed = [f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in result.topic_partitions or () if tp.error]
        if failed:
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": commit offsets of group {group}: ' + "; ".join(failed))

    def commit_many(self, offsets: Mapping[str, Mapping[tuple[str, int], int]]) -> None:
        """``commit`` for many groups, their requests in flight together (``_GROUPS_IN_FLIGHT``);
        every group is tried, then the failures are raised together."""
        wanted = {group: [TopicPartition(t, p, o) for (t, p), o in sorted(found.items())]
                  for group, found in offsets.items() if found}
        results = self._each_group(sorted(wanted), lambda group: self._client.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, wanted[group])], request_timeout=self.timeout)[group],
            "commit offsets of group {}")
        failed = [f"{group}: " + "; ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in bad)
                  for group, result in results.items()
                  if (bad := [tp for tp in result.topic_partitions or () if tp.error])]
        if failed:
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": commit offsets of '
                                       f"{len(failed)} groups: " + " | ".join(failed[:10]))

    def delete_offsets(self, group: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Forget a group's committed offsets on these partitions (DeleteConsumerGroupOffsets; the
        broker refuses while the group consumes them). Partitions never committed are fine."""
        wanted = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
        if not wanted or group not in self.groups():
            return

        def call():
            request = [ConsumerGroupTopicPartitions(group, wanted)]
            return self._result(self._client.delete_consumer_group_offsets(request, request_timeout=self.timeout)[group],
                                f"delete offsets of group {group}")
        result = retrying(call, f"delete offsets of group {group}", self.cluster)
        failed = [f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in result.topic_partitions or ()
                  if tp.error and tp.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART]
        if failed:
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": delete offsets of group {group}: ' + "; ".join(failed))
