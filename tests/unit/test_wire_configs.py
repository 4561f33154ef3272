"""Topic configs read over Kafka's wire protocol (mm2spec.live.wire, ``KafkaAdmin.topic_configs``):
the request and answer byte for byte, SCRAM as RFC 7677 shows it, bounded requests on one
connection, a failed topic asked again while its error is retriable (mm2spec.mm2.retry), one that
stays failed named with its cluster, and the AdminClient's path when the wire's cannot be used."""

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
    topics in ``errors`` answer, attempt by attempt, with the error codes listed (0: answer)."""

    def __init__(self, errors: dict[str, list[int]] | None = None):
        self.errors = {name: list(codes) for name, codes in (errors or {}).items()}
        self.requests: list[list[str]] = []
        self.connections = 0

    def answer(self, builds):
        for cid, build in enumerate(builds, start=1):
            names, synonyms = requested_names(build(cid))
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
        admin._wire_connection = lambda: _Connection(broker)
    return admin


class _Connection:
    """One ``WireConnection`` to the fake broker."""

    def __init__(self, broker: FakeBroker):
        broker.connections += 1
        self.broker = broker

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


def test_a_scram_server_that_changes_the_nonce_is_refused():
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    with pytest.raises(WireUnavailable, match="server-first"):
        client.final(b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_many_topics_are_read_in_bounded_requests_on_one_connection():
    broker = FakeBroker()
    names = [f"t-{i:05d}" for i in range(2 * MAX_RESOURCES_PER_DESCRIBE + 500)]
    configs = _admin(broker).topic_configs(names + names[:3])  # a name asked twice is read once
    assert [len(r) for r in broker.requests] == [MAX_RESOURCES_PER_DESCRIBE, MAX_RESOURCES_PER_DESCRIBE, 500]
    assert broker.connections == 1
    assert configs == {name: {"retention.ms": str(len(name))} for name in names}


def test_a_retriable_error_asks_again_for_the_failed_topics_only():
    broker = FakeBroker({"t-00001": [TIMED_OUT, TIMED_OUT], "t-02500": [TIMED_OUT]})
    names = [f"t-{i:05d}" for i in range(3000)]
    configs = _admin(broker).topic_configs(names)
    assert [len(r) for r in broker.requests] == [MAX_RESOURCES_PER_DESCRIBE, 1000, 2, 1]
    assert broker.requests[2:] == [["t-00001", "t-02500"], ["t-00001"]]
    assert configs == {name: {"retention.ms": "7"} for name in names}


def test_a_topic_that_stays_failed_in_one_batch_fails_the_read_naming_the_cluster_and_topic():
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


def _refused():
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

    def describe_topics(self, collection, request_timeout=None):
        futures = {}
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
    broker = FakeBroker({"late": [UNKNOWN], "slow": [TIMED_OUT], "hidden": [DENIED, DENIED], "gone": [UNKNOWN]})
    live = _admin(broker, client=FakeDescribe()).topics(["t", "late", "slow", "gone", "hidden"])
    assert {name: (t.partitions, t.configs) for name, t in live.items()} == {
        "t": (3, {"retention.ms": "1"}), "late": (3, {"retention.ms": "4"}), "slow": (3, {"retention.ms": "4"})}
    assert broker.requests == [["gone", "hidden", "late", "slow", "t"], ["late", "slow"]]


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
