"""What ``mm2spec render`` writes, run by the real MirrorMaker 2 (issue 3).

Every config here comes from a spec through ``render``; only the addresses are the fixtures':
connector configs pass MM2's own validation, a Connect worker started from the rendered
``connect-distributed.properties`` runs the rendered connectors and mirrors records, topic
configs and consumer group offsets, ``mm2.properties`` runs MM2 in dedicated mode, and on
SASL/SCRAM clusters with the StandardAuthorizer the ACLs ``compile`` derives are all the ``mm2``
user has, with exactly-once on.
"""

from __future__ import annotations

import contextlib
import logging
import re
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer,
                             TopicCollection, TopicPartition)
from confluent_kafka.admin import AdminClient

from mm2spec.spec.load import load_desired_state
from mm2spec.live.connect import ConnectClient
from mm2spec.dev import MM2_PASSWORD, MirrorMaker
from mm2spec.dev import process as dev_process
from mm2spec.errors import Mm2specError
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.mm2.retry import retry_call
from mm2spec.spec.model import DesiredState
from mm2spec.render import connectors, render_files, worker_properties, write_files
from specs import MM2_SECRET, SECRETS, retarget_example, write_spec

pytestmark = pytest.mark.integration

#: How long anything that should happen "in seconds" may take on a loaded two-core machine.
DEADLINE = 90.0
#: Intervals short enough that topic refreshes, config syncs and checkpoints happen within a test.
FAST = {"refreshTopicsIntervalSeconds": 1, "refreshGroupsIntervalSeconds": 1, "emitCheckpointsIntervalSeconds": 1,
        "syncGroupOffsetsIntervalSeconds": 1, "config": {"sync.topic.configs.interval.seconds": "1"}}
#: The clusters' aliases in this module's specs. MM2 names internal topics after the source alias
#: (mm2-offset-syncs.<source>.internal, <source>.checkpoints.internal); other modules use "primary"
#: on the same session clusters and expect those topics to be theirs.
SOURCE, TARGET = ALIASES = ("prod", "dr")
#: Name of the spec behind the shared worker: specs with the same name render the same worker config.
WORKER_SPEC = "it-mm2"
#: MM2 writes the offset sync of a partition's latest record when Connect commits offsets
#: (offset.flush.interval.ms, 60 s by default); translated offsets at a partition's end wait for it.
WORKER = {"config": {"offset.flush.interval.ms": "2000"}}

_QUIET = logging.getLogger("tests.mm2-rendered.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

T = TypeVar("T")


def eventually(observe: Callable[[], T], done: Callable[[T], bool], what: str, *, timeout: float = DEADLINE,
               guard: Callable[[], None] | None = None) -> T:
    """Poll ``observe()`` until ``done`` holds for what it returns; fail naming ``what`` and the last value.

    ``guard`` runs before each poll and fails the test early (e.g. a connector task FAILED).
    """
    deadline = time.monotonic() + timeout
    while True:
        if guard:
            guard()
        seen = observe()
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f}s; last seen: {seen!r}", pytrace=False)
        time.sleep(0.5)


# ------------------------------------------------------------------------------------ connectors

def validation_errors(client: ConnectClient, connector: dict) -> tuple[int, list[str]]:
    """MM2's own verdict on a rendered connector: the error count and ``key: message`` lines.

    The rendered config is what ``PUT /connectors/{name}/config`` takes, where the name comes from
    the path; the validate endpoint has no name in its path, so it gets it in the config.
    """
    config = {"name": connector["name"], **connector["config"]}
    plugin = config["connector.class"].rsplit(".", 1)[-1]
    answer = client.validate(plugin, config)
    errors = [f"{c['value']['name']}: {e}" for c in answer["configs"] for e in c["value"].get("errors", [])]
    return answer["error_count"], errors


class Mirroring:
    """The rendered connectors of one spec, running on a Connect worker."""

    def __init__(self, client: ConnectClient, state: DesiredState):
        self.client = client
        self.names = [c["name"] for c in connectors(state)]

    def statuses(self) -> dict[str, dict | None]:
        return {name: self.client.connector_status(name) for name in self.names}

    def healthy(self) -> None:
        """Fail at once, with MM2's stack trace, if a connector or one of its tasks FAILED."""
        for name, status in self.statuses().items():
            if status is None:
                continue
            for part in [status["connector"], *status["tasks"]]:
                if part["state"] == "FAILED":
                    pytest.fail(f"{name} {'task ' + str(part['id']) if 'id' in part else 'connector'} FAILED:\n"
                                f"{part.get('trace', '(no trace)')}", pytrace=False)

    def wait_running(self) -> None:
        """Until every connector RUNS and the source connector has running tasks."""
        def running(statuses: dict) -> bool:
            return all(s and s["connector"]["state"] == "RUNNING" and all(t["state"] == "RUNNING" for t in s["tasks"])
                       and (s["tasks"] or not name.endswith("MirrorSourceConnector")) for name, s in statuses.items())
        eventually(self.statuses, running, "the rendered connectors running", guard=self.healthy)


@contextlib.contextmanager
def mirroring(worker_url: str, state: DesiredState) -> Iterator[Mirroring]:
    """Validate and create the spec's rendered connectors; delete them afterwards."""
    client = ConnectClient(worker_url)
    run = Mirroring(client, state)
    for connector in connectors(state):
        count, errors = validation_errors(client, connector)
        assert count == 0, f"{connector['name']}: MM2 rejects the rendered config:\n" + "\n".join(errors)
    try:
        for connector in connectors(state):
            client.put_connector_config(connector["name"], connector["config"])
        yield run
    except BaseException:
        with contextlib.suppress(Mm2specError):  # the first failure is the one to report
            for name in run.names:
                client.delete_connector(name)
        raise
    for name in run.names:
        client.delete_connector(name)


# ------------------------------------------------------------------------------- records, groups

Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def produce(conf: dict, topic: str, counts: dict[int, int]) -> dict[int, list[Record]]:
    """``counts[p]`` records with keys and headers into partition ``p``; what was sent, per partition."""
    failures: list[str] = []
    producer = Producer({**conf, "logger": _QUIET})
    sent: dict[int, list[Record]] = {}
    for partition, count in counts.items():
        for i in range(count):
            record = (f"key-{partition}-{i}".encode(), f"{topic}/{partition}/{i}".encode(),
                      [("seq", str(i).encode()), ("origin", b"source")])
            producer.produce(topic, key=record[0], value=record[1], headers=record[2], partition=partition,
                             on_delivery=lambda err, _msg: err and failures.append(str(err)))
            sent.setdefault(partition, []).append(record)
    assert producer.flush(60) == 0 and not failures, f"producing to {topic} failed: {failures}"
    return sent


@dataclass(frozen=True)
class Mirrored:
    """Records read back from a topic, per partition, in offset order."""

    records: dict[int, list[Record]]
    offsets: dict[int, list[int]]


def read_all(conf: dict, topic: str, counts: dict[int, int], timeout: float = DEADLINE) -> Mirrored:
    """Read ``topic`` from the start (read_committed) until each partition has ``counts[p]`` records,
    then a little longer, so duplicates would show."""
    consumer = Consumer({**conf, "group.id": f"it-reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "logger": _QUIET})
    consumer.assign([TopicPartition(topic, p, -2) for p in counts])  # -2: OFFSET_BEGINNING
    records: dict[int, list[Record]] = {p: [] for p in counts}
    offsets: dict[int, list[int]] = {p: [] for p in counts}
    deadline = time.monotonic() + timeout
    drain_until = None
    try:
        while time.monotonic() < (drain_until or deadline):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                records[message.partition()].append((message.key(), message.value(), list(message.headers() or [])))
                offsets[message.partition()].append(message.offset())
            if drain_until is None and all(len(records[p]) >= n for p, n in counts.items()):
                drain_until = time.monotonic() + 2.0
    finally:
        consumer.close()
    return Mirrored(records, offsets)


def wait_for_topic(admin: KafkaAdmin, topic: str, partitions: int) -> None:
    eventually(lambda: admin.topics(names=[topic], with_configs=False).get(topic),
               lambda found: found is not None and found.partitions == partitions,
               f"topic {topic} with {partitions} partitions on {admin.cluster.alias}")


def topic_config(admin: KafkaAdmin, topic: str, key: str) -> str | None:
    live = admin.topics(names=[topic]).get(topic)
    return live.configs.get(key) if live else None


def commit_offsets(conf: dict, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` for ``group`` without joining it: the group stays idle (no members)."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "logger": _QUIET})
    try:
        # A fresh cluster creates __consumer_offsets on the first commit: NOT_COORDINATOR for a while.
        retry_call(lambda: consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                           asynchronous=False), deadline_s=DEADLINE)
    finally:
        consumer.close()


def group_offsets(conf: dict, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({**conf, "logger": _QUIET})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    return data[at + 2:at + 2 + length].decode(), at + 2 + length


def checkpoints(conf: dict, topic: str, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    """The latest checkpoint per (topic, partition) of ``group``: (upstream offset, downstream offset).

    MM2's Checkpoint layout: key = group, topic (int16-length strings), partition (int32); value =
    version (int16), upstream offset, downstream offset (int64), metadata.
    """
    consumer = Consumer({**conf, "group.id": f"it-checkpoints-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "logger": _QUIET})
    consumer.assign([TopicPartition(topic, 0, -2)])
    latest: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        _low, high = retry_call(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10),
                                unknown_topic_ok=True)
        position = 0
        deadline = time.monotonic() + 30
        while position < high and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            position = message.offset() + 1
            key = message.key()
            owner, at = _string(key, 0)
            name, at = _string(key, at)
            (partition,) = struct.unpack_from(">i", key, at)
            if owner == group:
                _version, upstream, downstream = struct.unpack_from(">hqq", message.value(), 0)
                latest[(name, partition)] = (upstream, downstream)
    finally:
        consumer.close()
    return latest


def read_as(conf: dict, group: str, topic: str) -> list:
    """Subscribe to ``topic`` in ``group`` and return the first error codes (or records) seen."""
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "logger": _QUIET})
    consumer.subscribe([topic])
    seen: list = []
    deadline = time.monotonic() + 30
    try:
        while not seen and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                seen.append(message.error().code() if message.error() else message.value())
    finally:
        consumer.close()
    return seen


AUTHORIZATION_FAILURE = re.compile(r"AuthorizationException|AUTHORIZATION_FAILED|[Nn]ot authorized")


def refusals(log: Path) -> list[str]:
    """Lines of a Connect log where the broker refused the worker or a connector something."""
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    return [line for line in lines if AUTHORIZATION_FAILURE.search(line)][:20]


@contextlib.contextmanager
def refusals_reported(log: Path) -> Iterator[None]:
    """A failure inside names the authorization errors in the worker's log: usually their cause."""
    try:
        yield
    except Exception as failure:
        denied = refusals(log)
        if denied:
            pytest.fail(f"{failure}\nthe worker's log shows refusals:\n" + "\n".join(denied), pytrace=False)
        raise


# ----------------------------------------------------------------------------------- fixtures

@dataclass(frozen=True)
class Worker:
    """The shared Connect worker: its REST URL and the desired state its config was rendered from."""

    url: str
    state: DesiredState


@pytest.fixture(scope="module")
def rendered_worker(kafka_pair, connect_worker, tmp_path_factory) -> Worker:
    """One Connect worker for the PLAINTEXT tests, started from the rendered worker config of an
    ``it-mm2`` spec (its ``listeners`` moved to a free port)."""
    folder = tmp_path_factory.mktemp("rendered-worker")
    spec = write_spec(folder / "spec.yaml", kafka_pair, ["unused"], engine="connect", name=WORKER_SPEC, connect=WORKER,
                      aliases=ALIASES)
    state = load_desired_state(spec, None)
    write_files(render_files(state), folder)
    worker = connect_worker(folder / "connect-distributed.properties", overrides={"listeners": "http://127.0.0.1:0"})
    return Worker(worker.url, state)


def flow_spec(path: Path, pair, topics, groups=(), **mirror) -> DesiredState:
    """A spec of the shared worker's family (same name, so the same rendered worker config)."""
    spec = write_spec(path, pair, topics, groups, engine="connect", name=WORKER_SPEC, connect=WORKER, aliases=ALIASES,
                      mirror={"name": f"flow-{uuid.uuid4().hex[:10]}", **FAST, **mirror})
    return load_desired_state(spec, None)


# -------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("case", ["example-dev", "seed000"])
def test_rendered_connector_configs_pass_mm2_validation(case, kafka_pair, rendered_worker, tmp_path):
    if case == "example-dev":
        spec = retarget_example("dr-spec.example.yaml", tmp_path / "spec.yaml",
                                {"primary": kafka_pair.primary.bootstrap, "dr": kafka_pair.dr.bootstrap}, env="dev")
        state = load_desired_state(spec, "dev")
        expected = {"primary-to-dr-MirrorSourceConnector", "primary-to-dr-MirrorCheckpointConnector"}
    else:
        spec = retarget_example("redhat-dr-a-to-b.yaml", tmp_path / "spec.yaml",
                                {"A": kafka_pair.primary.bootstrap, "B": kafka_pair.dr.bootstrap})
        state = load_desired_state(spec, None)
        expected = {"A-to-B-MirrorSourceConnector", "A-to-B-MirrorCheckpointConnector"}
    rendered = connectors(state)
    assert {c["name"] for c in rendered} == expected
    client = ConnectClient(rendered_worker.url)
    for connector in rendered:
        assert connector["config"]["source.cluster.bootstrap.servers"] == kafka_pair.primary.bootstrap
        count, errors = validation_errors(client, connector)
        assert count == 0, f"{connector['name']}: MM2 rejects the rendered config:\n" + "\n".join(errors)
    # The endpoint does judge: a value MM2 does not accept is reported.
    broken = {"name": rendered[0]["name"],
              "config": {**rendered[0]["config"], "offset-syncs.topic.location": "nowhere"}}
    assert validation_errors(client, broken)[0] >= 1


@pytest.mark.parametrize("policy", ["identity", "default"])
def test_connect_mirrors_records_and_topic_configs_under_the_policys_names(
        policy, kafka_pair, rendered_worker, unique_name, tmp_path):
    prefix = unique_name("orders")
    first, later = f"{prefix}-a", f"{prefix}-b"
    state = flow_spec(tmp_path / "spec.yaml", kafka_pair, [f"{prefix}-.*"], replicationPolicy=policy)
    assert worker_properties(state) == worker_properties(rendered_worker.state)
    flow = state.mirrors[0]
    source, target = KafkaAdmin(state.cluster(SOURCE)), KafkaAdmin(state.cluster(TARGET))
    primary, dr = kafka_pair.client_config("primary"), kafka_pair.client_config("dr")

    source.create_topic(first, 3, -1, {"retention.ms": "3600000"})
    sent = produce(primary, first, {0: 7, 1: 5, 2: 9})
    with mirroring(rendered_worker.url, state) as run:
        mirrored = flow.target_topic(first)
        assert mirrored == (first if policy == "identity" else f"{SOURCE}.{first}")
        eventually(lambda: target.topics(names=[mirrored], with_configs=False).get(mirrored),
                   lambda found: found is not None and found.partitions == 3,
                   f"{mirrored} with 3 partitions on dr", guard=run.healthy)
        copy = read_all(dr, mirrored, {p: len(r) for p, r in sent.items()})
        assert copy.records == sent
        # Mirrored from offset 0 without transactions: the same offsets, nothing skipped or doubled.
        assert copy.offsets == {p: list(range(len(r))) for p, r in sent.items()}

        # The config set at creation came along; a later change follows (sync.topic.configs).
        assert topic_config(target, mirrored, "retention.ms") == "3600000"
        source.alter_topic_configs(first, {"retention.ms": "7200000"})
        eventually(lambda: topic_config(target, mirrored, "retention.ms"), lambda v: v == "7200000",
                   f"retention.ms of {mirrored} following the source", guard=run.healthy)

        # A topic created after the start is picked up by the pattern (refresh.topics.interval.seconds).
        source.create_topic(later, 2, -1, {})
        sent_later = produce(primary, later, {0: 3, 1: 4})
        wait_for_topic(target, flow.target_topic(later), 2)
        assert read_all(dr, flow.target_topic(later), {0: 3, 1: 4}).records == sent_later


def test_checkpoints_and_translated_offsets_of_an_idle_group(kafka_pair, rendered_worker, unique_name, tmp_path):
    topic, group = unique_name("payments"), unique_name("billing")
    state = flow_spec(tmp_path / "spec.yaml", kafka_pair, [topic], [group])
    flow = state.mirrors[0]
    primary, dr = kafka_pair.client_config("primary"), kafka_pair.client_config("dr")
    KafkaAdmin(state.cluster(SOURCE)).create_topic(topic, 2, -1, {})
    sent = produce(primary, topic, {0: 10, 1: 6})
    committed = {0: 10, 1: 6}
    commit_offsets(primary, group, topic, committed)
    assert group_offsets(primary, group) == {(topic, p): o for p, o in committed.items()}

    with mirroring(rendered_worker.url, state) as run:
        run.wait_running()
        assert read_all(dr, topic, {p: len(r) for p, r in sent.items()}).records == sent
        eventually(lambda: checkpoints(dr, flow.checkpoints_topic, group),
                   lambda found: found == {(topic, p): (o, o) for p, o in committed.items()},
                   f"checkpoints of {group} on {flow.checkpoints_topic}", guard=run.healthy)
        # Mirrored from offset 0 without transactions: translated offsets are the committed ones.
        eventually(lambda: group_offsets(dr, group),
                   lambda found: found == {(topic, p): o for p, o in committed.items()},
                   f"translated offsets of {group} on dr", guard=run.healthy)


def test_dedicated_mode_runs_the_rendered_mm2_properties(kafka_pair, unique_name, tmp_path):
    topic = unique_name("ledger")
    spec = write_spec(tmp_path / "spec.yaml", kafka_pair, [topic], name="it-mm2-dedicated", aliases=ALIASES,
                      mirror={"name": "dedicated", "tasksMax": 2, **FAST})
    state = load_desired_state(spec, None)
    rendered = tmp_path / "rendered"
    write_files(render_files(state), rendered)
    KafkaAdmin(state.cluster(SOURCE)).create_topic(topic, 2, -1, {})
    sent = produce(kafka_pair.client_config("primary"), topic, {0: 4, 1: 6})

    mirrormaker = MirrorMaker(rendered / "mm2.properties", tmp_path)
    proc = mirrormaker.start(tie_to_parent=True)
    try:
        dev_process.wait_all_ready({proc: mirrormaker.ready}, timeout=300)
        wait_for_topic(KafkaAdmin(state.cluster(TARGET)), topic, 2)
        copy = read_all(kafka_pair.client_config("dr"), topic, {0: 4, 1: 6})
        assert copy.records == sent
        assert copy.offsets == {p: list(range(len(r))) for p, r in sent.items()}
    finally:
        assert dev_process.stop(proc)


def test_derived_acls_are_enough_for_mm2_with_exactly_once_and_no_more(
        secure_kafka_pair, connect_worker, unique_name, tmp_path, request):
    pair = secure_kafka_pair
    topic, prefix, group = unique_name("orders"), unique_name("invoices"), unique_name("billing")
    private = unique_name("hr")  # mirrored by nobody
    invoices = f"{prefix}-eu"
    spec = write_spec(tmp_path / "spec.yaml", pair, [topic, f"{prefix}-.*"], [group], secure=True, engine="connect",
                      manage_acls=True, name="it-mm2-secure", connect=WORKER, aliases=ALIASES,
                      mirror={"name": "secure", "exactlyOnce": True, **FAST})
    state = load_desired_state(spec, None)
    # A literal and a prefix: LITERAL and PREFIXED bindings, nothing left for a live cluster to resolve.
    assert state.acl_patterns == ()
    assert {(b.resource_name, b.pattern_type) for b in state.acl_bindings if b.resource_type == "TOPIC"} >= {
        (topic, "LITERAL"), (f"{prefix}-", "PREFIXED")}
    admins = {alias: KafkaAdmin(state.cluster(alias), secrets=SECRETS.get) for alias in ALIASES}
    primary_admin, dr_admin = pair.client_config("primary", "admin"), pair.client_config("dr", "admin")

    admins[SOURCE].create_topic(topic, 3, -1, {"retention.ms": "3600000"})
    admins[SOURCE].create_topic(invoices, 1, -1, {})
    admins[SOURCE].create_topic(private, 1, -1, {})
    sent = produce(primary_admin, topic, {0: 5, 1: 8, 2: 3})
    sent_invoices = produce(primary_admin, invoices, {0: 4})
    produce(primary_admin, private, {0: 1})
    # The flow's probe topic is mirrored whatever the patterns say: its grants must be enough too.
    flow = state.mirrors[0]
    admins[SOURCE].create_topic(flow.probe_topic, 1, -1, {})
    sent_probe = produce(primary_admin, flow.probe_topic, {0: 2})
    commit_offsets(primary_admin, group, topic, {p: len(r) for p, r in sent.items()})
    for alias, admin in admins.items():
        derived = [b for b in state.acl_bindings if b.cluster == alias]
        admin.create_acls(derived)
        # Other modules plan against User:mm2 on these clusters: they must not meet this test's ACLs.
        request.addfinalizer(lambda admin=admin, derived=derived: admin.delete_acls(derived))

    rendered = tmp_path / "rendered"
    write_files(render_files(state), rendered)
    assert "exactly.once.source.support=enabled" in (rendered / "connect-distributed.properties").read_text()
    worker = connect_worker(rendered / "connect-distributed.properties", overrides={"listeners": "http://127.0.0.1:0"},
                            env={MM2_SECRET: MM2_PASSWORD}, timeout=240)
    request.addfinalizer(lambda: dev_process.stop(worker.process))  # before its ACLs go; no other test needs it
    log = worker.config.parent / "logs" / "connect.log"
    with refusals_reported(log), mirroring(worker.url, state) as run:
        run.wait_running()
        wait_for_topic(admins[TARGET], topic, 3)
        copy = read_all(dr_admin, topic, {p: len(r) for p, r in sent.items()})
        assert copy.records == sent
        assert read_all(dr_admin, invoices, {0: 4}).records == sent_invoices
        wait_for_topic(admins[TARGET], flow.target_topic(flow.probe_topic), 1)
        assert read_all(dr_admin, flow.target_topic(flow.probe_topic), {0: 2}).records == sent_probe
        eventually(lambda: topic_config(admins[TARGET], topic, "retention.ms"), lambda v: v == "3600000",
                   f"retention.ms of {topic} on dr", guard=run.healthy)
        # Transaction markers take offsets on dr: the translated offset is one past the last record.
        expected = {(topic, p): offsets[-1] + 1 for p, offsets in copy.offsets.items()}
        eventually(lambda: group_offsets(dr_admin, group), lambda found: found == expected,
                   f"translated offsets of {group} on dr", guard=run.healthy)
        run.healthy()
    denied = refusals(log)
    assert not denied, "MM2 or Connect was refused something as mm2:\n" + "\n".join(denied)

    # Outside its remit: no writes on the source, no reads of a topic that is not mirrored.
    mm2_primary, mm2_dr = pair.client_config("primary", "mm2"), pair.client_config("dr", "mm2")
    failures: list[KafkaError] = []
    producer = Producer({**mm2_primary, "logger": _QUIET, "message.timeout.ms": 15000})
    producer.produce(topic, value=b"not allowed", on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(30)
    assert [e.code() for e in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    mm2_admin = AdminClient({**mm2_primary, "logger": _QUIET})
    with pytest.raises(KafkaException) as hidden:
        mm2_admin.describe_topics(TopicCollection([private]))[private].result(30)
    assert hidden.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A real read attempt needs a group mm2 may join: the mirrored group on dr. A dr topic outside the
    # mirror stays closed to it.
    admins[TARGET].create_topic(private, 1, -1, {})
    produce(dr_admin, private, {0: 1})
    assert read_as(mm2_dr, group, private) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

