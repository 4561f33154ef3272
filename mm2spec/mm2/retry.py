"""How every Kafka call is retried and every bulk admin call is chunked: the one place for both;
and how a librdkafka client that will never recover is recognised (``LeaderLossWatch``).

Used by mm2spec.live (plan, provisioning, playbooks), by the Spark job's own admin code
(spark/mm2spark/kafka.py) and by the integration tests' helpers. Stdlib only, like the rest of
mm2spec.mm2, because the Spark job ships it to its executors: a Kafka error is recognised by the
shape of confluent-kafka's exceptions (``exc.args[0]`` has ``name()`` and ``retriable()``), not by
importing the client.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Collection, Iterable, Iterator, TypeVar

T = TypeVar("T")

RETRIABLE = frozenset({
    "NOT_LEADER_FOR_PARTITION",  # librdkafka's name for NOT_LEADER_OR_FOLLOWER: a leader moved
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",  # a partition created a moment ago, or a broker restarting
    "UNKNOWN_TOPIC_OR_PART",  # right after a create, before every broker knows the topic
    "COORDINATOR_LOAD_IN_PROGRESS",  # a group coordinator still loading after a start
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "REQUEST_TIMED_OUT",
    "NOT_ENOUGH_REPLICAS",
    "NOT_CONTROLLER",
})
"""Errors that a retry a moment later can clear, besides those librdkafka itself flags retriable.
UNKNOWN_TOPIC_OR_PART is only retried by callers that just created the topic (``unknown_topic_ok``):
elsewhere it means the topic does not exist."""

IDEMPOTENT_RETRIABLE = frozenset({"_TIMED_OUT", "REQUEST_TIMED_OUT", "_TRANSPORT"})
"""Also retried, through ``also``, by calls that may be repeated whatever the first attempt did:
creating an ACL binding that exists, or deleting one that is gone, is no error. A request that
timed out may or may not have been applied, so only such calls can simply send it again."""

RETRY_DEADLINE_S = 30.0
"""How long a retriable error is retried: leader elections and coordinator loads on a KRaft
cluster settle within seconds; 30 s covers a broker restart on a loaded machine."""
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0
"""Backoff doubles from 50 ms (a leader moves in well under a second) up to 1 s (no busy loop
against a restarting broker)."""

MAX_RECORDS_PER_REQUEST = 5_000
"""Most metadata records one bulk admin request may produce. A KRaft controller refuses a request
that would write more than 10,000 records in one operation (POLICY_VIOLATION: "Excessively large
number of partitions per request"): a CreateTopics of 4,000 topics x 3 partitions already is. Half
of that limit leaves room for the topic and config records written with the partitions."""

MAX_ACLS_PER_CREATE = 1_000
"""ACL bindings per CreateAcls request: one metadata record each, like a topic's, but bounded well
below ``MAX_RECORDS_PER_REQUEST`` so a request timed out on a loaded controller costs little to resend."""

MAX_TOPICS_PER_DELETE = 1_000
"""Topics per DeleteTopics request: one metadata record each, bounded like ``MAX_ACLS_PER_CREATE``."""

MAX_ACL_FILTERS_PER_DELETE = 1_000
"""Most filters per DeleteAcls request (``acl_filters_per_delete``)."""

MAX_ACL_MATCHES_PER_DELETE = 4_000_000
"""Filters x ACL bindings one DeleteAcls request may cost. A KRaft controller tests every filter
against every binding of the cluster, milliseconds a filter at tens of thousands of bindings, so a
request far above this bound (the filters of one regex resource at 10,000 topics) outlasts the
request timeout (_TIMED_OUT), while one within it answers in seconds (benchmarks/README.md, "Figures
behind limits in the code")."""


def acl_filters_per_delete(bindings: int) -> int:
    """Filters per DeleteAcls request when the cluster holds about ``bindings`` ACL bindings."""
    return max(1, min(MAX_ACL_FILTERS_PER_DELETE, MAX_ACL_MATCHES_PER_DELETE // max(1, bindings)))


MAX_RESOURCES_PER_DESCRIBE = 2_000
"""Resources per describe request (DescribeTopics, DescribeConfigs): reads have no broker limit, but
a bounded request keeps each response to a few MB and its timeout meaningful on 10,000 topics."""


LOST_LEADER_FACILITY = "METADATAUPDATE"
LOST_LEADER_TEXT = "new leader-1 not found in cache"
"""What librdkafka logs (facility, text) when a metadata update says a partition has no leader
(-1), as one does while the partition's only broker restarts: librdkafka 2.16 and earlier then
leave the partition without a leader for the client's whole life, whatever later metadata says
(librdkafka issue 5430), so a producer queues its records and never sends them. The cure is a new
client; ``LeaderLossWatch`` tells when one is needed."""


class LeaderLossWatch(logging.Handler):
    """A librdkafka client's log, watched for ``LOST_LEADER_TEXT``: pass ``logger`` as the client's
    ``logger`` setting; ``lost`` turns true once the client logged it. Every record goes on to
    ``forward`` (as the client's log would have) at that logger's level. confluent-kafka hands its
    client's log over when the client is polled, so ``lost`` is current after a ``poll``."""

    def __init__(self, name: str, forward: logging.Logger):
        super().__init__()
        self.forward = forward
        self.lost = False
        self.logger = logging.Logger(name, logging.DEBUG)  # the client's own: not in the logging tree
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if args and args[0] == LOST_LEADER_FACILITY and LOST_LEADER_TEXT in str(args[-1]):
            self.lost = True
        if self.forward.isEnabledFor(record.levelno):
            self.forward.handle(record)


def kafka_error_name(exc: BaseException) -> str | None:
    """The Kafka error name of a confluent-kafka exception (``KafkaException(KafkaError)``), else None."""
    error = exc.args[0] if exc.args else None
    name = getattr(error, "name", None)
    return name() if callable(name) else None


def is_retriable(exc: BaseException, unknown_topic_ok: bool = False, also: Collection[str] = ()) -> bool:
    """Whether ``exc`` is a Kafka error that a later attempt can clear (``also``: more error names
    the caller can retry, e.g. ``IDEMPOTENT_RETRIABLE``)."""
    name = kafka_error_name(exc)
    if name is None:
        return False
    if name == "UNKNOWN_TOPIC_OR_PART":
        return unknown_topic_ok
    retriable = getattr(exc.args[0], "retriable", None)
    return name in RETRIABLE or name in also or (callable(retriable) and bool(retriable()))


def retry_call(call: Callable[[], T], unknown_topic_ok: bool = False, deadline_s: float = RETRY_DEADLINE_S,
               also: Collection[str] = ()) -> T:
    """``call()``, called again with a growing pause while it fails with a retriable Kafka error
    (``is_retriable``, with ``also``), until ``deadline_s``; then (or on any other error) the last
    exception propagates."""
    deadline, pause = time.monotonic() + deadline_s, FIRST_PAUSE_S
    while True:
        try:
            return call()
        except Exception as exc:  # anything not retriable is re-raised as is
            if not is_retriable(exc, unknown_topic_ok, also) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_S)


def retry_each(attempt: Callable[[list[T]], dict[T, BaseException]], items: Iterable[T], unknown_topic_ok: bool = False,
               stall_s: float = RETRY_DEADLINE_S, also: Collection[str] = ()) -> dict[T, BaseException]:
    """``attempt(pending)`` for many items at once (partitions, resources), called again with only the
    items it failed on (it returns them with their exceptions) after a growing pause, while every
    failure is retriable (``is_retriable`` with ``also``). Returns ``{}`` once every item succeeded,
    or the items still failing after ``stall_s`` in which none succeeded: a bound on a wait without
    progress, not on the whole wait (a broker brings thousands of new partitions online over minutes,
    a few at a time). A failure that is not retriable propagates at once."""
    pending = list(items)
    deadline, pause = time.monotonic() + stall_s, FIRST_PAUSE_S
    while pending:
        failed = attempt(pending)
        for exc in failed.values():
            if not is_retriable(exc, unknown_topic_ok, also):
                raise exc
        if len(failed) < len(pending):
            deadline = time.monotonic() + stall_s
        pending = [item for item in pending if item in failed]
        if not pending:
            break
        if time.monotonic() + pause > deadline:
            return failed
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_S)  # not reset by progress: each attempt asks for every item left
    return {}


def chunks(items: Iterable[T], weight: Callable[[T], int] = lambda _item: 1,
           budget: int = MAX_RECORDS_PER_REQUEST) -> Iterator[list[T]]:
    """``items`` in consecutive lists whose total ``weight`` (metadata records written) stays within
    ``budget``; an item heavier than the budget goes alone."""
    chunk: list[T] = []
    used = 0
    for item in items:
        cost = max(1, weight(item))
        if chunk and used + cost > budget:
            yield chunk
            chunk, used = [], 0
        chunk.append(item)
        used += cost
    if chunk:
        yield chunk
