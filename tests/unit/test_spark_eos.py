"""Unit tests of the exactly-once protocol's transaction timeouts and the ACLs its names need, and of
MM2 record decoding errors (no Spark session, no network; the JVM writer that runs the protocol is tested in
tests/integration/test_spark_mirror.py)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spark.eos import DEFAULT_TRANSACTION_TIMEOUT_MS, EosWriterSettings, TransactionTimeouts
from mm2spark.records import Checkpoint, OffsetSync
from mm2spec.errors import JobConfigError, Mm2specError, RecordMalformed
from mm2spec.spec.load import load_desired_state

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: The Java producer's default transaction.timeout.ms.
JAVA_DEFAULT_MS = 60_000


def settings(**overrides: str) -> EosWriterSettings:
    return EosWriterSettings(job="payments-dr", flow="primary-to-dr", producer_overrides=tuple(sorted(overrides.items())))


# ------------------------------------------------------------------- the writer's ACLs

def writer_name_bindings(state) -> set[tuple]:
    """The derived bindings on the names each flow's exactly-once writer uses, as the writer names them."""
    names = set()
    for flow in state.mirrors:
        writer = EosWriterSettings(state.name, flow.name)
        names |= {writer.progress_group, writer.transactional_id_prefix}
    return {(b.cluster, b.resource_type, b.resource_name, b.pattern_type, b.operation) for b in state.acl_bindings
            if b.resource_name in names}


def test_the_spark_exactly_once_writer_is_granted_its_progress_group_and_transactional_ids():
    state = load_desired_state(EXAMPLES / "dr-spec.example.yaml", "prod")
    flow = state.mirrors[0]
    assert (state.engine, flow.exactly_once) == ("spark", True)
    writer = EosWriterSettings(state.name, flow.name)
    group, prefix = writer.progress_group, writer.transactional_id_prefix
    assert writer_name_bindings(state) == {
        # OffsetFetch (requireStable) needs DESCRIBE, TxnOffsetCommit READ
        (flow.target, "GROUP", group, "LITERAL", "READ"), (flow.target, "GROUP", group, "LITERAL", "DESCRIBE"),
        # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn need WRITE on the transactional id
        (flow.target, "TRANSACTIONAL_ID", prefix, "PREFIXED", "WRITE"),
        (flow.target, "TRANSACTIONAL_ID", prefix, "PREFIXED", "DESCRIBE")}


@pytest.mark.parametrize(("spec", "env"), [("redhat-dr-a-to-b.yaml", None), ("dr-spec.example.yaml", "dev")])
def test_connect_or_at_least_once_grants_nothing_on_the_spark_writers_names(spec, env):
    state = load_desired_state(EXAMPLES / spec, env)
    assert state.engine == "connect" or not state.exactly_once
    assert state.acl_bindings and not writer_name_bindings(state)


# ------------------------------------------------------------------- the transaction's budget

@pytest.mark.parametrize("timeout_ms", [1_000, JAVA_DEFAULT_MS, DEFAULT_TRANSACTION_TIMEOUT_MS, 900_000])
def test_the_waits_of_one_transaction_stay_below_its_timeout(timeout_ms):
    timeouts = TransactionTimeouts.within(timeout_ms)
    assert timeouts.total == pytest.approx(timeouts.write + timeouts.send_offsets + timeouts.commit)
    assert timeouts.total < timeout_ms / 1000
    assert min(timeouts.write, timeouts.send_offsets, timeouts.commit) > 0


def test_the_writer_sets_the_transaction_timeout_its_waits_are_derived_from():
    writer = settings()
    conf = writer.writer_settings()
    assert int(conf["producer.transaction.timeout.ms"]) == writer.transaction_timeout_ms == DEFAULT_TRANSACTION_TIMEOUT_MS
    assert writer.timeouts.total < writer.transaction_timeout_ms / 1000


@pytest.mark.parametrize("override", ["60000", "30000", " 900000 "])
def test_a_producer_override_of_the_transaction_timeout_moves_the_budget(override):
    writer = settings(**{"transaction.timeout.ms": override})
    conf = writer.writer_settings()
    assert int(conf["producer.transaction.timeout.ms"]) == int(override) == writer.transaction_timeout_ms
    assert writer.timeouts.total < int(override) / 1000


@pytest.mark.parametrize("override", ["", "1 minute", "0", "-5"])
def test_an_unusable_transaction_timeout_override_is_a_job_config_error_at_start(override):
    with pytest.raises(JobConfigError, match="producer.override.transaction.timeout.ms"):
        settings(**{"transaction.timeout.ms": override})


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
