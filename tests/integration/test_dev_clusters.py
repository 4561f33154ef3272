"""The dev environment on real processes: clusters answer, security holds, failures clean up."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.dev import DevPorts, DevStack, DevState, MirrorMaker, NotReady, PortInUse
from mm2spec.dev import process as dev_process
from mm2spec.mm2.retry import retry_call

pytestmark = pytest.mark.integration

_QUIET = logging.getLogger("tests.quiet-librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def produce_one(conf: dict, topic: str, value: bytes) -> None:
    producer = Producer({**conf, "logger": _QUIET})
    producer.produce(topic, value=value)
    assert producer.flush(60) == 0, "the record was not delivered within 60s"


def consume_values(conf: dict, topic: str, count: int, timeout: float = 60) -> list[bytes]:
    consumer = Consumer(
        {**conf, "group.id": f"{topic}-reader", "auto.offset.reset": "earliest", "logger": _QUIET}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return values


def create_topic(conf: dict, topic: str) -> None:
    admin = AdminClient({**conf, "logger": _QUIET})
    admin.create_topics([NewTopic(topic, 1, -1)])[topic].result(60)


def wait_for_topic(admin: AdminClient, topic: str, timeout: float = 30) -> bool:
    """The controller acknowledges a new topic before every broker's metadata shows it."""
    deadline = time.monotonic() + timeout
    while topic not in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def java_processes_under(root: Path) -> list[int]:
    """Pids of live processes whose command line mentions ``root`` (ours, by construction)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(root).encode() in cmdline and b"java" in cmdline:
                found.append(int(proc.name))
    return found


def test_records_round_trip_on_both_clusters(kafka_pair: DevState, unique_name) -> None:
    for cluster in ("primary", "dr"):
        conf = kafka_pair.client_config(cluster)
        topic = unique_name(cluster)
        create_topic(conf, topic)
        produce_one(conf, topic, b"hello " + cluster.encode())
        assert consume_values(conf, topic, 1) == [b"hello " + cluster.encode()]


def test_secure_cluster_lets_admin_create_and_denies_mm2(secure_kafka_pair: DevState, unique_name) -> None:
    admin = AdminClient({**secure_kafka_pair.client_config("dr", "admin"), "logger": _QUIET})
    allowed = unique_name("admin")
    admin.create_topics([NewTopic(allowed, 1, -1)])[allowed].result(60)
    assert wait_for_topic(admin, allowed), f"{allowed} was created but never listed"

    mm2 = AdminClient({**secure_kafka_pair.client_config("dr", "mm2"), "logger": _QUIET})
    denied = unique_name("mm2")
    with pytest.raises(KafkaException) as refused:
        mm2.create_topics([NewTopic(denied, 1, -1)])[denied].result(60)
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    # mm2 authenticated (it got an authorization answer), yet sees no topics without ACLs.
    assert allowed not in mm2.list_topics(timeout=10).topics


class _Lines(logging.Handler):
    """Keeps what librdkafka logs, to show why a client could not connect."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def authorization_error(call) -> str:
    """The name of the Kafka error ``call`` fails with (retrying what a fresh broker may answer first)."""
    with pytest.raises(KafkaException) as refused:
        retry_call(call)
    return refused.value.args[0].name()


def read_error(conf: dict, topic: str, timeout: float = 60) -> str | None:
    """The first error a consumer subscribed to ``topic`` gets, or None if it got none in ``timeout``."""
    consumer = Consumer({**conf, "group.id": f"{topic}-denied", "auto.offset.reset": "earliest", "logger": _QUIET})
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error():
                return message.error().name()
            assert message is None, "a client without ACLs read a record"
    finally:
        consumer.close()
    return None


def test_tls_pair_admin_over_mtls_and_sasl_ssl_and_everyone_else_denied(tls_kafka_pair: DevState, unique_name) -> None:
    for cluster in ("primary", "dr"):
        mtls = tls_kafka_pair.client_config(cluster, "admin")
        sasl_ssl = tls_kafka_pair.client_config(cluster, "admin", listener="sasl_ssl")
        assert (mtls["security.protocol"], sasl_ssl["security.protocol"]) == ("SSL", "SASL_SSL")
        topic = unique_name(cluster)
        retry_call(lambda: create_topic(mtls, topic))
        produce_one(mtls, topic, b"by certificate")
        produce_one(sasl_ssl, topic, b"by password")
        # Both listeners reach the same log, each as the super user admin (read by one, then the other).
        reader = sasl_ssl if cluster == "primary" else mtls
        assert consume_values(reader, topic, 2) == [b"by certificate", b"by password"]

    readable = unique_name("admins")
    retry_call(lambda: create_topic(tls_kafka_pair.client_config("dr", "admin"), readable))
    produce_one(tls_kafka_pair.client_config("dr", "admin"), readable, b"not for mm2")
    for who, conf in (("mm2 by certificate", tls_kafka_pair.client_config("dr", "mm2")),
                      ("mm2 by password", tls_kafka_pair.client_config("dr", "mm2", "sasl_ssl")),
                      ("intruder", tls_kafka_pair.client_config("dr", "intruder"))):
        # Authenticated: the broker answers metadata (its own entry), only without the topics.
        admin = AdminClient({**conf, "logger": _QUIET})
        metadata = retry_call(lambda: admin.list_topics(timeout=30))
        assert metadata.brokers and readable not in metadata.topics, who
        denied = unique_name("denied")
        assert authorization_error(lambda: admin.create_topics([NewTopic(denied, 1, -1)])[denied].result(60)) == \
            "TOPIC_AUTHORIZATION_FAILED", who
        assert read_error(conf, readable) in {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"}, who


def test_tls_pair_refuses_clients_without_a_certificate_it_trusts(tls_kafka_pair: DevState) -> None:
    certs = tls_kafka_pair.certs("primary")
    good = tls_kafka_pair.client_config("primary", "mm2")
    bare = {key: value for key, value in good.items() if key not in ("ssl.certificate.location", "ssl.key.location")}
    expired = {**good, "ssl.certificate.location": str(certs.expired_certificate), "ssl.key.location": str(certs.expired_key)}
    foreign = {**good, "ssl.certificate.location": str(certs.foreign_certificate), "ssl.key.location": str(certs.foreign_key)}
    # dr's own mm2 certificate: a valid certificate, from the other cluster's CA.
    other_cluster = {**tls_kafka_pair.client_config("dr", "mm2"), "bootstrap.servers": good["bootstrap.servers"],
                     "ssl.ca.location": good["ssl.ca.location"]}
    for who, conf in (("no certificate", bare), ("expired", expired), ("foreign CA", foreign),
                      ("the other cluster's CA", other_cluster)):
        lines = _Lines()
        log = logging.getLogger(f"tests.tls-refused.{who}")
        log.addHandler(lines)
        log.propagate = False
        admin = AdminClient({**conf, "logger": log})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)
        admin.poll(1)  # serves the client's log lines to the handler
        # The broker ended the TLS handshake with an alert: not a refused port, not a timeout.
        assert any("SSL routines" in line and "alert" in line for line in lines.lines), (who, lines.lines[-3:])
    # The same client with mm2's certificate gets in: what failed above was the certificate.
    assert AdminClient({**good, "logger": _QUIET}).list_topics(timeout=30).brokers


def test_tls_connect_worker_reaches_its_cluster_as_admin(tls_kafka_pair: DevState, connect_worker) -> None:
    worker = connect_worker(cluster=tls_kafka_pair.dr)
    with urllib.request.urlopen(f"{worker.url}/connectors", timeout=10) as response:
        assert json.load(response) == []
    props = worker.config.read_text()
    assert "ssl.keystore.location=" in props and "admin-keystore.pem" in props
    # The worker made its internal topics over mTLS, as admin.
    topics = AdminClient({**tls_kafka_pair.client_config("dr", "admin"), "logger": _QUIET}).list_topics(timeout=30).topics
    assert any(name.endswith("-configs") for name in topics)


def test_connect_worker_offers_mirrormaker_plugins(connect_worker) -> None:
    worker = connect_worker()
    with urllib.request.urlopen(f"{worker.url}/connector-plugins", timeout=10) as response:
        plugins = {p["class"].rsplit(".", 1)[-1] for p in json.load(response)}
    assert {"MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"} <= plugins


def test_mirrormaker_dedicated_mode_copies_a_record(kafka_pair: DevState, unique_name, tmp_path: Path) -> None:
    topic = unique_name("mirrored")
    produce_one(kafka_pair.client_config("primary"), topic, b"across")
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                "clusters=primary, dr",
                f"primary.bootstrap.servers={kafka_pair.primary.bootstrap}",
                f"dr.bootstrap.servers={kafka_pair.dr.bootstrap}",
                "primary->dr.enabled=true",
                f"primary->dr.topics={topic}",
                "replication.factor=-1",
                *(f"{t}.replication.factor=1" for t in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic")),
                *(f"{t}.storage.replication.factor=1" for t in ("offset", "status", "config")),
                "sync.topic.acls.enabled=false",
                "emit.heartbeats.enabled=false",
            ]
        )
        + "\n"
    )
    mirrormaker = MirrorMaker(config, tmp_path)
    proc = mirrormaker.start(tie_to_parent=True)
    try:
        dev_process.wait_all_ready({proc: mirrormaker.ready}, timeout=300)
        # The default replication policy prefixes the source cluster's alias.
        assert consume_values(kafka_pair.client_config("dr"), f"primary.{topic}", 1, timeout=90) == [b"across"]
    finally:
        assert dev_process.stop(proc)
    assert not proc.alive()


def test_port_taken_is_reported_and_nothing_starts(tmp_path: Path) -> None:
    ports = DevPorts.free()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports.dr))
        squatter.listen()
        stack = DevStack(tmp_path, ports=ports, tie_to_parent=True, echo=lambda _line: None)
        with pytest.raises(PortInUse, match=rf"127\.0\.0\.1:{ports.dr} \(dr client\)"):
            stack.up(with_connect=False)
    assert java_processes_under(tmp_path) == []
    assert stack.status() is None


def test_broker_missing_its_deadline_is_stopped_with_its_log(tmp_path: Path) -> None:
    stack = DevStack(tmp_path, ports=DevPorts.free(), tie_to_parent=True, echo=lambda _line: None)
    # No JVM boots a broker in 0.5 s, so this exercises the deadline path for real.
    with pytest.raises(NotReady) as late:
        stack.up(with_connect=False, timeout=0.5)
    assert "was not ready after" in str(late.value)
    assert "last lines of" in str(late.value) and "logs/primary.log" in str(late.value)
    assert java_processes_under(tmp_path) == []
    assert stack.status() is None


def dev_cli(*args: str) -> subprocess.CompletedProcess:
    """``mm2spec dev ARGS`` in a fresh interpreter, as a user runs it."""
    run = "import sys; from mm2spec.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", run, "dev", *args], capture_output=True, text=True, timeout=120)


def test_status_and_down_from_another_process_and_down_is_idempotent(tmp_path: Path) -> None:
    stack = DevStack(tmp_path, ports=DevPorts.free(), tie_to_parent=True, echo=lambda _line: None)
    state = stack.up(with_connect=False, timeout=300)
    assert {p.name for p in state.processes} == {"primary", "dr"}
    assert all(p.alive() for p in state.processes)

    # `dev up` again is idempotent: the running environment is reported, nothing else starts.
    again = dev_cli("up", "--no-connect", "--dir", str(tmp_path))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already running; nothing started" in again.stdout and f"pid {state.processes[0].pid}" in again.stdout
    assert stack.read_state() == state and len(java_processes_under(tmp_path)) == 2
    # ... but one that differs from what runs is refused with the way out, and the running one is kept.
    secure = dev_cli("up", "--no-connect", "--secure", "--dir", str(tmp_path))
    assert secure.returncode == 1 and "run `mm2spec dev down` first" in secure.stderr, secure.stdout + secure.stderr
    assert "Traceback" not in secure.stderr and all(p.alive() for p in state.processes)

    # A fresh interpreter knows nothing but the folder: it must find and stop the processes.
    other = (
        "import sys; from mm2spec.dev import DevStack; s = DevStack(sys.argv[1]); "
        "print(s.describe(s.status())); print('stopped', s.down())"
    )
    result = subprocess.run([sys.executable, "-c", other, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"{state.primary.bootstrap} (PLAINTEXT)" in result.stdout
    assert "stopped ['primary', 'dr']" in result.stdout
    assert not any(p.alive() for p in state.processes)
    assert java_processes_under(tmp_path) == []

    assert stack.down() == []
    assert stack.down(wipe=True) == []
    assert not (tmp_path / "primary").exists()
