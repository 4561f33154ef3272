"""The exactly-once protocol: one Kafka transaction per source partition per micro-batch.

Spark's Kafka sink is at-least-once: a replayed micro-batch writes its records again. The job's
JVM writer (``spark/java``, ``mm2spec.spark.WriteTask``) runs this protocol on the executors,
streaming each source partition's rows straight into its transaction:

1. a transactional producer whose ``transactional.id`` is derived from the job, the flow and
   the source topic-partition, so a restarted job (or a retried task) fences any zombie still
   holding that id and aborts its open transaction;
2. the partition's progress -- the next source offset to mirror, and where the last mirrored
   record landed -- is read from the consumer group ``mm2spec-mirror.<job>.<flow>`` on the
   *target* cluster (keyed by the target topic-partition, read with requireStable);
3. the records at or past that offset are written, then the new progress is committed *in the
   same transaction* (``sendOffsetsToTransaction``), so data and progress become visible together
   or not at all. Records below the progress are skipped: a replayed batch writes nothing twice.
   The waits inside a transaction share one budget below ``transaction.timeout.ms``
   (:class:`TransactionTimeouts`): past it the broker aborts the transaction anyway.

This module holds the protocol's names and budgets, decided on the driver (so an unusable
setting stops the job at start) and handed to the writer as producer settings.
Consumers of the target must read with ``isolation.level=read_committed`` to see exactly-once.
"""

from __future__ import annotations

from dataclasses import dataclass

from mm2spec.errors import JobConfigError
from mm2spec.mm2 import spark_eos

#: The writer's transaction.timeout.ms unless producer.override.transaction.timeout.ms sets one:
#: twice the Java producer's 60 s default, since a batch's transaction on a busy two-core machine
#: can take tens of seconds; well below the broker's transaction.max.timeout.ms (15 min by default).
DEFAULT_TRANSACTION_TIMEOUT_MS = 120_000

#: The share of transaction.timeout.ms that the steps of one transaction may wait for in total.
#: The broker aborts a transaction older than transaction.timeout.ms, so waiting past it only turns
#: a slow commit into a failed one; the rest covers the EndTxn request's way to the coordinator.
TRANSACTION_BUDGET_SHARE = 0.9
#: How the budget is split: writing (produce + flush) takes the most; sendOffsetsToTransaction
#: and commitTransaction are one or two round trips each when the cluster is healthy.
WRITE_SHARE, SEND_OFFSETS_SHARE, COMMIT_SHARE = 0.75, 0.1, 0.15

#: Reading the partition's progress is one OffsetFetch from the target's group coordinator; as long
#: as the job's other admin calls (mm2spark.kafka) may take.
PROGRESS_READ_TIMEOUT_MS = 30_000


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
    """The protocol's names and budgets for one flow (see the module docstring)."""

    job: str
    flow: str
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
        return spark_eos.progress_group(self.job, self.flow)

    @property
    def transactional_id_prefix(self) -> str:
        """``transactional.id`` = this + ``<topic>.<partition>`` (the source partition)."""
        return spark_eos.transactional_id_prefix(self.job, self.flow)

    def transactional_id(self, topic: str, partition: int) -> str:
        return f"{self.transactional_id_prefix}{topic}.{partition}"

    def writer_settings(self) -> dict[str, str]:
        """The JVM writer's exactly-once settings: names, and the budget as producer timeouts
        (delivery.timeout.ms bounds the write, max.block.ms each blocking transaction call)."""
        timeouts = self.timeouts
        write_ms = int(timeouts.write * 1000)
        return {
            "mode": "exactly-once",
            "transactional.id.prefix": self.transactional_id_prefix,
            "progress.group": self.progress_group,
            "progress.timeout.ms": str(PROGRESS_READ_TIMEOUT_MS),
            "producer.transaction.timeout.ms": str(self.transaction_timeout_ms),
            # delivery.timeout.ms must cover linger.ms + request.timeout.ms (the producer checks)
            "producer.request.timeout.ms": str(min(30_000, write_ms // 2)),
            "producer.delivery.timeout.ms": str(write_ms),
            "producer.max.block.ms": str(int(max(timeouts.send_offsets, timeouts.commit) * 1000)),
        }


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
