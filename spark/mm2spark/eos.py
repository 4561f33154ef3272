"""The exactly-once writer: one Kafka transaction per source partition per micro-batch.

Spark's Kafka sink is at-least-once: a replayed micro-batch writes its records again. This writer
runs on the executors instead and, for each source partition in a batch:

1. uses a transactional producer whose ``transactional.id`` is derived from the job, the flow and
   the source topic-partition, so a restarted job (or a retried task) fences any zombie still
   holding that id and aborts its open transaction;
2. reads the partition's progress -- the next source offset to mirror, and where the last mirrored
   record landed -- committed as a consumer-group offset on the *target* cluster (group
   ``mm2spec-mirror.<job>.<flow>``, keyed by the target topic-partition);
3. writes the records at or past that offset, then commits the new progress *in the same
   transaction* (``send_offsets_to_transaction``), so data and progress become visible together
   or not at all. Records below the progress are skipped: a replayed batch writes nothing twice.
   The waits inside a transaction share one budget below ``transaction.timeout.ms``
   (:class:`TransactionTimeouts`): past it the broker aborts the transaction anyway.

Consumers of the target must read with ``isolation.level=read_committed`` to see exactly-once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from mm2spec.errors import JobConfigError, KafkaOperationFailed
from mm2spec.mm2 import policy

#: Producer properties that mean the same in librdkafka as in Java, taken from producer.override.*.
LIBRDKAFKA_PRODUCER_KEYS = frozenset({
    "compression.type", "batch.size", "linger.ms", "batch.num.messages", "message.max.bytes",
    "queue.buffering.max.messages", "queue.buffering.max.kbytes", "queue.buffering.max.ms",
    "request.timeout.ms", "delivery.timeout.ms", "retry.backoff.ms", "compression.level",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "transaction.timeout.ms",
    "client.dns.lookup",
})

#: The writer's transaction.timeout.ms unless producer.override.transaction.timeout.ms sets one:
#: twice librdkafka's 60 s default, since a batch's transaction on a busy two-core machine can
#: take tens of seconds; well below the broker's transaction.max.timeout.ms (15 min by default).
DEFAULT_TRANSACTION_TIMEOUT_MS = 120_000

#: The share of transaction.timeout.ms that the steps of one transaction may wait for in total.
#: The broker aborts a transaction older than transaction.timeout.ms, so waiting past it only turns
#: a slow commit into a failed one; the rest covers the EndTxn request's way to the coordinator.
TRANSACTION_BUDGET_SHARE = 0.9
#: How the budget is split: writing (produce + flush) takes the most; send_offsets_to_transaction
#: and commit_transaction are one or two round trips each when the cluster is healthy.
WRITE_SHARE, SEND_OFFSETS_SHARE, COMMIT_SHARE = 0.75, 0.1, 0.15

#: init_transactions fences an earlier producer with the same transactional.id; the coordinator
#: first aborts that producer's open transaction, which can take a few round trips.
INIT_TRANSACTIONS_TIMEOUT_S = 60.0
#: abort_transaction after a failure runs outside the transaction's budget (the transaction is lost
#: either way: if this times out the broker aborts it on its own timeout or at the next init).
ABORT_TIMEOUT_S = 60.0
#: Reading the partition's progress is one OffsetFetch from the target's group coordinator; as long
#: as the job's other admin calls (mm2spark.kafka) may take.
PROGRESS_READ_TIMEOUT_S = 30.0
#: While librdkafka's queue is full, serve delivery reports for this long before producing again.
QUEUE_FULL_POLL_S = 0.05
#: Pause before retrying with a fresh producer after being fenced, so the other holder of the
#: transactional.id (a retried task) gets to finish its own init first.
FENCED_RETRY_PAUSE_S = 0.1


@dataclass(frozen=True)
class TransactionTimeouts:
    """Seconds each blocking step of one transaction may wait, all from one budget: together they
    stay below transaction.timeout.ms, after which the broker aborts the transaction."""

    write: float
    """produce + flush, counted from begin_transaction (a long produce loop leaves flush less)."""
    send_offsets: float
    """send_offsets_to_transaction: the progress, committed in the transaction."""
    commit: float
    """commit_transaction."""

    @classmethod
    def within(cls, transaction_timeout_ms: int) -> "TransactionTimeouts":
        budget = transaction_timeout_ms / 1000 * TRANSACTION_BUDGET_SHARE
        return cls(write=budget * WRITE_SHARE, send_offsets=budget * SEND_OFFSETS_SHARE, commit=budget * COMMIT_SHARE)

    @property
    def total(self) -> float:
        return self.write + self.send_offsets + self.commit


@dataclass(frozen=True)
class EosWriterSettings:
    """Everything an executor needs (pickled into the task closure)."""

    job: str
    flow: str
    source_alias: str
    identity: bool
    separator: str
    target: dict = field(repr=False)
    """librdkafka connection properties of the target cluster (may hold a password)."""
    producer_overrides: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        # Built on the driver: an unusable override stops the job at start, not in every task.
        _transaction_timeout_ms(self.flow, self.producer_overrides)

    @property
    def transaction_timeout_ms(self) -> int:
        """The producers' transaction.timeout.ms: an override's, else DEFAULT_TRANSACTION_TIMEOUT_MS."""
        return _transaction_timeout_ms(self.flow, self.producer_overrides)

    @property
    def timeouts(self) -> TransactionTimeouts:
        return TransactionTimeouts.within(self.transaction_timeout_ms)

    @property
    def progress_group(self) -> str:
        return f"mm2spec-mirror.{self.job}.{self.flow}"

    def transactional_id(self, topic: str, partition: int) -> str:
        return f"mm2spec-mirror.{self.job}.{self.flow}.{topic}.{partition}"

    def target_topic(self, topic: str) -> str:
        return policy.target_topic(self.source_alias, topic, identity=self.identity, separator=self.separator)

    def producer_conf(self, topic: str, partition: int) -> dict:
        conf = {**self.target, "linger.ms": 5, "batch.size": 1048576, "compression.type": "none",
                "queue.buffering.max.messages": 500000}
        conf.update({k: v for k, v in self.producer_overrides if k in LIBRDKAFKA_PRODUCER_KEYS})
        # The value the transaction's timeouts are derived from (see TransactionTimeouts).
        conf["transaction.timeout.ms"] = self.transaction_timeout_ms
        conf.update({"transactional.id": self.transactional_id(topic, partition), "enable.idempotence": True,
                     "acks": "all", "client.id": f"mm2spark-eos-{self.flow}"})
        return conf


def _transaction_timeout_ms(flow: str, producer_overrides: tuple[tuple[str, str], ...]) -> int:
    value = dict(producer_overrides).get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    try:
        timeout_ms = int(str(value).strip())
    except ValueError:
        timeout_ms = 0
    if timeout_ms <= 0:
        raise JobConfigError(f"flow {flow!r}: producer.override.transaction.timeout.ms must be a positive whole "
                             f"number of milliseconds, got {value!r}")
    return timeout_ms


@dataclass
class PartitionResult:
    """What one source partition's transaction did, sent back to the driver."""

    topic: str
    partition: int
    target_topic: str
    runs: list  # [(upstream_start, downstream_start, count)]
    records: int = 0
    bytes: int = 0
    skipped: int = 0
    timestamp_min: int | None = None
    timestamp_sum: int = 0


# Producers survive across tasks in a reused Python worker: init_transactions once, not per batch.
_PRODUCERS: dict[str, object] = {}
_PROGRESS_CONSUMERS: dict[str, object] = {}


def _producer(settings: EosWriterSettings, topic: str, partition: int, fresh: bool = False):
    from confluent_kafka import Producer

    txn_id = settings.transactional_id(topic, partition)
    producer = _PRODUCERS.get(txn_id)
    if producer is None or fresh:
        if producer is not None:
            _PRODUCERS.pop(txn_id, None)
        producer = Producer(settings.producer_conf(topic, partition))
        # Fences older producers with this id (a killed driver's, a failed task's) and aborts
        # whatever transaction they left open.
        producer.init_transactions(INIT_TRANSACTIONS_TIMEOUT_S)
        _PRODUCERS[txn_id] = producer
    return producer


def _progress_consumer(settings: EosWriterSettings):
    from confluent_kafka import Consumer

    consumer = _PROGRESS_CONSUMERS.get(settings.progress_group)
    if consumer is None:
        consumer = Consumer({**settings.target, "group.id": settings.progress_group, "enable.auto.commit": False,
                             "isolation.level": "read_committed", "client.id": f"mm2spark-progress-{settings.flow}"})
        _PROGRESS_CONSUMERS[settings.progress_group] = consumer
    return consumer


def read_progress(settings: EosWriterSettings, topic: str, partition: int) -> tuple[int, int | None]:
    """(next source offset to mirror, downstream offset of the last mirrored record) or (-1, None)."""
    from confluent_kafka import TopicPartition

    consumer = _progress_consumer(settings)
    [committed] = consumer.committed([TopicPartition(settings.target_topic(topic), partition)],
                                     timeout=PROGRESS_READ_TIMEOUT_S)
    if committed.error or committed.offset < 0:
        return -1, None
    downstream = None
    if committed.metadata:
        try:
            downstream = int(committed.metadata)
        except ValueError:
            downstream = None
    return committed.offset, downstream


def runs_of(upstream: list[int], downstream: list[int]) -> list[tuple[int, int, int]]:
    """Split parallel offset lists into maximal runs where both advance by one."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for i in range(1, len(upstream) + 1):
        if i == len(upstream) or upstream[i] != upstream[i - 1] + 1 or downstream[i] != downstream[i - 1] + 1:
            runs.append((upstream[start], downstream[start], i - start))
            start = i
    return runs


def _transaction(settings: EosWriterSettings, producer, topic: str, partition: int, rows: list) -> PartitionResult:
    from confluent_kafka import KafkaException, TopicPartition

    target_topic = settings.target_topic(topic)
    result = PartitionResult(topic, partition, target_topic, runs=[])
    progress, last_downstream = read_progress(settings, topic, partition)
    pending = [r for r in rows if r[0] >= progress]
    result.skipped = len(rows) - len(pending)
    if not pending:
        if result.skipped and last_downstream is not None:
            # A replay of a batch that was already committed: report where its end landed, so the
            # offset sync that the crash may have lost is written now.
            result.runs.append((progress - 1, last_downstream, 1))
        return result

    upstream: list[int] = []
    downstream: list[int] = []
    errors: list = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            downstream.append(msg.offset())

    timeouts = settings.timeouts
    producer.begin_transaction()
    began = time.monotonic()
    try:
        produce = producer.produce
        for offset, timestamp, key, value, headers in pending:
            kwargs = {"partition": partition, "key": key, "value": value, "on_delivery": delivered}
            if timestamp is not None:
                kwargs["timestamp"] = timestamp
            if headers:
                kwargs["headers"] = headers
            while True:
                try:
                    produce(target_topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(QUEUE_FULL_POLL_S)
            upstream.append(offset)
            result.records += 1
            result.bytes += (len(key) if key else 0) + (len(value) if value else 0)
            if timestamp is not None:
                result.timestamp_sum += timestamp
                result.timestamp_min = timestamp if result.timestamp_min is None else min(result.timestamp_min, timestamp)
        remaining = producer.flush(max(0.0, timeouts.write - (time.monotonic() - began)))
        if errors or remaining or len(downstream) != len(upstream):
            problem = errors[0] if errors else f"{remaining or len(upstream) - len(downstream)} records not acknowledged"
            raise KafkaOperationFailed(f"flow {settings.flow}: mirroring {topic}-{partition} to {target_topic} "
                                       f"on the target cluster failed: {problem}")
        consumer = _progress_consumer(settings)
        producer.send_offsets_to_transaction(
            [TopicPartition(target_topic, partition, upstream[-1] + 1, metadata=str(downstream[-1]))],
            consumer.consumer_group_metadata(), timeouts.send_offsets)
        producer.commit_transaction(timeouts.commit)
    except BaseException:  # whatever stopped the write (Ctrl-C too): leave no transaction open
        try:
            producer.abort_transaction(ABORT_TIMEOUT_S)
        except KafkaException:
            pass  # a fenced producer cannot abort; the broker aborts on the next init
        raise
    result.runs = runs_of(upstream, downstream)
    return result


def _write_partition(settings: EosWriterSettings, topic: str, partition: int, rows: list) -> PartitionResult:
    from confluent_kafka import KafkaException

    for attempt in (1, 2):
        producer = _producer(settings, topic, partition, fresh=attempt > 1)
        try:
            return _transaction(settings, producer, topic, partition, rows)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            # Fenced by another worker that took this transactional id since we last used it:
            # nothing of ours committed, so start over with a fresh producer once.
            if attempt == 1 and error is not None and (error.fatal() or error.txn_requires_abort()):
                _PRODUCERS.pop(settings.transactional_id(topic, partition), None)
                time.sleep(FENCED_RETRY_PAUSE_S)
                continue
            raise
    raise AssertionError("unreachable")


def write_rows(settings: EosWriterSettings, rows: Iterable) -> Iterator[PartitionResult]:
    """The mapPartitions function: rows are (topic, partition, offset, ts_ms, key, value, headers),
    in source order within each source partition (Spark reads one partition per task)."""
    current: tuple[str, int] | None = None
    buffered: list = []
    for row in rows:
        topic, partition, offset, timestamp, key, value, headers = row
        if (topic, partition) != current:
            if current is not None:
                yield _write_partition(settings, current[0], current[1], buffered)
            current, buffered = (topic, partition), []
        buffered.append((offset, timestamp,
                         bytes(key) if key is not None else None,
                         bytes(value) if value is not None else None,
                         [(h[0], bytes(h[1]) if h[1] is not None else None) for h in headers] if headers else None))
    if current is not None:
        yield _write_partition(settings, current[0], current[1], buffered)
