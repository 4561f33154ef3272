"""Config files and arguments of the dev environment: pure functions, no processes, no network."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import pytest

from mm2spec.components import Components, versions
from mm2spec.errors import ComponentMissing, DevError
from mm2spec.cli import dev as commands
from mm2spec.dev.config import (
    ADMIN_PASSWORD,
    MM2_PASSWORD,
    spec_fragment,
    tls_env,
    BrokerSpec,
    broker_properties,
    client_config,
    connect_worker_properties,
    format_args,
    java_client_properties,
    log4j2_properties,
    new_cluster_id,
    read_properties,
    rest_port_of,
    secure_env,
)
from mm2spec.dev.kafka import KafkaCluster
from mm2spec.dev.process import JavaProcess
from mm2spec.dev.stack import DevPorts, DevStack, DevState

PLAIN = BrokerSpec("primary", 19092, 19093)
SECURE = BrokerSpec("dr", 29092, 29093, secure=True)


def test_plaintext_broker_is_a_single_node_kraft_cluster_on_loopback() -> None:
    props = read_properties(broker_properties(PLAIN, Path("/data/primary")))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:19093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert props["log.dirs"] == "/data/primary"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "default.replication.factor", "num.partitions"):
        assert props[key] == "1", key
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert "authorizer.class.name" not in props


def test_secure_broker_uses_scram_and_the_standard_authorizer_with_a_plaintext_controller() -> None:
    props = read_properties(broker_properties(SECURE, Path("/data/dr")))
    assert props["listeners"] == "SASL_PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert "User:admin" in props["super.users"].split(";")
    assert "User:mm2" not in props["super.users"]
    jaas = props["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    assert 'username="admin"' in jaas and f'password="{ADMIN_PASSWORD}"' in jaas


def test_format_adds_scram_users_only_when_secure() -> None:
    plain = format_args(PLAIN, "cid", Path("/p/server.properties"))
    assert plain == ["format", "-t", "cid", "-c", "/p/server.properties", "--standalone"]
    secure = format_args(SECURE, "cid", Path("/p/server.properties"))
    scram = [secure[i + 1] for i, arg in enumerate(secure) if arg == "--add-scram"]
    assert scram == [
        f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]",
        f"SCRAM-SHA-512=[name=mm2,password={MM2_PASSWORD}]",
    ]


def test_cluster_ids_look_like_kafkas() -> None:
    for _ in range(50):
        cid = new_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_client_settings_carry_credentials_only_for_secure_clusters() -> None:
    assert client_config(PLAIN) == {"bootstrap.servers": "127.0.0.1:19092"}
    mm2 = client_config(SECURE, "mm2")
    assert mm2["security.protocol"] == "SASL_PLAINTEXT" and mm2["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (mm2["sasl.username"], mm2["sasl.password"]) == ("mm2", MM2_PASSWORD)
    assert 'username="mm2"' in java_client_properties(SECURE, "mm2")["sasl.jaas.config"]
    with pytest.raises(DevError, match="no user 'bob'"):
        client_config(SECURE, "bob")


def test_secret_names_match_the_example_spec() -> None:
    assert secure_env() == {"PRIMARY_MM2_PASSWORD": MM2_PASSWORD, "DR_MM2_PASSWORD": MM2_PASSWORD}


def test_minimal_connect_worker_config() -> None:
    props = read_properties(connect_worker_properties(PLAIN, rest_port=18083, group_id="g"))
    assert props["bootstrap.servers"] == "127.0.0.1:19092"
    assert props["listeners"] == "http://127.0.0.1:18083"
    assert props["plugin.discovery"] == "service_load"
    assert props["key.converter"] == props["value.converter"] == "org.apache.kafka.connect.converters.ByteArrayConverter"
    assert [props[f"{store}.storage.topic"] for store in ("config", "offset", "status")] == ["g-configs", "g-offsets", "g-status"]
    for store in ("config", "offset", "status"):
        assert props[f"{store}.storage.replication.factor"] == "-1"
    assert not any(key.startswith(("producer.", "consumer.", "admin.")) for key in props)


def test_secure_connect_worker_config_authenticates_every_client() -> None:
    props = read_properties(connect_worker_properties(SECURE, rest_port=18083))
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[prefix + "security.protocol"] == "SASL_PLAINTEXT", prefix
        assert props[prefix + "sasl.mechanism"] == "SCRAM-SHA-512", prefix
        assert 'username="admin"' in props[prefix + "sasl.jaas.config"], prefix


def test_read_properties_handles_the_java_syntax_people_write() -> None:
    text = "# comment\n! also comment\n\na=1\nb : 2\nc 3\nd=x\\\n   y\ne\\=f=4\ng=\n"
    assert read_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "xy", "e=f": "4", "g": ""}


@pytest.mark.parametrize(
    ("listeners", "port"),
    [("http://:8083", 8083), ("http://127.0.0.1:18083", 18083), ("http://0.0.0.0:9000, https://:9443", 9000)],
)
def test_rest_port_of_a_worker(listeners: str, port: int) -> None:
    assert rest_port_of({"listeners": listeners}) == port


def test_rest_port_defaults_to_connects_default_and_rejects_nonsense() -> None:
    assert rest_port_of({}) == 8083
    with pytest.raises(DevError, match="cannot read a port"):
        rest_port_of({"listeners": "http://localhost"})


def test_java_processes_log_to_stdout_which_goes_to_a_file() -> None:
    props = read_properties(log4j2_properties())
    assert props["appender.out.type"] == "Console"
    assert props["rootLogger.appenderRef.out.ref"] == "out"


def test_state_survives_a_json_round_trip() -> None:
    state = DevState(
        Path("/x"), True, {"primary": PLAIN, "dr": SECURE},
        [JavaProcess("dr", 42, "/x/dr/server.properties", "/x/logs/dr.log", (29092, 29093))], "http://127.0.0.1:8083"
    )
    assert DevState.from_json(state.to_json()) == state


def test_missing_kafka_jars_name_the_install_script(tmp_path: Path) -> None:
    empty_cache = Components(cache=tmp_path, pinned=versions())
    with pytest.raises(ComponentMissing, match=r"Kafka jars are not installed.*install-kafka\.sh"):
        KafkaCluster(PLAIN, tmp_path, found=empty_cache)


def test_missing_java_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ComponentMissing, match="no Java runtime found"):
        KafkaCluster(PLAIN, tmp_path)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mm2spec")
    commands.add_parsers(parser.add_subparsers(dest="command", required=True))
    return parser


def test_dev_command_line() -> None:
    args = _parser().parse_args(["dev", "up", "--secure", "--connect-config", "w.properties"])
    assert (args.secure, args.no_connect, args.connect_config) == (True, False, Path("w.properties"))
    assert callable(args.func)
    assert _parser().parse_args(["dev", "down", "--wipe"]).wipe
    assert callable(_parser().parse_args(["dev", "status"]).func)


def test_no_connect_and_a_connect_config_contradict(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["dev", "up", "--no-connect", "--connect-config", "w.properties"])
    assert "not allowed with" in capsys.readouterr().err


def test_a_worker_config_without_a_port_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mm2spec.dev import connect, process

    monkeypatch.setattr(process, "java_and_libs", lambda found=None: ("java", tmp_path))
    config = tmp_path / "worker.properties"
    config.write_text("listeners=http://localhost\n")
    with pytest.raises(DevError, match=r"worker\.properties: cannot read a port"):
        connect.ConnectWorker(config, tmp_path)


def test_a_connect_worker_answering_with_an_error_is_not_ready_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    from mm2spec.dev import connect
    from mm2spec.errors import ConnectRequestFailed

    def answer(url: str):
        raise ConnectRequestFailed(f"{url}: HTTP 204")

    monkeypatch.setattr(connect, "_get_json", answer)
    assert connect.connect_ready("http://127.0.0.1:1") is False


def test_a_worker_asked_for_metrics_starts_with_the_jmx_exporter_agent_and_the_rendered_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mm2spec.dev import connect, process

    monkeypatch.setattr(process, "java_and_libs", lambda found=None: ("java", tmp_path))
    config = tmp_path / "worker.properties"
    config.write_text("listeners=http://127.0.0.1:18083\n")
    cache = Components(cache=tmp_path, pinned=versions())
    with pytest.raises(DevError, match=r"jmx-exporter\.yml for engine connect"):
        connect.ConnectWorker(config, tmp_path, found=cache, metrics_port=19404)
    rules = tmp_path / "jmx-exporter.yml"
    rules.write_text("rules: []\n")
    with pytest.raises(ComponentMissing, match=r"JMX exporter agent is not installed.*install-jmx-exporter\.sh"):
        connect.ConnectWorker(config, tmp_path, found=cache, metrics_port=19404, metrics_rules=rules)
    jar = tmp_path / "jmx-exporter" / "jmx_prometheus_javaagent.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"PK")
    started: dict = {}
    monkeypatch.setattr(process, "check_ports_free", lambda ports: started.update(checked=set(ports)))
    monkeypatch.setattr(process, "start", lambda name, command, **kw: started.update(command=command, **kw))
    connect.ConnectWorker(config, tmp_path, found=cache, metrics_port=19404, metrics_rules=rules).start()
    assert started["command"][1] == f"-javaagent:{jar}=127.0.0.1:19404:{rules}"
    assert started["checked"] == set(started["ports"]) == {18083, 19404}
    assert not any("javaagent" in part for part in process.java_command("java", tmp_path, "Main", [], log4j=rules,
                                                                       heap="1g"))


def test_brokers_may_take_kafkas_default_heap_or_what_the_stack_is_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 512 MB a dev broker holding 10,000 topics and 60,000 ACL bindings spent its time in full
    collections; Kafka's own start script gives 1 GB, and a benchmark can give more."""
    from mm2spec.dev import process, stack

    monkeypatch.setattr(process, "java_and_libs", lambda found=None: ("java", tmp_path))
    spec = stack.DevStack(tmp_path).specs()["primary"]
    started: dict = {}
    monkeypatch.setattr(process, "start", lambda name, command, **kw: started.update(command=command))
    cluster = KafkaCluster(spec, tmp_path)
    cluster.home.mkdir()
    cluster.properties.write_text("")  # formatted, as far as start() looks
    cluster.start()
    assert "-Xmx1g" in started["command"]

    made: list = []

    class Stop(Exception):
        pass

    def recorded(spec, root, **kw):
        made.append(kw["heap"])
        raise Stop

    monkeypatch.setattr(stack, "KafkaCluster", recorded)
    with pytest.raises(Stop):
        stack.DevStack(tmp_path / "big", broker_heap="3g").up(with_connect=False)
    assert made == ["3g"]


TLS = BrokerSpec("primary", 19092, 19093, tls=True, sasl_ssl_port=19094, certs_dir="/x/certs/primary")


def test_tls_broker_requires_client_certificates_on_ssl_and_scram_on_sasl_ssl() -> None:
    props = read_properties(broker_properties(TLS, Path("/data/primary")))
    assert props["listeners"] == props["advertised.listeners"] == (
        "SSL://127.0.0.1:19092,SASL_SSL://127.0.0.1:19094,CONTROLLER://127.0.0.1:19093")
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["listener.name.sasl_ssl.ssl.client.auth"] == "none"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert "ScramLoginModule" in props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert (props["ssl.keystore.type"], props["ssl.keystore.location"]) == ("PEM", "/x/certs/primary/broker-keystore.pem")
    assert (props["ssl.truststore.type"], props["ssl.truststore.location"]) == ("PEM", "/x/certs/primary/ca.pem")
    assert not any("password" in key for key in props if key.startswith("ssl."))
    assert props["inter.broker.listener.name"] == "SSL"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"].split(";") == ["User:admin", "User:CN=admin", "User:ANONYMOUS", "User:CN=broker-primary"]
    assert "User:CN=mm2" not in props["super.users"] and "intruder" not in props["super.users"]
    assert props["offsets.topic.replication.factor"] == "1"


def test_tls_cluster_formats_with_the_scram_users_and_listens_on_three_ports() -> None:
    args = format_args(TLS, "cid", Path("/p/server.properties"))
    assert [args[i + 1] for i, arg in enumerate(args) if arg == "--add-scram"] == [
        f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]",
        f"SCRAM-SHA-512=[name=mm2,password={MM2_PASSWORD}]",
    ]
    assert TLS.ports == (19092, 19093, 19094)
    assert TLS.port_roles() == {19092: "client", 19093: "controller", 19094: "SASL_SSL client"}
    assert (TLS.security_protocol, TLS.bootstrap, TLS.sasl_ssl_bootstrap) == ("SSL", "127.0.0.1:19092", "127.0.0.1:19094")
    assert PLAIN.ports == (19092, 19093) and SECURE.security_protocol == "SASL_PLAINTEXT"


def test_a_cluster_is_secure_or_tls_and_a_tls_one_knows_its_port_and_certificates() -> None:
    with pytest.raises(DevError, match="choose one"):
        BrokerSpec("dr", 1, 2, secure=True, tls=True, sasl_ssl_port=3, certs_dir="/c")
    with pytest.raises(DevError, match="needs sasl_ssl_port and certs_dir"):
        BrokerSpec("dr", 1, 2, tls=True)
    with pytest.raises(DevError, match="not started with --tls"):
        _ = PLAIN.certs
    with pytest.raises(DevError, match="no SASL_SSL listener"):
        _ = PLAIN.sasl_ssl_bootstrap


def test_tls_client_settings_use_the_users_certificate_or_scram_over_tls() -> None:
    assert client_config(TLS, "mm2") == {
        "bootstrap.servers": "127.0.0.1:19092",
        "security.protocol": "SSL",
        "ssl.ca.location": "/x/certs/primary/ca.pem",
        "ssl.certificate.location": "/x/certs/primary/mm2.pem",
        "ssl.key.location": "/x/certs/primary/mm2.key",
    }
    assert client_config(TLS, "intruder", "ssl")["ssl.certificate.location"] == "/x/certs/primary/intruder.pem"
    assert client_config(TLS, "admin", "sasl_ssl") == {
        "bootstrap.servers": "127.0.0.1:19094",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": "/x/certs/primary/ca.pem",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": ADMIN_PASSWORD,
    }
    with pytest.raises(DevError, match="no user 'intruder'"):
        client_config(TLS, "intruder", "sasl_ssl")
    with pytest.raises(DevError, match="no client certificate for 'bob'"):
        client_config(TLS, "bob")
    with pytest.raises(DevError, match="unknown listener 'plaintext'"):
        client_config(TLS, "admin", "plaintext")
    with pytest.raises(DevError, match="needs a --tls cluster"):
        client_config(SECURE, "admin", "sasl_ssl")


def test_tls_java_clients_and_the_connect_worker_use_pem_stores_as_admin() -> None:
    props = read_properties(connect_worker_properties(TLS, rest_port=18083))
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[prefix + "security.protocol"] == "SSL", prefix
        assert props[prefix + "ssl.truststore.type"] == props[prefix + "ssl.keystore.type"] == "PEM", prefix
        assert props[prefix + "ssl.truststore.location"] == "/x/certs/primary/ca.pem", prefix
        assert props[prefix + "ssl.keystore.location"] == "/x/certs/primary/admin-keystore.pem", prefix
    assert java_client_properties(TLS, "mm2")["ssl.keystore.location"] == "/x/certs/primary/mm2-keystore.pem"
    assert not any("sasl" in key for key in props)


def test_spec_fragments_of_a_tls_cluster() -> None:
    assert spec_fragment(TLS, "mtls") == {
        "bootstrapServers": ["127.0.0.1:19092"],
        "security": {"protocol": "SSL", "principal": "User:CN=mm2"},
        "tls": {
            "ca": "/x/certs/primary/ca.pem",
            "certificate": "/x/certs/primary/mm2.pem",
            "key": "/x/certs/primary/mm2.key",
            "admin": {"certificate": "/x/certs/primary/admin.pem", "key": "/x/certs/primary/admin.key"},
        },
    }
    dr = BrokerSpec("dr", 29092, 29093, tls=True, sasl_ssl_port=29094, certs_dir="/x/certs/dr")
    assert spec_fragment(dr, "sasl_ssl") == {
        "bootstrapServers": ["127.0.0.1:29094"],
        "security": {
            "protocol": "SASL_SSL",
            "saslMechanism": "SCRAM-SHA-512",
            "username": "mm2",
            "passwordSecret": "DR_MM2_PASSWORD",
            "admin": {"username": "admin", "passwordSecret": "DR_ADMIN_PASSWORD"},
        },
        "tls": {"ca": "/x/certs/dr/ca.pem"},
    }
    with pytest.raises(DevError, match="unknown spec fragment shape 'scram'"):
        spec_fragment(TLS, "scram")
    with pytest.raises(DevError, match="not started with --tls"):
        spec_fragment(PLAIN, "mtls")
    assert tls_env() == {**secure_env(), "PRIMARY_ADMIN_PASSWORD": ADMIN_PASSWORD, "DR_ADMIN_PASSWORD": ADMIN_PASSWORD}


def test_a_tls_stack_gives_each_cluster_its_ports_and_certificates_and_records_them(tmp_path: Path) -> None:
    ports = DevPorts.free()
    assert len(set(vars(ports).values())) == len(vars(ports)) == 7
    specs = DevStack(tmp_path, ports=ports, tls=True).specs()
    assert specs["dr"].sasl_ssl_port == ports.dr_sasl_ssl and specs["dr"].certs_dir == str(tmp_path.resolve() / "certs" / "dr")
    assert DevStack(tmp_path).specs()["dr"] == BrokerSpec("dr", 29092, 29093)
    with pytest.raises(DevError, match="choose one"):
        DevStack(tmp_path, secure=True, tls=True)

    state = DevState(tmp_path, False, specs, tls=True)
    data = state.to_json()
    assert data["tls"] is True
    assert data["clusters"]["primary"]["sasl_ssl_port"] == ports.primary_sasl_ssl
    assert data["certs"]["dr"]["ca"] == str(tmp_path.resolve() / "certs" / "dr" / "ca.pem")
    assert DevState.from_json(data) == state
    assert state.client_config("dr", "mm2", "sasl_ssl")["bootstrap.servers"] == f"127.0.0.1:{ports.dr_sasl_ssl}"
    assert state.spec_fragment("primary")["bootstrapServers"] == [f"127.0.0.1:{ports.primary}"]
    assert state.certs("dr").key("admin") == tmp_path.resolve() / "certs" / "dr" / "admin.key"


def test_dev_up_tls_and_secure_contradict(capsys: pytest.CaptureFixture) -> None:
    assert _parser().parse_args(["dev", "up", "--tls"]).tls
    assert not _parser().parse_args(["dev", "up"]).tls
    with pytest.raises(SystemExit):
        _parser().parse_args(["dev", "up", "--tls", "--secure"])
    assert "not allowed with" in capsys.readouterr().err
