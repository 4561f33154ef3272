"""mm2spec.mm2.retry: which Kafka errors are retried, for how long, and how bulk calls are chunked."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2spec.mm2 import retry
from mm2spec.mm2.retry import chunks, is_retriable, retry_call


def _kafka(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def test_leader_and_coordinator_moves_are_retriable_authorization_is_not():
    assert is_retriable(_kafka(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert is_retriable(_kafka(KafkaError.LEADER_NOT_AVAILABLE))
    assert is_retriable(_kafka(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
    assert not is_retriable(_kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert not is_retriable(ValueError("not a Kafka error"))


def test_unknown_topic_is_retried_only_right_after_a_create():
    unknown = _kafka(KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert not is_retriable(unknown)
    assert is_retriable(unknown, unknown_topic_ok=True)


def test_retry_call_returns_once_the_retriable_error_clears(monkeypatch):
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)
    failures = [_kafka(KafkaError.NOT_LEADER_FOR_PARTITION), _kafka(KafkaError.LEADER_NOT_AVAILABLE)]

    def call():
        if failures:
            raise failures.pop(0)
        return "ok"

    assert retry_call(call) == "ok"
    assert failures == []


def test_retry_call_gives_up_at_the_deadline_and_at_once_on_other_errors(monkeypatch):
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(retry.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)
    calls = []

    def moving():
        calls.append(1)
        raise _kafka(KafkaError.NOT_LEADER_FOR_PARTITION)

    with pytest.raises(KafkaException):
        retry_call(moving, deadline_s=5)
    assert 1 < len(calls) <= 6

    def denied():
        calls.append(2)
        raise _kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED)

    with pytest.raises(KafkaException):
        retry_call(denied)
    assert calls.count(2) == 1


def test_chunks_keep_each_request_within_the_record_budget():
    topics = [(f"t{i}", 3) for i in range(10_000)]  # the 10,000-topic plan benchmark's setup
    parts = list(chunks(topics, weight=lambda t: 1 + t[1], budget=5_000))
    assert [t for part in parts for t in part] == topics
    assert all(sum(1 + t[1] for t in part) <= 5_000 for part in parts)
    assert len(parts) == 8
    assert list(chunks([("huge", 9_999)], weight=lambda t: t[1], budget=5_000)) == [[("huge", 9_999)]]
    assert list(chunks([])) == []


def _client_log(watch: retry.LeaderLossWatch, facility: str, text: str, level: int = logging.WARNING) -> None:
    """A line of a librdkafka client's log as confluent-kafka hands it to the client's ``logger``."""
    watch.logger.log(level, "%s [%s] %s", facility, "rdkafka#producer-1", text)


def test_a_leader_lost_for_good_is_noticed_in_the_clients_log_and_the_log_goes_on():
    seen = []
    forward = logging.Logger("forward", logging.INFO)
    forward.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, record: seen.append(record.getMessage())})())
    watch = retry.LeaderLossWatch("client", forward)
    _client_log(watch, "FAIL", "127.0.0.1:9092/1: Disconnected")
    _client_log(watch, "METADATAUPDATE", "Partition t(x)[0]: leader epoch is not newer 0 >= 0", logging.DEBUG)
    assert not watch.lost
    _client_log(watch, "METADATAUPDATE", "[thrd:main]: Partition t(I/97QkVqSdGxce2tc3sF5A)[3]: new leader-1 not found in cache")
    assert watch.lost
    assert len(seen) == 2 and seen[0].startswith("FAIL [rdkafka#producer-1]"), seen  # the DEBUG line is below INFO


def test_the_watch_reads_a_real_clients_log():
    """confluent-kafka hands a client's log to its ``logger`` as (facility, client name, text):
    the shape ``LeaderLossWatch`` reads."""
    from confluent_kafka import Producer

    seen = []
    forward = logging.Logger("forward", logging.DEBUG)
    forward.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, record: seen.append(record.args)})())
    watch = retry.LeaderLossWatch("client", forward)
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "logger": watch.logger, "reconnect.backoff.ms": 10})
    deadline = time.monotonic() + 20
    while not seen and time.monotonic() < deadline:
        producer.poll(0.2)
    assert seen and seen[0][0] == "FAIL" and "127.0.0.1:1" in seen[0][2], seen
    assert not watch.lost
