"""New target partitions and the Spark job's writer: the driver sends to no target partition before
its leader answers for it (``mm2spark.kafka.await_leaders`` through ``mm2.retry.retry_each``), and
asks each partition once per job (``FlowPipeline.await_target_leaders``)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2spec import errors
from mm2spec.mm2 import retry
from mm2spec.mm2.retry import retry_each

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "spark"))

from mm2spark import kafka  # noqa: E402


def _kafka(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


@pytest.fixture
def clock(monkeypatch):
    """retry's time, advanced by its sleeps only."""
    now = [0.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(retry.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


# ------------------------------------------------------------------------------- retry_each

def test_retry_each_asks_again_only_for_what_failed(clock):
    asked = []
    refusals = {"a": 2, "b": 0, "c": 1}

    def attempt(pending):
        asked.append(list(pending))
        failed = {item: _kafka(KafkaError.NOT_LEADER_FOR_PARTITION) for item in pending if refusals[item] > 0}
        for item in failed:
            refusals[item] -= 1
        return failed

    assert retry_each(attempt, ["a", "b", "c"]) == {}
    assert asked == [["a", "b", "c"], ["a", "c"], ["a"]]


def test_retry_each_bounds_a_wait_without_progress_not_the_whole_wait(clock):
    left = list(range(40))

    def trickle(pending):  # one item comes through per attempt, for longer than stall_s in all
        left.pop(0)
        return {item: _kafka(KafkaError.LEADER_NOT_AVAILABLE) for item in pending if item in left}

    assert retry_each(trickle, list(range(40)), stall_s=5) == {}
    assert clock[0] > 5, "the whole wait outlasted stall_s"

    def stuck(pending):
        return {item: _kafka(KafkaError.NOT_LEADER_FOR_PARTITION) for item in pending if item == "x"}

    began = clock[0]
    failed = retry_each(stuck, ["x", "y"], stall_s=5)
    assert list(failed) == ["x"]
    assert clock[0] - began <= 5


def test_retry_each_raises_what_no_retry_clears_at_once(clock):
    calls = []

    def denied(pending):
        calls.append(1)
        return {pending[0]: _kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED)}

    with pytest.raises(KafkaException):
        retry_each(denied, ["a"])
    assert len(calls) == 1
    unknown = {"a": _kafka(KafkaError.UNKNOWN_TOPIC_OR_PART)}
    with pytest.raises(KafkaException):
        retry_each(lambda pending: unknown, ["a"])
    assert retry_each(lambda pending: dict(unknown) if clock[0] < 1 else {}, ["a"], unknown_topic_ok=True) == {}


# ------------------------------------------------------------------------------- await_leaders

class _Future:
    def __init__(self, error: int | None):
        self.error = error

    def result(self, timeout=None):
        if self.error is not None:
            raise _kafka(self.error)
        return SimpleNamespace(offset=0)


class _Target:
    """An AdminClient whose new partitions answer ListOffsets only after ``refusals[tp]`` refusals."""

    def __init__(self, refusals: dict[tuple[str, int], list[int]]):
        self.refusals = refusals
        self.requests: list[int] = []

    def list_offsets(self, request, request_timeout=None):
        self.requests.append(len(request))
        out = {}
        for tp in request:
            errors_left = self.refusals.get((tp.topic, tp.partition), [])
            out[tp] = _Future(errors_left.pop(0) if errors_left else None)
        return out


def test_new_partitions_are_waited_for_until_their_leaders_answer(clock):
    target = _Target({("wide-1", 0): [KafkaError.NOT_LEADER_FOR_PARTITION] * 3,
                      ("wide-1", 1): [KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.LEADER_NOT_AVAILABLE],
                      ("wide-2", 4): [KafkaError.UNKNOWN_TOPIC_OR_PART]})
    kafka.await_leaders(target, [(t, p) for t in ("wide-1", "wide-2") for p in range(5)])
    assert target.requests == [10, 3, 2, 1], "each attempt asks only for the partitions still refused"


def test_thousands_of_partitions_are_asked_in_bounded_requests(clock):
    target = _Target({})
    kafka.await_leaders(target, [(f"t{i}", p) for i in range(1000) for p in range(5)])
    assert target.requests == [2000, 2000, 1000]


def test_a_leader_that_never_answers_fails_the_batch_naming_the_partition(clock):
    target = _Target({("wide-7", 3): [KafkaError.NOT_LEADER_FOR_PARTITION] * 1000})
    with pytest.raises(errors.KafkaOperationFailed, match=r"1 target partition\(s\) made no progress .* in 30s: wide-7-3"):
        kafka.await_leaders(target, [("wide-7", p) for p in range(5)])
    denied = _Target({("secret", 0): [KafkaError.TOPIC_AUTHORIZATION_FAILED]})
    with pytest.raises(errors.KafkaOperationFailed, match="list offsets of secret-0: .*AUTHORIZATION"):
        kafka.await_leaders(denied, [("secret", 0)])


# ------------------------------------------------------------------------------- the pipeline

def test_each_target_partition_is_waited_for_once_per_job(monkeypatch):
    from mm2spark.pipeline import FlowPipeline

    waited: list[set] = []
    monkeypatch.setattr(kafka, "await_leaders", lambda _admin, partitions: waited.append(set(partitions)))
    pipeline = object.__new__(FlowPipeline)  # no Spark: only the target's bookkeeping
    pipeline.target_admin = object()
    pipeline.answering = set()
    pipeline.flow = SimpleNamespace(name="primary-to-dr")
    pipeline.await_target_leaders({("primary.orders", 0), ("primary.orders", 1)})
    pipeline.await_target_leaders({("primary.orders", 0), ("primary.orders", 1)})
    pipeline.await_target_leaders({("primary.orders", 1), ("primary.orders", 2)})
    assert waited == [{("primary.orders", 0), ("primary.orders", 1)}, {("primary.orders", 2)}]

    def away(_admin, _partitions):
        raise errors.KafkaOperationFailed("no leader")

    monkeypatch.setattr(kafka, "await_leaders", away)
    with pytest.raises(errors.KafkaOperationFailed):
        pipeline.await_target_leaders({("primary.orders", 3)})
    assert ("primary.orders", 3) not in pipeline.answering, "asked again by the batch that runs next"
