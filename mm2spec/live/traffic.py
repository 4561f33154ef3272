"""Synthetic traffic for a DR drill: a rate-limited producer and consumer groups that can move
from one cluster to the other, as applications do during a failover and a failback.

Every record the :class:`ProbeLoad` writes carries two headers, the drill's id and its sequence
number in its partition, so a record can be recognised on either cluster whatever the mirror did
to its offset; the sequence numbers of a partition continue across clusters. :class:`ProbeGroup`
consumes and commits as an application would, and stops (committing what it consumed) when told.
Both run in background threads and raise nothing there: an error is kept and raised by the next
call from the drill.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live.kafka import SecretLookup, client_config, env_secrets, retrying
from mm2spec.live.types import Record
from mm2spec.spec.model import Cluster

DRILL_HEADER = "mm2spec-drill"
"""Header naming the drill that wrote a record."""
SEQ_HEADER = "mm2spec-drill-seq"
"""Header with the record's sequence number in its partition (0, 1, 2 ... across both clusters)."""
# How long a switch waits for the records already sent to be acknowledged: a broker on a loaded
# machine can hold a request for many seconds, and a record still in flight would be counted lost.
FLUSH_TIMEOUT_S = 120.0
# The producer thread never sleeps longer than this between checks of a pause or a switch.
PACE_SLICE_S = 0.05
# A probe group's poll: short, so a stop is seen quickly.
CONSUME_WAIT_S = 0.2
# Records one probe-group poll takes at most (then commits them): groups stop between commits at
# offsets that are not the end of the partition, as real consumers do.
CONSUME_BATCH = 50
# How long a thread may take to finish once told to stop: a final flush or commit and a close.
JOIN_TIMEOUT_S = FLUSH_TIMEOUT_S + 30.0


def drill_seq(record: Record, drill_id: str) -> int | None:
    """The sequence number of a record this drill wrote, None for any other record."""
    headers = dict(record.headers)
    if headers.get(DRILL_HEADER) != drill_id.encode():
        return None
    try:
        return int(headers[SEQ_HEADER])
    except (KeyError, ValueError):
        return None


@dataclass
class Written:
    """What one cluster acknowledged: per (topic, partition) the sequence numbers, in order, and
    each record's timestamp (ms), for the RPO in seconds when records are missing elsewhere."""

    seqs: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    stamps: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    last_timestamp_ms: int | None = None

    @property
    def count(self) -> int:
        return sum(len(s) for s in self.seqs.values())


class ProbeLoad:
    """Writes ``rate`` records/s round-robin over ``partitions`` to the active cluster, in a thread.

    ``resume(cluster)`` starts (or moves) the writes, ``pause()`` stops them and returns once
    every record sent is acknowledged or failed: a planned switch, nothing left in flight.
    """

    def __init__(self, drill_id: str, partitions: list[tuple[str, int]], rate: float, record_bytes: int,
                 secrets: SecretLookup = env_secrets):
        self.drill_id, self.partitions = drill_id, list(partitions)
        self.rate, self.record_bytes, self.secrets = rate, record_bytes, secrets
        self.written: dict[str, Written] = {}
        self.acknowledged = 0
        self.stamps: dict[tuple[str, int], list[int]] = {}
        """Per probe partition: each record's timestamp (ms), by sequence number, wherever written."""
        self.failed: list[str] = []
        self._next_seq = {tp: 0 for tp in self.partitions}
        self._cond = threading.Condition()
        self._target: Cluster | None = None
        self._names: dict[str, str] = {}
        self._idle = True
        self._stopping = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="drill-load", daemon=True)
        self._thread.start()

    def resume(self, cluster: Cluster, names: dict[str, str]) -> None:
        """Write to ``cluster``, each probe topic under its name there (``names``: probe topic ->
        its name on that cluster, which a replication policy may prefix)."""
        self._raise()
        with self._cond:
            self._target, self._names = cluster, dict(names)
            self._idle = False
            self._cond.notify_all()

    def pause(self) -> None:
        """Stop writing; return when every record sent has its answer (see FLUSH_TIMEOUT_S)."""
        with self._cond:
            self._target = None
            self._cond.notify_all()
            idle = self._cond.wait_for(lambda: self._idle, timeout=JOIN_TIMEOUT_S)
        self._raise()
        if not idle:
            raise KafkaOperationFailed(f"the drill's producer did not stop within {JOIN_TIMEOUT_S:.0f}s")

    def stop(self) -> None:
        with self._cond:
            self._target, self._stopping = None, True
            self._cond.notify_all()
        self._thread.join(JOIN_TIMEOUT_S)
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise KafkaOperationFailed(f"the drill's producer failed: {self._error}")
        if self.failed:
            raise KafkaOperationFailed(f"the drill's producer lost {len(self.failed)} records: {self.failed[0]}")

    def _run(self) -> None:
        producer, cluster, sent, began = None, None, 0, 0.0
        try:
            while True:
                with self._cond:
                    if cluster is None or self._target is not cluster:  # starting, paused, moved or stopping
                        self._flush(producer, cluster)
                        producer, cluster = None, None
                        self._idle = True
                        self._cond.notify_all()
                        self._cond.wait_for(lambda: self._target is not None or self._stopping)
                        if self._stopping:
                            return
                        cluster, sent, began = self._target, 0, time.monotonic()
                if producer is None:
                    producer = Producer({**client_config(cluster, self.secrets), "acks": "all", "enable.idempotence": True,
                                         "linger.ms": 5, "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000)})
                early = began + sent / self.rate - time.monotonic()
                if early > 0:  # (never a negative poll: librdkafka would wait forever)
                    producer.poll(min(PACE_SLICE_S, early))
                    continue
                self._send(producer, cluster, self.partitions[sent % len(self.partitions)])
                sent += 1
        except BaseException as exc:  # noqa: BLE001 - kept, raised by the drill's next call
            self._error = exc
            with self._cond:
                self._idle = True
                self._cond.notify_all()

    def _send(self, producer: Producer, cluster: Cluster, tp: tuple[str, int]) -> None:
        seq = self._next_seq[tp]
        head = f"{self.drill_id}:{tp[0]}:{tp[1]}:{seq}:".encode()
        value = head + b"." * max(0, self.record_bytes - len(head))
        headers = [(DRILL_HEADER, self.drill_id.encode()), (SEQ_HEADER, str(seq).encode())]
        try:
            producer.produce(self._names.get(tp[0], tp[0]), key=f"{tp[1]}:{seq}".encode(), value=value,
                             partition=tp[1], headers=headers,
                             on_delivery=lambda err, msg: self._delivered(cluster.alias, tp, seq, err, msg))
        except BufferError:
            producer.poll(PACE_SLICE_S)
            return
        self._next_seq[tp] = seq + 1
        producer.poll(0)

    def _delivered(self, alias: str, tp: tuple[str, int], seq: int, error, message) -> None:
        if error is not None:
            self.failed.append(f"{tp[0]}-{tp[1]} #{seq} on {alias}: {error}")
            return
        written = self.written.setdefault(alias, Written())
        stamp = message.timestamp()[1]
        written.seqs.setdefault(tp, []).append(seq)
        written.stamps.setdefault(tp, []).append(stamp)
        written.last_timestamp_ms = stamp
        self.stamps.setdefault(tp, []).append(stamp)
        self.acknowledged += 1

    def _flush(self, producer: Producer | None, cluster: Cluster | None) -> None:
        if producer is not None and producer.flush(FLUSH_TIMEOUT_S) != 0:
            raise KafkaOperationFailed(f'cluster "{cluster.alias}": drill records still unacknowledged '
                                       f"after {FLUSH_TIMEOUT_S:.0f}s")


class ProbeGroup:
    """One consumer group reading the probe topics on the active cluster, committing after each
    poll; ``stop()`` commits what it consumed and leaves the group (an application shut down)."""

    def __init__(self, group: str, secrets: SecretLookup = env_secrets):
        self.group, self.secrets = group, secrets
        self.consumed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, cluster: Cluster, topics: list[str]) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(cluster, list(topics)), name=f"drill-{self.group}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(JOIN_TIMEOUT_S)
            self._thread = None
        if self._error is not None:
            raise KafkaOperationFailed(f"the drill's consumer group {self.group} failed: {self._error}")

    def _run(self, cluster: Cluster, topics: list[str]) -> None:
        try:
            consumer = Consumer({**client_config(cluster, self.secrets), "group.id": self.group,
                                 "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        except BaseException as exc:  # noqa: BLE001 - raised by stop()
            self._error = exc
            return
        try:
            consumer.subscribe(topics)
            while not self._stop.is_set():
                batch = [m for m in consumer.consume(CONSUME_BATCH, timeout=CONSUME_WAIT_S) if not m.error()]
                if batch:
                    retrying(lambda: consumer.commit(asynchronous=False), f"commit group {self.group}", cluster)
                    self.consumed += len(batch)
        except BaseException as exc:  # noqa: BLE001 - raised by stop()
            self._error = exc
        finally:
            consumer.close()
