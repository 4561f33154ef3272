"""Topic configs read over Kafka's wire protocol (mm2spec.live.wire, ``KafkaAdmin.topic_configs``):
the request and answer byte for byte, SCRAM as RFC 7677 shows it, bounded requests spread over a few
connections, a failed topic asked again while its error is retriable (mm2spec.mm2.retry), one that
stays failed named with its cluster, and the AdminClient's path when the wire's cannot be used; and
named topics' partitions and replicas read by Metadata requests, a topic the broker answers with an
error described again through the AdminClient."""

from __future__ import annotations

import socket
import struct
import threading
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live import kafka, wire
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.wire import ConfigsResult, ScramClient, WireUnavailable, parse_describe_configs
from mm2spec.mm2 import retry
from mm2spec.mm2.retry import MAX_RESOURCES_PER_DESCRIBE
from mm2spec.spec.model import Cluster

DYNAMIC, DEFAULT = 1, 5
TIMED_OUT = KafkaError.REQUEST_TIMED_OUT
DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED
UNKNOWN = KafkaError.UNKNOWN_TOPIC_OR_PART


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text.encode())) + text.encode()


def describe_configs_response(results) -> bytes:
    """A DescribeConfigs v1 response body after the correlation id. ``results``: (topic, error code,
    entries), an entry (name, value, source, sensitive, synonyms count)."""
    out = struct.pack(">ii", 0, len(results))
    for name, error, entries in results:
        out += struct.pack(">h", error) + _string("denied" if error else None) + bytes([2]) + _string(name)
        out += struct.pack(">i", len(entries))
        for key, value, source, sensitive, synonyms in entries:
            out += _string(key) + _string(value) + struct.pack(">bbbi", 0, source, sensitive, synonyms)
            out += b"".join(_string(key) + _string(value) + bytes([5]) for _ in range(synonyms))
    return out


def metadata_response(topics) -> bytes:
    """A Metadata v7 response body after the correlation id. ``topics``: (name, error code, replicas of
    each partition), for two brokers (one with a rack)."""
    out = struct.pack(">ii", 0, 2)
    out += struct.pack(">i", 1) + _string("broker-1") + struct.pack(">i", 9092) + _string("rack-a")
    out += struct.pack(">i", 2) + _string("broker-2") + struct.pack(">i", 9092) + _string(None)
    out += _string("cluster-id") + struct.pack(">ii", 1, len(topics))
    for name, error, partitions in topics:
        out += struct.pack(">h", error) + _string(name) + b"\0" + struct.pack(">i", len(partitions))
        for index, replicas in enumerate(partitions):
            nodes = struct.pack(">i", replicas) + struct.pack(f">{replicas}i", *range(1, replicas + 1))
            out += struct.pack(">hiii", 0, index, 1, 0) + nodes + nodes + struct.pack(">i", 0)
    return out


def metadata_names(request: bytes) -> list[str]:
    """The topics a Metadata v7 request names (it never asks the broker to create one)."""
    size, api, version = struct.unpack_from(">ihh", request)
    assert (size, api, version) == (len(request) - 4, wire.METADATA, 7)
    at = 12 + 2 + struct.unpack_from(">h", request, 12)[0]
    count, = struct.unpack_from(">i", request, at)
    at += 4
    names = []
    for _ in range(count):
        length, = struct.unpack_from(">h", request, at)
        names.append(request[at + 2:at + 2 + length].decode())
        at += 2 + length
    assert request[at:] == b"\0"
    return names


def requested_names(request: bytes) -> tuple[list[str], bool]:
    """The topics a DescribeConfigs v1 request names, and whether it asks for synonyms."""
    size, api, version = struct.unpack_from(">ihh", request)
    assert (size, api, version) == (len(request) - 4, wire.DESCRIBE_CONFIGS, 1)
    at = 12 + 2 + struct.unpack_from(">h", request, 12)[0]  # after the client id
    count, = struct.unpack_from(">i", request, at)
    at += 4
    names = []
    for _ in range(count):
        assert request[at] == wire.TOPIC
        length, = struct.unpack_from(">h", request, at + 1)
        names.append(request[at + 3:at + 3 + length].decode())
        at += 3 + length
        assert struct.unpack_from(">i", request, at)[0] == -1  # every config key
        at += 4
    assert at == len(request) - 1
    return names, bool(request[at])


class FakeBroker:
    """A broker's DescribeConfigs answers: every topic has ``retention.ms`` set on itself, but the
    topics in ``errors`` answer, attempt by attempt, with the error codes listed (0: answer). Its
    Metadata answers: every topic has 3 partitions of 2 replicas, but those in ``missing`` do not
    exist and those in ``metadata_errors`` answer with that error."""

    def __init__(self, errors: dict[str, list[int]] | None = None, missing=(), metadata_errors=None):
        self.errors = {name: list(codes) for name, codes in (errors or {}).items()}
        self.missing, self.metadata_errors = set(missing), dict(metadata_errors or {})
        self.requests: list[list[str]] = []
        self.metadata_requests: list[list[str]] = []
        self.connections = 0

    def answer(self, builds):
        for cid, build in enumerate(builds, start=1):
            request = build(cid)
            if struct.unpack_from(">h", request, 4)[0] == wire.METADATA:
                names = metadata_names(request)
                self.metadata_requests.append(names)
                yield metadata_response([(n, 3, []) if n in self.missing else (n, self.metadata_errors[n], [])
                                         if n in self.metadata_errors else (n, 0, [2, 2, 2]) for n in names])
                continue
            names, synonyms = requested_names(request)
            assert not synonyms
            self.requests.append(names)
            answers = []
            for name in names:
                codes = self.errors.get(name)
                error = codes.pop(0) if codes else 0
                entries = [("retention.ms", f"{len(name)}", DYNAMIC, 0, 0), ("cleanup.policy", "delete", DEFAULT, 0, 2)]
                answers.append((name, error, [] if error else entries))
            yield describe_configs_response(answers)


def _admin(broker: FakeBroker | None = None, client=None) -> KafkaAdmin:
    admin = KafkaAdmin.__new__(KafkaAdmin)
    admin.cluster, admin.timeout, admin._client = Cluster("dr", ("127.0.0.1:1",)), 5.0, client
    admin._secrets = lambda _name: None  # no broker answers on port 1: the wire path cannot connect
    if broker is not None:
        admin._wire_connection = lambda first=0: _Connection(broker, first)
    return admin


class _Connection:
    """One ``WireConnection`` to the fake broker."""

    def __init__(self, broker: FakeBroker, first: int = 0):
        broker.connections += 1
        self.broker, self.first = broker, first

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        pass

    def requests(self, builds):
        return self.broker.answer(builds)


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch):
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)


def test_the_answer_keeps_only_what_was_set_on_the_topic():
    body = describe_configs_response([
        ("orders", 0, [("retention.ms", "1000", DYNAMIC, 0, 1), ("segment.bytes", "1024", DEFAULT, 0, 3),
                       ("sasl.secret", None, DYNAMIC, 1, 0), ("min.insync.replicas", None, DYNAMIC, 0, 0),
                       ("cleanup.policy", "compact", DYNAMIC, 0, 0)]),
        ("gone", UNKNOWN, []),
        ("plain", 0, [("segment.bytes", "1024", DEFAULT, 0, 0)]),
    ])
    assert parse_describe_configs(body) == {
        "orders": ConfigsResult({"retention.ms": "1000", "min.insync.replicas": None, "cleanup.policy": "compact"}),
        "gone": ConfigsResult({}, UNKNOWN, "denied"),
        "plain": ConfigsResult({}),
    }


def test_the_metadata_answer_gives_each_topics_partitions_and_most_replicas():
    body = metadata_response([("orders", 0, [3, 3, 2]), ("gone", UNKNOWN, []), ("empty", 0, []),
                              ("ü-topic", 0, [1])])
    assert wire.parse_metadata(body) == {
        "orders": wire.TopicLayout(3, 3), "gone": wire.TopicLayout(0, 0, UNKNOWN), "empty": wire.TopicLayout(0, 0),
        "ü-topic": wire.TopicLayout(1, 1)}


def test_the_metadata_request_names_every_topic_and_creates_none():
    names = ["orders", "payments-ü", "x" * 249]
    assert metadata_names(wire.metadata_request(7, names)) == names


def test_the_request_names_every_topic_and_asks_for_no_synonyms():
    names = ["orders", "payments-ü", "x" * 249]
    assert requested_names(wire.describe_configs_request(7, names)) == (names, False)


def test_scram_sha_256_as_rfc_7677_shows_it():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                          b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(WireUnavailable, match="does not verify"):
        client.verify(b"v=AAAA")


def test_scram_works_out_a_salted_password_once_for_the_connections_of_a_process(monkeypatch):
    # A read opens several connections to a cluster: each login proves the same password with the same salt.
    rounds = []
    real = wire.hashlib.pbkdf2_hmac
    monkeypatch.setattr(wire.hashlib, "pbkdf2_hmac", lambda *args: rounds.append(args[2:]) or real(*args))
    first = b"r=abcdef,s=c2FsdA==,i=4096"
    proofs = [ScramClient("SCRAM-SHA-512", "user", "once-only", nonce="abc").final(first) for _ in range(3)]
    assert len(set(proofs)) == 1 and rounds == [(b"salt", 4096)]
    ScramClient("SCRAM-SHA-512", "user", "once-only", nonce="abc").final(b"r=abcdef,s=b3RoZXI=,i=4096")  # another salt
    ScramClient("SCRAM-SHA-256", "user", "once-only", nonce="abc").final(first)  # another hash
    assert rounds == [(b"salt", 4096), (b"other", 4096), (b"salt", 4096)]


def test_a_scram_server_that_changes_the_nonce_is_refused():
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    with pytest.raises(WireUnavailable, match="server-first"):
        client.final(b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_many_topics_are_read_in_bounded_requests_on_one_connection(monkeypatch):
    monkeypatch.setattr(kafka, "WIRE_CONNECTIONS", 1)
    broker = FakeBroker()
    names = [f"t-{i:05d}" for i in range(2 * MAX_RESOURCES_PER_DESCRIBE + 500)]
    configs = _admin(broker).topic_configs(names + names[:3])  # a name asked twice is read once
    assert [len(r) for r in broker.requests] == [MAX_RESOURCES_PER_DESCRIBE, MAX_RESOURCES_PER_DESCRIBE, 500]
    assert broker.connections == 1
    assert configs == {name: {"retention.ms": str(len(name))} for name in names}


class _Spread(_Connection):
    """A connection that notes which requests it carried, and waits for the others to open: the
    connections of one read are read at the same time."""

    def __init__(self, broker: FakeBroker, first: int, opened: threading.Barrier, carried: dict):
        super().__init__(broker, first)
        self.opened, self.carried = opened, carried

    def requests(self, builds):
        self.opened.wait(timeout=5)
        self.carried[self.first] = [requested_names(build(0))[0] for build in builds]
        return super().requests(builds)


@pytest.mark.parametrize("topics, connections, per_request", [
    (100, 4, 13),  # each connection's share in two requests: one answered while the other is parsed
    (10, 2, 3),
    (9, 1, 9),  # too few to be worth a second login
    (1000, 4, 20),  # requests stay bounded
])
def test_many_topics_are_spread_over_a_few_connections_read_at_once(monkeypatch, topics, connections, per_request):
    # At scale (a connection per 500 topics, 2,000 a request): 10,000 topics, 4 connections, requests of 1,250.
    monkeypatch.setattr(kafka, "TOPICS_PER_CONNECTION", 5)
    monkeypatch.setattr(kafka, "MAX_RESOURCES_PER_DESCRIBE", 20)
    broker = FakeBroker()
    opened, carried = threading.Barrier(connections), {}
    admin = _admin(broker)
    admin._wire_connection = lambda first=0: _Spread(broker, first, opened, carried)
    names = [f"t-{i:06d}" for i in range(topics)]
    assert admin.topic_configs(names) == {name: {"retention.ms": "8"} for name in names}
    assert sorted(carried) == list(range(connections))  # each starts at its own bootstrap server
    assert max(len(r) for r in broker.requests) == per_request
    # Every topic asked once; the connections' shares differ by at most one request.
    assert sorted(n for shares in carried.values() for batch in shares for n in batch) == names
    assert max(map(len, carried.values())) - min(map(len, carried.values())) <= 1


def test_a_connection_that_fails_leaves_the_whole_read_to_the_admin_client():
    broker, client = FakeBroker(), FakeClient()
    admin = _admin(broker, client=client)

    def connection(first=0):
        if first == 2:
            raise WireUnavailable("connect to 127.0.0.1:1: refused")
        return _Connection(broker, first)

    admin._wire_connection = connection
    names = [f"t-{i:05d}" for i in range(4 * kafka.TOPICS_PER_CONNECTION)]
    assert admin.topic_configs(names) == {name: {"retention.ms": "9"} for name in names}
    assert client.asked == names


def test_the_connections_of_a_read_start_at_successive_bootstrap_servers(monkeypatch):
    tried = []

    def refuse(host, port, *_args, **_kwargs):
        tried.append(f"{host}:{port}")
        raise WireUnavailable(f"connect to {host}:{port}: refused")

    monkeypatch.setattr(kafka, "WireConnection", refuse)
    admin = _admin()
    admin.cluster = Cluster("dr", ("a:1", "b:2", "c:3"))
    for first in (0, 1, 5):
        with pytest.raises(WireUnavailable):
            admin._wire_connection(first)
    assert tried == ["a:1", "b:2", "c:3", "b:2", "c:3", "a:1", "c:3", "a:1", "b:2"]


def test_a_retriable_error_asks_again_for_the_failed_topics_only(monkeypatch):
    monkeypatch.setattr(kafka, "WIRE_CONNECTIONS", 1)
    broker = FakeBroker({"t-00001": [TIMED_OUT, TIMED_OUT], "t-02500": [TIMED_OUT]})
    names = [f"t-{i:05d}" for i in range(3000)]
    configs = _admin(broker).topic_configs(names)
    assert [len(r) for r in broker.requests] == [MAX_RESOURCES_PER_DESCRIBE, 1000, 2, 1]
    assert broker.requests[2:] == [["t-00001", "t-02500"], ["t-00001"]]
    assert configs == {name: {"retention.ms": "7"} for name in names}


def test_a_topic_that_stays_failed_in_one_batch_fails_the_read_naming_the_cluster_and_topic(monkeypatch):
    monkeypatch.setattr(kafka, "WIRE_CONNECTIONS", 1)
    broker = FakeBroker({"t-02100": [DENIED], "t-02200": [DENIED]})
    with pytest.raises(KafkaOperationFailed) as failure:
        _admin(broker).topic_configs([f"t-{i:05d}" for i in range(3000)])
    assert str(failure.value) == ('cluster "dr": describe configs of topic t-02100 (and 1 more topics): '
                                  "TOPIC_AUTHORIZATION_FAILED: denied")
    assert len(broker.requests) == 2  # not retried


def test_a_retriable_error_that_lasts_gives_up_at_the_retry_deadline(monkeypatch):
    clock = iter(range(0, 10_000, 5))  # each look at the clock 5 s later
    monkeypatch.setattr(retry.time, "monotonic", lambda: next(clock))
    broker = FakeBroker({"t-1": [TIMED_OUT] * 100})
    with pytest.raises(KafkaOperationFailed, match='cluster "dr": describe configs of topic t-1: REQUEST_TIMED_OUT: denied'):
        _admin(broker).topic_configs(["t-0", "t-1"])
    assert 3 < len(broker.requests) < 10


def test_a_missing_topic_is_an_error():
    broker = FakeBroker({"gone": [UNKNOWN]})
    with pytest.raises(KafkaOperationFailed, match="describe configs of topic gone: UNKNOWN_TOPIC_OR_PART"):
        _admin(broker).topic_configs(["kept", "gone"])


class FakeClient:
    """confluent-kafka's describe_configs, for the path the wire cannot take."""

    def __init__(self):
        self.asked: list[str] = []

    def describe_configs(self, resources, request_timeout=None):
        futures = {}
        for resource in resources:
            self.asked.append(resource.name)
            future: Future = Future()
            if resource.name == "gone":
                future.set_exception(KafkaException(KafkaError(UNKNOWN)))
            else:
                entry = kafka.ConfigEntry("retention.ms", "9", source=kafka.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
                future.set_result({"retention.ms": entry})
            futures[resource] = future
        return futures


def _refused(first=0):
    raise WireUnavailable("SASL mechanism GSSAPI is not spoken here")


def test_where_the_wire_cannot_go_the_admin_client_reads():
    client = FakeClient()
    admin = _admin(client=client)
    admin._wire_connection = _refused
    assert admin.topic_configs(["a", "b"]) == {"a": {"retention.ms": "9"}, "b": {"retention.ms": "9"}}
    assert client.asked == ["a", "b"]


def test_when_no_broker_answers_the_wire_the_admin_client_reads():
    client = FakeClient()
    assert _admin(client=client).topic_configs(["a"]) == {"a": {"retention.ms": "9"}}


class FakeDescribe(FakeClient):
    """DescribeTopics of a cluster: every topic has 3 partitions, but ``gone`` and ``hidden`` do not exist."""

    def __init__(self):
        super().__init__()
        self.described: list[str] = []

    def describe_topics(self, collection, request_timeout=None):
        futures = {}
        self.described += collection.topic_names
        for name in collection.topic_names:
            future: Future = Future()
            if name in ("gone", "hidden"):
                future.set_exception(KafkaException(KafkaError(UNKNOWN)))
            else:
                future.set_result(type("D", (), {"partitions": [type("P", (), {"replicas": [1]})()] * 3})())
            futures[name] = future
        return futures

    def describe_cluster(self, request_timeout=None):
        return _done(type("C", (), {"nodes": []})())


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def test_named_topics_and_their_configs_are_read_together_and_what_failed_read_again():
    # "late" did not exist yet when its configs were asked for, but did when the topics were described;
    # "slow" answered a retriable error; "hidden" is not there and its configs may not be described:
    # no error, since the topic does not exist (as when only the topics found were described).
    broker = FakeBroker({"late": [UNKNOWN], "slow": [TIMED_OUT], "hidden": [DENIED, DENIED], "gone": [UNKNOWN]},
                        missing={"gone", "hidden"})
    client = FakeDescribe()
    live = _admin(broker, client=client).topics(["t", "late", "slow", "gone", "hidden"])
    assert {name: (t.partitions, t.replication_factor, t.configs) for name, t in live.items()} == {
        "t": (3, 2, {"retention.ms": "1"}), "late": (3, 2, {"retention.ms": "4"}), "slow": (3, 2, {"retention.ms": "4"})}
    assert broker.requests == [["gone", "hidden", "late", "slow", "t"], ["late", "slow"]]
    assert broker.metadata_requests == [["gone", "hidden", "late", "slow", "t"]]
    assert client.described == []  # the wire answered for every topic


def test_many_named_topics_are_described_in_bounded_metadata_requests_on_one_connection():
    broker = FakeBroker(missing={"t-00007"})
    names = [f"t-{i:05d}" for i in range(MAX_RESOURCES_PER_DESCRIBE + 10)]
    assert _admin(broker)._named_topics(names) == {name: (3, 2) for name in names if name != "t-00007"}
    assert [len(r) for r in broker.metadata_requests] == [MAX_RESOURCES_PER_DESCRIBE, 10]
    assert broker.connections == 1


def test_a_named_topic_the_metadata_answers_with_an_error_is_described_through_the_admin_client():
    # Not allowed to describe "locked" on this broker, or "moving" has no leader yet: the AdminClient's
    # DescribeTopics is asked (retried while retriable there), which answers for them or fails naming one.
    broker = FakeBroker(metadata_errors={"locked": DENIED, "moving": KafkaError.LEADER_NOT_AVAILABLE})
    client = FakeDescribe()
    assert _admin(broker, client=client)._named_topics(["locked", "moving", "t"]) == {
        "locked": (3, 1), "moving": (3, 1), "t": (3, 2)}
    assert client.described == ["locked", "moving"]
    broker = FakeBroker(metadata_errors={"hidden": DENIED})  # FakeDescribe: hidden does not exist
    assert _admin(broker, client=client)._named_topics(["hidden", "t"]) == {"t": (3, 2)}


def test_a_named_topic_that_stays_failed_fails_the_read_naming_the_cluster_and_topic():
    class Denied(FakeDescribe):
        def describe_topics(self, collection, request_timeout=None):
            futures = {}
            for name in collection.topic_names:
                futures[name] = Future()
                futures[name].set_exception(KafkaException(KafkaError(DENIED, "denied")))
            return futures

    broker = FakeBroker(metadata_errors={"locked": DENIED})
    with pytest.raises(KafkaOperationFailed, match='cluster "dr": describe topic locked: TOPIC_AUTHORIZATION_FAILED'):
        _admin(broker, client=Denied())._named_topics(["locked", "t"])


def test_a_garbled_metadata_answer_leaves_the_named_topics_to_the_admin_client():
    class Garbled(_Connection):
        def requests(self, builds):
            yield b"\0\0\0\0\0\0"  # cut off after the throttle time

    client = FakeDescribe()
    admin = _admin(client=client)
    admin._wire_connection = lambda first=0: Garbled(FakeBroker(), first)
    assert admin._named_topics(["gone", "t"]) == {"t": (3, 1)}
    assert client.described == ["gone", "t"]


def test_named_topics_where_the_wire_cannot_go_have_only_those_found_described():
    client = FakeDescribe()
    admin = _admin(client=client)
    admin._wire_connection = _refused
    live = admin.topics(["t", "gone"])
    assert {name: t.configs for name, t in live.items()} == {"t": {"retention.ms": "9"}}
    assert client.asked == ["t"]


def _broker_side(sock, password: str) -> None:
    """A broker on the other end of a socket pair: PLAIN login as admin, then DescribeConfigs."""
    def read_request():
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        data = sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
        api, _version, cid, client = struct.unpack_from(">hhih", data)
        return api, cid, data[10 + client:], head + data

    def reply(cid: int, body: bytes) -> None:
        sock.sendall(struct.pack(">ii", len(body) + 4, cid) + body)

    api, cid, _body, _raw = read_request()
    assert api == wire.SASL_HANDSHAKE
    reply(cid, struct.pack(">hi", 0, 1) + _string("PLAIN"))
    api, cid, body, _raw = read_request()
    assert api == wire.SASL_AUTHENTICATE
    ok = body[4:] == b"\0admin\0" + password.encode()
    reply(cid, struct.pack(">h", 0 if ok else 58) + _string(None if ok else "Authentication failed")
          + struct.pack(">iq", 0, 0))
    while ok and (request := read_request()) is not None:
        names, _synonyms = requested_names(request[3])
        reply(request[1], describe_configs_response([(n, 0, [("retention.ms", "5", DYNAMIC, 0, 0)]) for n in names]))
    sock.close()


@pytest.mark.parametrize("password", ["s3cret", "wrong"])
def test_a_connection_logs_in_and_pipelines_its_requests(monkeypatch, password):
    ours, theirs = socket.socketpair()
    broker = threading.Thread(target=_broker_side, args=(theirs, "s3cret"), daemon=True)
    broker.start()
    monkeypatch.setattr(wire.socket, "create_connection", lambda _address, timeout=None: ours)
    if password == "wrong":
        with pytest.raises(WireUnavailable) as failure:
            wire.WireConnection("broker", 9092, 5.0, sasl=wire.Sasl("PLAIN", "admin", password))
        assert "SASL authentication failed" in str(failure.value) and password not in str(failure.value)
        return
    batches = [[f"a-{i}" for i in range(300)], ["b"], [f"c-{i}" for i in range(50)]]
    with wire.WireConnection("broker", 9092, 5.0, sasl=wire.Sasl("PLAIN", "admin", password)) as conn:
        bodies = list(conn.requests([lambda cid, b=b: wire.describe_configs_request(cid, b) for b in batches]))
    assert [sorted(parse_describe_configs(body)) for body in bodies] == [sorted(b) for b in batches]
    broker.join(timeout=5)


def test_a_mechanism_the_wire_does_not_speak_leaves_the_read_to_the_admin_client(monkeypatch):
    ours, theirs = socket.socketpair()
    monkeypatch.setattr(wire.socket, "create_connection", lambda _address, timeout=None: ours)
    with pytest.raises(WireUnavailable, match="GSSAPI is not spoken here"):
        wire.WireConnection("broker", 9092, 5.0, sasl=wire.Sasl("GSSAPI", "admin", ""))
    theirs.close()
