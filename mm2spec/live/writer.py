"""Writing records to a cluster: what a failback's reverse copy needs.

``RecordWriter`` is one idempotent producer (``acks=all``, ``enable.idempotence``): records of a
partition land in the order they were sent, each once, even when the client retries a request. A
record is sent to an explicit partition with its own timestamp and headers, so a copy keeps
everything a mirror keeps. Delivery failures are collected and raised by ``flush`` as
``KafkaOperationFailed`` naming the cluster, never a raw client exception.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live import KAFKA_REQUEST_TIMEOUT_S
from mm2spec.live.kafka import SecretLookup, client_config, env_secrets
from mm2spec.live.types import Record
from mm2spec.spec.model import Cluster

# Producer settings for a bulk copy: batches of up to 1 MiB, held 20 ms to fill, so a million small
# records go in a few thousand requests rather than a million.
# Only failed deliveries call back into Python: a callback per record costs as much as the send.
_PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 20, "batch.size": 1 << 20,
             "compression.type": "lz4", "queue.buffering.max.messages": 500_000, "delivery.report.only.error": True}
# A full local queue is drained this long before the record is offered again.
_QUEUE_FULL_POLL_S = 0.05
# Delivery reports are served every this many records (a poll per record costs more than the send).
_POLL_EVERY = 1000


class RecordWriter:
    """One idempotent producer for one cluster."""

    def __init__(self, cluster: Cluster, secrets: SecretLookup = env_secrets, timeout: float = KAFKA_REQUEST_TIMEOUT_S):
        self.cluster = cluster
        self.timeout = timeout
        config = client_config(cluster, secrets)
        config.update(_PRODUCER)
        self._producer = Producer(config)
        self._failures: list[str] = []
        self._sent = 0

    def _delivered(self, error: KafkaError | None, message) -> None:
        if error is not None:
            self._failures.append(f"{message.topic()}-{message.partition()}: {error.name()}: {error.str()}")

    def send(self, topic: str, partition: int, record: Record) -> None:
        """Queue a copy of ``record`` for ``topic``/``partition``: key, value, timestamp, headers."""
        self._produce(topic, partition, record.key, record.value, max(record.timestamp, 0), list(record.headers) or None)

    def send_message(self, topic: str, partition: int, message) -> None:
        """Queue a copy of a message as the client read it (``RecordReader.messages``)."""
        kind, stamp = message.timestamp()
        self._produce(topic, partition, message.key(), message.value(), stamp if kind else 0, message.headers())

    def _produce(self, topic: str, partition: int, key, value, timestamp: int, headers) -> None:
        """One record into the client's queue; a full queue is drained, never dropped (timestamp 0: now)."""
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, partition=partition, timestamp=timestamp,
                                       headers=headers, on_delivery=self._delivered)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                self._producer.poll(_QUEUE_FULL_POLL_S)
            except KafkaException as exc:
                raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": writing {topic}-{partition}: {exc}') from None
        self._sent += 1
        if self._sent % _POLL_EVERY == 0:
            self._producer.poll(0)

    def send_raw(self, topic: str, key: bytes | None, value: bytes | None, partition: int = 0) -> None:
        """Queue a record built by the caller (an offset sync)."""
        self.send(topic, partition, Record(topic, partition, -1, key, value, -1))

    def flush(self) -> None:
        """Wait until every queued record is acknowledged; KafkaOperationFailed if any was not."""
        try:
            left = self._producer.flush(self.timeout)
        except KafkaException as exc:
            self._failures.append(str(exc))
            left = 0
        if left:
            self._failures.append(f"{left} records not acknowledged within {self.timeout:.0f}s")
        if self._failures:
            failures, self._failures = self._failures, []
            raise KafkaOperationFailed(f'cluster "{self.cluster.alias}": writing records: ' + "; ".join(failures[:5])
                                       + (f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""))

    def close(self) -> None:
        self._producer.flush(self.timeout)
