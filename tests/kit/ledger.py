"""Traffic whose every record can be accounted for: what the fault tests and the soak mirror.

:class:`SequencedProducer` writes records whose key names their partition and sequence number and
whose value is derived from the key, and remembers which ones the source broker acknowledged.
:class:`Ledger` reads a mirrored topic and marks each sequence number it sees, so a record lost,
written twice or altered by the mirror is counted, however the records were interleaved. Bitmaps,
not sets: a 30-minute soak writes tens of millions of records.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

from mm2spec.errors import DevError
from mm2spec.mm2.retry import LeaderLossWatch, retry_call

log = logging.getLogger("tests.kit.ledger")

#: librdkafka's wait for outstanding deliveries when a producer stops: a broker that restarts or a
#: proxy that was cut holds them until the client reconnects and retries.
FLUSH_TIMEOUT_S = 300.0
#: One consume call of the ledger; short, so a caller's deadline is checked often.
CONSUME_WAIT_S = 0.5
#: Records per consume call.
CONSUME_BATCH = 10_000
#: Duplicates a ledger keeps the position of.
MAX_DUPLICATE_EXAMPLES = 10
#: How often the producer thread yields to deliver callbacks and to pace itself (records).
PACE_EVERY = 100


def record_key(partition: int, sequence: int) -> bytes:
    return b"%03d:%012d" % (partition, sequence)


def record_value(key: bytes, size: int) -> bytes:
    """``size`` bytes derived from the key, so the content of every mirrored record is checked."""
    block = hashlib.sha256(key).digest()
    return (block * (size // len(block) + 1))[:size]


def _parse_key(key: bytes | None) -> tuple[int, int] | None:
    try:
        partition, sequence = key.split(b":")
        return int(partition), int(sequence)
    except (AttributeError, ValueError):
        return None


class _Bitmap:
    """A growable bit set of sequence numbers."""

    def __init__(self) -> None:
        self.bits = bytearray()

    def add(self, n: int) -> bool:
        """Set bit ``n``; False if it was set already."""
        index, mask = n >> 3, 1 << (n & 7)
        if index >= len(self.bits):
            self.bits.extend(bytes(index - len(self.bits) + 1 + len(self.bits) // 2))
        if self.bits[index] & mask:
            return False
        self.bits[index] |= mask
        return True

    def count(self) -> int:
        return int.from_bytes(self.bits, "little").bit_count()

    def missing_from(self, wanted: _Bitmap) -> int:
        """How many bits of ``wanted`` are not set here."""
        mine = int.from_bytes(self.bits, "little")
        return (int.from_bytes(wanted.bits, "little") & ~mine).bit_count()


class SequencedProducer:
    """Writes ``rate`` records/s (None: as fast as it can) round-robin over ``partitions`` of
    ``topic`` in a background thread, idempotent with ``acks=all``, until ``stop()``."""

    def __init__(self, conf: dict, topic: str, partitions: int, *, rate: float | None = None,
                 value_size: int = 200, limit: int | None = None):
        self.conf, self.topic, self.partitions = dict(conf), topic, partitions
        self.rate, self.value_size, self.limit = rate, value_size, limit
        self.delivered = [_Bitmap() for _ in range(partitions)]
        self.sent = 0
        self.failed = 0
        self.replaced = 0
        """Clients replaced after they lost a partition's leader for good (``_healthy``)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)
        self._error: BaseException | None = None

    @property
    def acknowledged(self) -> int:
        return sum(bitmap.count() for bitmap in self.delivered)

    def snapshot(self) -> list[_Bitmap]:
        """What was acknowledged until now (for a ``Ledger.missing`` later)."""
        copies = [_Bitmap() for _ in self.delivered]
        for copy, bitmap in zip(copies, self.delivered):
            copy.bits = bytearray(bitmap.bits)
        return copies

    def start(self) -> SequencedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop writing and wait until every record sent is acknowledged or failed."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise DevError(f"the producer of {self.topic} failed: {self._error}")

    def wait(self) -> None:
        """Wait until the ``limit`` records are written and acknowledged."""
        self._thread.join()
        self.stop()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            producer = self._write(self._client())
            if producer.flush(FLUSH_TIMEOUT_S) != 0:
                raise DevError(f"records to {self.topic} still unacknowledged after {FLUSH_TIMEOUT_S:.0f}s")
        except BaseException as failure:  # noqa: BLE001 - handed to stop()
            self._error = failure

    def _client(self):
        from confluent_kafka import Producer  # imported late: the CLI should start fast

        self._watch = LeaderLossWatch(f"producer-{self.topic}", log)
        return Producer({**self.conf, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                         # ride out a broker restart or a network cut instead of failing records
                         "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000), "logger": self._watch.logger})

    def _healthy(self, producer):
        """``producer``, or a new client if it lost a partition's leader for good (librdkafka issue 5430,
        ``LeaderLossWatch``): the records it had not sent yet fail (never acknowledged, so never
        expected on the target), those in flight are waited for."""
        if not self._watch.lost:
            return producer
        producer.purge(in_queue=True, in_flight=False)
        producer.flush(FLUSH_TIMEOUT_S)
        self.replaced += 1
        return self._client()

    def _write(self, producer):
        """Writes until stopped (or ``limit``); returns the client it ends with."""
        next_seq = [0] * self.partitions
        began = time.monotonic()
        while not self._stop.is_set() and (self.limit is None or self.sent < self.limit):
            partition = self.sent % self.partitions
            key = record_key(partition, next_seq[partition])
            try:
                producer.produce(self.topic, key=key, value=record_value(key, self.value_size), partition=partition,
                                 on_delivery=self._on_delivery)
            except BufferError:
                producer.poll(0.05)
                producer = self._healthy(producer)
                continue
            next_seq[partition] += 1
            self.sent += 1
            if self.sent % PACE_EVERY == 0:
                producer.poll(0)
                producer = self._healthy(producer)
                if self.rate:
                    ahead = self.sent / self.rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        return producer

    def _on_delivery(self, error, message) -> None:
        if error is not None:
            self.failed += 1
            return
        parsed = _parse_key(message.key())
        if parsed:
            self.delivered[parsed[0]].add(parsed[1])


@dataclass
class LedgerCount:
    """What a :class:`Ledger` has read so far, against what the producer had acknowledged."""

    unique: int
    """Distinct records seen on the target."""
    duplicates: int
    """Records seen again (at-least-once replays)."""
    corrupt: int
    """Records with a foreign key, on the wrong partition or with altered content."""
    lost: int | None = None
    """Acknowledged source records not seen on the target (after ``check``)."""
    extra: dict = field(default_factory=dict)


class Ledger:
    """Reads ``topic`` on the target from the beginning of every partition and counts each record
    (``isolation``: read_committed to judge exactly-once)."""

    def __init__(self, conf: dict, topic: str, partitions: int, *, isolation: str = "read_uncommitted",
                 value_size: int = 200):
        self.conf, self.topic, self.partitions = dict(conf), topic, partitions
        self.isolation, self.value_size = isolation, value_size
        self.seen = [_Bitmap() for _ in range(partitions)]
        self.duplicates = 0
        self.corrupt = 0
        #: The first records seen again, as (partition, sequence, target offset): where to look.
        self.duplicate_examples: list[tuple[int, int, int]] = []
        self._consumer = None
        self._watch: LeaderLossWatch | None = None
        self._next: dict[int, int] = {}
        """The next offset to read of each partition (a replaced client goes on from there)."""

    def read(self, seconds: float) -> int:
        """Read what arrives within ``seconds``; returns how many records that was."""
        consumer = self._open()
        got = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for message in consumer.consume(CONSUME_BATCH, timeout=CONSUME_WAIT_S):
                if not message.error():
                    self._count(message)
                    got += 1
            if self._watch.lost:  # librdkafka issue 5430 (LeaderLossWatch): a new client goes on from here
                self.close()
                consumer = self._open()
        return got

    def read_all(self, producer: SequencedProducer, timeout: float) -> LedgerCount:
        """Read every partition to its end as it is now (its high watermark; with read_committed an
        open transaction holds the read at its start until it ends) and count: what the topic holds,
        however its records were read before. Raises DevError if the end is not reached within
        ``timeout``. Call it on a ledger that has read nothing yet."""
        from confluent_kafka import KafkaError, TopicPartition  # imported late: the CLI should start fast

        consumer = self._open(eof=True)
        ends = {p: retry_call(lambda p=p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10))[1]
                for p in range(self.partitions)}
        # The end of a partition is an event (not the position: that stops at the last record delivered,
        # short of the transaction markers after it).
        behind = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while behind:
            if time.monotonic() > deadline:
                raise DevError(f"reading {self.topic} to its end took over {timeout:.0f} s; partitions not read "
                               f"to their end: {sorted(behind)} (ends {ends})")
            for message in consumer.consume(CONSUME_BATCH, timeout=CONSUME_WAIT_S):
                error = message.error()
                if error is None:
                    self._count(message)
                elif error.code() == KafkaError._PARTITION_EOF and message.offset() >= ends[message.partition()]:
                    behind.discard(message.partition())
        return LedgerCount(self.unique(), self.duplicates, self.corrupt, self.missing(producer))

    def unique(self) -> int:
        return sum(bitmap.count() for bitmap in self.seen)

    def missing(self, wanted: SequencedProducer | list[_Bitmap]) -> int:
        """Records acknowledged to the producer (or in its ``snapshot()``) not seen yet."""
        bitmaps = wanted.delivered if isinstance(wanted, SequencedProducer) else wanted
        return sum(seen.missing_from(bitmap) for seen, bitmap in zip(self.seen, bitmaps))

    def catch_up(self, producer: SequencedProducer, timeout: float, *, alive=lambda: True) -> LedgerCount:
        """Read until every acknowledged record was seen or ``timeout`` passes (or ``alive()`` turns
        false); then the count, ``lost`` being what is still missing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive():
            self.read(min(5.0, max(0.0, deadline - time.monotonic())))
            if self.missing(producer) == 0:
                break
        return LedgerCount(self.unique(), self.duplicates, self.corrupt, self.missing(producer))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _open(self, eof: bool = False):
        if self._consumer is None:
            from confluent_kafka import Consumer, TopicPartition  # imported late: the CLI should start fast

            self._watch = LeaderLossWatch(f"ledger-{self.topic}", log)
            self._consumer = Consumer({**self.conf, "group.id": f"mm2spec-ledger-{uuid.uuid4().hex[:8]}",
                                       "enable.auto.commit": False, "isolation.level": self.isolation,
                                       "auto.offset.reset": "earliest", "enable.partition.eof": eof,
                                       "logger": self._watch.logger})
            # From the beginning (-2), or where an earlier client of this ledger stopped.
            self._consumer.assign([TopicPartition(self.topic, p, self._next.get(p, -2)) for p in range(self.partitions)])
        return self._consumer

    def _count(self, message) -> None:
        self._next[message.partition()] = message.offset() + 1
        parsed = _parse_key(message.key())
        if (parsed is None or parsed[0] != message.partition() or parsed[0] >= self.partitions
                or message.value() != record_value(message.key(), self.value_size)):
            self.corrupt += 1
        elif not self.seen[parsed[0]].add(parsed[1]):
            self.duplicates += 1
            if len(self.duplicate_examples) < MAX_DUPLICATE_EXAMPLES:
                self.duplicate_examples.append((parsed[0], parsed[1], message.offset()))


#: The Spark job's identity replication policy: ledger topics keep their names on the target.
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def ledger_job(name: str, source: str, target: str, topics: str, checkpoint: str, *, groups: str = "none",
               exactly_once: bool = False, master: str = "local[2]", max_offsets: int = 100_000) -> dict:
    """A Spark job config (the shape ``render`` writes to ``spark-mirror.json``) mirroring
    ``topics`` from the ``source`` bootstrap (alias ``primary``) to ``target`` (``dr``), identity
    policy, checkpoints and group offset sync every second for ``groups``."""
    return {
        "apiVersion": "mm2spec/v1", "name": name, "environment": "dev",
        "spark": {"master": master, "trigger.interval": "1 second", "max.offsets.per.trigger": max_offsets,
                  "checkpoint.location": checkpoint, "executor.instances": 1, "executor.cores": 2,
                  "executor.memory": "1g"},
        "flows": [{
            "name": "primary-to-dr", "source.cluster.alias": "primary", "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": source, "target.cluster.bootstrap.servers": target,
            "source.cluster.security.protocol": "PLAINTEXT", "target.cluster.security.protocol": "PLAINTEXT",
            "topics": topics, "topics.exclude": "mm2.*\\.internal,.*\\.replica,__.*",
            "groups": groups, "groups.exclude": "console-consumer-.*,connect-.*,__.*",
            "replication.policy.class": IDENTITY_POLICY, "replication.policy.separator": ".",
            "offset-syncs.topic.location": "target", "offset.lag.max": "100",
            "emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
            "refresh.topics.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
            "exactly.once.source.support": "enabled" if exactly_once else "disabled",
        }],
    }
