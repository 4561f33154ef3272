"""Unit tests of the exactly-once writer's transaction timeouts and of MM2 record decoding errors
(no Spark session, no network: the producer is a stand-in that records what it was asked)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spark import eos  # noqa: E402
from mm2spark.eos import DEFAULT_TRANSACTION_TIMEOUT_MS, EosWriterSettings, TransactionTimeouts  # noqa: E402
from mm2spark.records import Checkpoint, OffsetSync  # noqa: E402
from mm2spec.errors import ClusterError, JobConfigError, KafkaOperationFailed, Mm2specError, RecordMalformed  # noqa: E402

#: librdkafka's (and confluent-kafka's) default transaction.timeout.ms.
LIBRDKAFKA_DEFAULT_MS = 60_000


def settings(**overrides: str) -> EosWriterSettings:
    return EosWriterSettings(job="payments-dr", flow="primary-to-dr", source_alias="primary", identity=True,
                             separator=".", target={"bootstrap.servers": "x"},
                             producer_overrides=tuple(sorted(overrides.items())))


# ------------------------------------------------------------------- the transaction's budget

@pytest.mark.parametrize("timeout_ms", [1_000, LIBRDKAFKA_DEFAULT_MS, DEFAULT_TRANSACTION_TIMEOUT_MS, 900_000])
def test_the_waits_of_one_transaction_stay_below_its_timeout(timeout_ms):
    timeouts = TransactionTimeouts.within(timeout_ms)
    assert timeouts.total == pytest.approx(timeouts.write + timeouts.send_offsets + timeouts.commit)
    assert timeouts.total < timeout_ms / 1000
    assert min(timeouts.write, timeouts.send_offsets, timeouts.commit) > 0


def test_the_writer_sets_the_transaction_timeout_its_waits_are_derived_from():
    writer = settings()
    conf = writer.producer_conf("orders", 0)
    assert conf["transaction.timeout.ms"] == writer.transaction_timeout_ms == DEFAULT_TRANSACTION_TIMEOUT_MS
    assert writer.timeouts.total < conf["transaction.timeout.ms"] / 1000


@pytest.mark.parametrize("override", ["60000", "30000", " 900000 "])
def test_a_producer_override_of_the_transaction_timeout_moves_the_budget(override):
    writer = settings(**{"transaction.timeout.ms": override})
    conf = writer.producer_conf("orders", 0)
    assert conf["transaction.timeout.ms"] == int(override) == writer.transaction_timeout_ms
    assert writer.timeouts.total < int(override) / 1000


@pytest.mark.parametrize("override", ["", "1 minute", "0", "-5"])
def test_an_unusable_transaction_timeout_override_is_a_job_config_error_at_start(override):
    with pytest.raises(JobConfigError, match="producer.override.transaction.timeout.ms"):
        settings(**{"transaction.timeout.ms": override})


class FakeProducer:
    """Acknowledges every record at the next target offset; records each call's timeout."""

    def __init__(self, fail_delivery: str | None = None):
        self.fail_delivery = fail_delivery
        self.calls: list[tuple[str, float | None]] = []
        self.delivered: list = []
        self.next_offset = 100

    def begin_transaction(self):
        self.calls.append(("begin_transaction", None))

    def produce(self, topic, *, partition, key, value, on_delivery, **_):
        self.delivered.append(on_delivery)

    def poll(self, timeout):
        pass

    def flush(self, timeout):
        self.calls.append(("flush", timeout))
        for on_delivery in self.delivered:
            if self.fail_delivery:
                on_delivery(self.fail_delivery, None)
            else:
                on_delivery(None, _Message(self.next_offset))
                self.next_offset += 1
        self.delivered = []
        return 0

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        self.calls.append(("send_offsets_to_transaction", timeout))
        self.offsets = offsets

    def commit_transaction(self, timeout):
        self.calls.append(("commit_transaction", timeout))

    def abort_transaction(self, timeout):
        self.calls.append(("abort_transaction", timeout))


class _Message:
    def __init__(self, offset: int):
        self._offset = offset

    def offset(self) -> int:
        return self._offset


class _GroupConsumer:
    def consumer_group_metadata(self):
        return "group-metadata"


@pytest.fixture
def no_progress(monkeypatch):
    monkeypatch.setattr(eos, "read_progress", lambda *_: (-1, None))
    monkeypatch.setattr(eos, "_progress_consumer", lambda _: _GroupConsumer())


ROWS = [(10, 1_700_000_000_000, b"k", b"v", None), (11, 1_700_000_000_001, None, b"w", None)]


@pytest.mark.parametrize("override", [None, "60000"])
def test_a_transaction_waits_no_longer_in_total_than_its_timeout(no_progress, override):
    writer = settings(**({"transaction.timeout.ms": override} if override else {}))
    producer = FakeProducer()
    result = eos._transaction(writer, producer, "orders", 0, ROWS)
    assert result.runs == [(10, 100, 2)] and result.records == 2
    waits = dict(producer.calls)
    assert list(waits) == ["begin_transaction", "flush", "send_offsets_to_transaction", "commit_transaction"]
    assert waits["flush"] + waits["send_offsets_to_transaction"] + waits["commit_transaction"] \
        < writer.transaction_timeout_ms / 1000
    assert producer.offsets[0].offset == 12 and producer.offsets[0].metadata == "101"


def test_an_unacknowledged_write_aborts_and_names_the_partition(no_progress):
    producer = FakeProducer(fail_delivery="Broker: Not enough in-sync replicas")
    with pytest.raises(KafkaOperationFailed, match=r"orders-0 .*Not enough in-sync replicas") as failed:
        eos._transaction(settings(), producer, "orders", 0, ROWS)
    assert isinstance(failed.value, ClusterError)
    assert [name for name, _ in producer.calls][-1] == "abort_transaction"
    assert "commit_transaction" not in dict(producer.calls)


# ------------------------------------------------------------------------- malformed MM2 records

GOOD_SYNC = OffsetSync("orders", 3, 100, 40)
GOOD_CHECKPOINT = Checkpoint("billing", "orders", 3, 100, 40, "meta")


@pytest.mark.parametrize(("key", "value", "field"), [
    (GOOD_SYNC.record_key()[:-2], GOOD_SYNC.record_value(), "OffsetSync key (partition)"),
    (GOOD_SYNC.record_key(), GOOD_SYNC.record_value()[:12], "OffsetSync value"),
    (b"\x00", GOOD_SYNC.record_value(), "OffsetSync key (topic)"),
    (struct.pack(">h", 50) + b"orders" + struct.pack(">i", 3), GOOD_SYNC.record_value(), "OffsetSync key (topic)"),
    (struct.pack(">h", -1) + struct.pack(">i", 3), GOOD_SYNC.record_value(), "null STRING"),
    (struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 3), GOOD_SYNC.record_value(), "not UTF-8"),
    (GOOD_SYNC.record_key(), None, "OffsetSync value"),
])
def test_a_malformed_offset_sync_raises_record_malformed_naming_the_field(key, value, field):
    with pytest.raises(RecordMalformed, match=field.replace("(", r"\(").replace(")", r"\)")):
        OffsetSync.from_record(key, value)


@pytest.mark.parametrize(("key", "value", "field"), [
    (GOOD_CHECKPOINT.record_key(), struct.pack(">h", 1) + GOOD_CHECKPOINT.record_value()[2:], "unsupported version 1"),
    (GOOD_CHECKPOINT.record_key(), GOOD_CHECKPOINT.record_value()[:10], "Checkpoint value"),
    (GOOD_CHECKPOINT.record_key(), GOOD_CHECKPOINT.record_value()[:-2], "Checkpoint value (metadata)"),
    (GOOD_CHECKPOINT.record_key()[:9], GOOD_CHECKPOINT.record_value(), "Checkpoint key (topic)"),
])
def test_a_malformed_checkpoint_raises_record_malformed_naming_the_field(key, value, field):
    with pytest.raises(RecordMalformed, match=field.replace("(", r"\(").replace(")", r"\)")):
        Checkpoint.from_record(key, value)


def test_record_malformed_is_a_user_error_and_still_a_value_error():
    # Mm2specError: the CLI reports its message, not "internal error"; ValueError: readers that
    # skip undecodable records (mm2spark.kafka.load_offset_syncs) keep skipping them.
    assert issubclass(RecordMalformed, Mm2specError) and issubclass(RecordMalformed, ValueError)


def test_well_formed_records_still_round_trip():
    assert OffsetSync.from_record(GOOD_SYNC.record_key(), GOOD_SYNC.record_value()) == GOOD_SYNC
    assert Checkpoint.from_record(GOOD_CHECKPOINT.record_key(), GOOD_CHECKPOINT.record_value()) == GOOD_CHECKPOINT


def test_a_name_too_long_for_kafkas_string_cannot_be_written():
    with pytest.raises(RecordMalformed, match="Checkpoint group is too long"):
        Checkpoint("g" * 40_000, "orders", 0, 1, 1).record_key()
