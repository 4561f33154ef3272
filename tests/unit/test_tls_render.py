"""A spec's TLS clusters in every rendered config of the Java-client family (the Connect worker, the
MM2 connectors, dedicated-mode ``mm2.properties``, the Spark job's config) and in the Spark job's own
clients: Kafka's ``ssl.*`` names, passwords only as ``${env:NAME}``, a PEM client identity as
``${dir:FOLDER:FILE}`` with the ``dir`` config provider declared where (and only where) one is used.

The certificates are real (``make_certs`` of test_tls_clients.py), so the Spark job's side resolves
and converts them as it would on a cluster.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_tls_clients import KEY_PASSWORD, STORE_PASSWORD, make_certs

from mm2spec.errors import JobConfigError, TlsInvalid
from mm2spec.render import connectors, mm2_properties, worker_properties
from mm2spec.render.files import render_files
from mm2spec.render.spark import spark_job_config
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spark.config import parse_job_config

SASL_PASSWORD = "Sasl-Pass-5518"
ENVIRON = {"PRIMARY_KEY_PASSWORD": KEY_PASSWORD, "DR_TRUSTSTORE_PASSWORD": STORE_PASSWORD,
           "DR_KEYSTORE_PASSWORD": STORE_PASSWORD, "DR_MM2_PASSWORD": SASL_PASSWORD}
"""The secrets the spec names, set to values a test can look for in rendered text."""
ENV_CLASS = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
DIR_CLASS = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"

SPEC = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata:
  name: tls
clusters:
  primary:
    bootstrapServers: ["primary-1:9093"]
    security:
      protocol: SSL
      principal: "User:CN=mm2"
    tls:
      ca: certs/ca.pem
      certificate: certs/mm2.pem
      key: certs/mm2.enc.key
      keyPasswordSecret: PRIMARY_KEY_PASSWORD
      admin:
        certificate: certs/admin.pem
        key: certs/admin.key
  dr:
    bootstrapServers: ["dr-1:9094"]
    security:
      protocol: SASL_SSL
      saslMechanism: SCRAM-SHA-512
      username: mm2
      passwordSecret: DR_MM2_PASSWORD
    tls:
      truststore: {path: certs/trust.p12, passwordSecret: DR_TRUSTSTORE_PASSWORD}
      keystore: {path: certs/mm2.jks, passwordSecret: DR_KEYSTORE_PASSWORD}
mirrors:
  - source: primary
    target: dr
    topics: [orders]
    groups: [orders-service]
    heartbeats: true
engine: connect
connect:
  cluster: dr
"""


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory) -> Path:
    """A spec folder: the spec, and its certificates in ``certs/`` (the spec names them relatively)."""
    folder = tmp_path_factory.mktemp("tls-spec")
    make_certs(folder / "certs")
    (folder / "spec.yaml").write_text(SPEC)
    return folder


def load(folder: Path, text: str | None = None):
    if text is not None:
        (folder / "variant.yaml").write_text(text)
    return load_desired_state(folder / ("variant.yaml" if text is not None else "spec.yaml"), None)


def primary_ssl(certs: Path) -> dict[str, str]:
    """The mirror's Java ``ssl.*`` properties on primary: PEM CA, PEM identity by reference."""
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
            "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "${dir:" + str(certs) + ":mm2.pem}",
            "ssl.keystore.key": "${dir:" + str(certs) + ":mm2.enc.key}",
            "ssl.key.password": "${env:PRIMARY_KEY_PASSWORD}"}


def dr_ssl(certs: Path) -> dict[str, str]:
    """dr's: a PKCS#12 truststore and a JKS keystore, passwords by reference."""
    return {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(certs / "trust.p12"),
            "ssl.truststore.password": "${env:DR_TRUSTSTORE_PASSWORD}", "ssl.keystore.type": "JKS",
            "ssl.keystore.location": str(certs / "mm2.jks"), "ssl.keystore.password": "${env:DR_KEYSTORE_PASSWORD}",
            "ssl.key.password": "${env:DR_KEYSTORE_PASSWORD}"}


def ssl_of(config: dict[str, str], prefix: str = "") -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix + "ssl.")}


# -------------------------------------------------------------------------------------- connect

def test_worker_carries_its_clusters_tls_and_declares_dir_for_its_connectors(spec_dir):
    worker = dict(worker_properties(load(spec_dir)))
    certs = spec_dir / "certs"
    assert worker["security.protocol"] == "SASL_SSL"
    assert worker["sasl.jaas.config"].endswith('password="${env:DR_MM2_PASSWORD}";')
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert ssl_of(worker, prefix) == dr_ssl(certs), prefix
        assert worker[prefix + "security.protocol"] == "SASL_SSL"
    # The worker's own clients use no ${dir:}, its connectors do: the worker resolves their configs.
    assert worker["config.providers"] == "env,dir"
    assert worker["config.providers.env.class"] == ENV_CLASS
    assert worker["config.providers.dir.class"] == DIR_CLASS


def test_connectors_carry_both_clusters_tls(spec_dir):
    configs = {c["name"]: c["config"] for c in connectors(load(spec_dir))}
    certs = spec_dir / "certs"
    assert set(configs) == {"primary-to-dr-MirrorSourceConnector", "primary-to-dr-MirrorCheckpointConnector",
                            "primary-to-dr-MirrorHeartbeatConnector"}
    for name, config in configs.items():
        assert ssl_of(config, "source.cluster.") == primary_ssl(certs), name
        assert ssl_of(config, "target.cluster.") == dr_ssl(certs), name
        assert config["source.cluster.security.protocol"] == "SSL"
        assert not any(k.startswith("producer.override.") for k in config)  # dr is the worker's cluster


def test_mm2_properties_carry_each_clusters_tls(spec_dir):
    props = dict(mm2_properties(load(spec_dir)))
    certs = spec_dir / "certs"
    assert ssl_of(props, "primary.") == primary_ssl(certs)
    assert ssl_of(props, "dr.") == dr_ssl(certs)
    assert (props["config.providers"], props["config.providers.dir.class"]) == ("env,dir", DIR_CLASS)


def test_the_admin_certificate_is_never_rendered(spec_dir):
    joined = "\n".join(render_files(load(spec_dir)).values())
    assert "mm2.pem" in joined
    assert "admin.pem" not in joined and "admin.key" not in joined


def test_no_secret_and_no_key_is_rendered(spec_dir, monkeypatch):
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    files = render_files(load(spec_dir))
    joined = "\n".join(files.values())
    for value in ENVIRON.values():
        assert value not in joined
    assert "PRIVATE KEY" not in joined and "BEGIN CERTIFICATE" not in joined
    for name in ENVIRON:
        assert "${env:" + name + "}" in joined
    assert "${env:PRIMARY_KEY_PASSWORD}" in files["primary-to-dr-MirrorSourceConnector.json"]


def test_the_dir_provider_only_where_a_pem_identity_is_used(spec_dir):
    without_pem_identity = SPEC.replace("      certificate: certs/mm2.pem\n      key: certs/mm2.enc.key\n"
                                        "      keyPasswordSecret: PRIMARY_KEY_PASSWORD\n", "")
    state = load(spec_dir, without_pem_identity)
    worker, mm2 = dict(worker_properties(state)), dict(mm2_properties(state))
    for props in (worker, mm2):
        assert props["config.providers"] == "env"
        assert "config.providers.dir.class" not in props
    assert ssl_of(mm2, "primary.") == {"ssl.truststore.type": "PEM",
                                       "ssl.truststore.location": str(spec_dir / "certs" / "ca.pem")}
    assert not any("${dir:" in v for v in worker.values())


ACTIVE_ACTIVE = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata:
  name: tls-aa
clusters:
  a:
    bootstrapServers: ["a-1:9093"]
    security: {protocol: SSL}
    tls: {ca: certs/ca.pem, certificate: certs/mm2.pem, key: certs/mm2.key, verifyHostname: false}
  b:
    bootstrapServers: ["b-1:9093"]
    security: {protocol: SSL}
    tls: {ca: certs/ca.pem, certificate: certs/admin.pem, key: certs/admin.key}
mirrors:
  - {source: a, target: b, topics: [orders], replicationPolicy: default}
  - {source: b, target: a, topics: [orders], replicationPolicy: default}
engine: connect
connect:
  cluster: a
"""


def test_a_flow_into_another_cluster_overrides_the_workers_tls(spec_dir):
    state = load(spec_dir, ACTIVE_ACTIVE)
    worker = dict(worker_properties(state))
    assert worker["config.providers"] == "env,dir" and worker["ssl.endpoint.identification.algorithm"] == ""
    source = {c["name"]: c["config"] for c in connectors(state)}["a-to-b-MirrorSourceConnector"]
    certs = str(spec_dir / "certs")
    assert ssl_of(source, "producer.override.") == {
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs + "/ca.pem", "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "${dir:" + certs + ":admin.pem}",
        "ssl.keystore.key": "${dir:" + certs + ":admin.key}",
        # The worker's producers skip hostname verification for a; Connect merges overrides into
        # them, so b's producer turns it on again.
        "ssl.endpoint.identification.algorithm": "https"}
    back = {c["name"]: c["config"] for c in connectors(state)}["b-to-a-MirrorSourceConnector"]
    assert not any(k.startswith("producer.override.") for k in back)


def test_a_flow_into_a_cluster_of_another_tls_form_is_refused(spec_dir):
    both_ways = SPEC.replace("mirrors:\n", "mirrors:\n  - {source: dr, target: primary, topics: [orders], "
                                           "replicationPolicy: default}\n")
    both_ways = both_ways.replace("    topics: [orders]\n    groups", "    replicationPolicy: default\n"
                                                                     "    topics: [orders]\n    groups")
    state = load(spec_dir, both_ways)
    with pytest.raises(TlsInvalid) as caught:
        connectors(state)
    message = str(caught.value)
    assert message.startswith('flow "dr-to-primary": Connect\'s workers connect to cluster "dr"')
    assert "ssl.truststore.password" in message and "give both clusters' tls the same form" in message


# ------------------------------------------------------------------------------------- the Spark job

def test_spark_job_config_carries_the_java_properties(spec_dir):
    flow = spark_job_config(load(spec_dir))["flows"][0]
    certs = spec_dir / "certs"
    assert ssl_of(flow, "source.cluster.") == primary_ssl(certs)
    assert ssl_of(flow, "target.cluster.") == dr_ssl(certs)
    assert flow["target.cluster.security.protocol"] == "SASL_SSL"
    assert "PRIVATE KEY" not in json.dumps(flow)


def test_spark_job_resolves_references_for_the_jvm(spec_dir):
    flow = parse_job_config(spark_job_config(load(spec_dir)), environ=ENVIRON).flows[0]
    certs = spec_dir / "certs"
    java = flow.source.java_properties()
    assert java["ssl.keystore.key"] == (certs / "mm2.enc.key").read_text()
    assert java["ssl.keystore.certificate.chain"] == (certs / "mm2.pem").read_text()
    assert java["ssl.key.password"] == KEY_PASSWORD
    assert (java["ssl.truststore.type"], java["ssl.truststore.location"]) == ("PEM", str(certs / "ca.pem"))
    target = flow.target.java_properties()
    assert target["ssl.truststore.password"] == target["ssl.keystore.password"] == STORE_PASSWORD
    shown = repr(flow)
    for value in ENVIRON.values():
        assert value not in shown
    assert "PRIVATE KEY" not in shown


def test_spark_job_python_clients_get_librdkafka_settings(spec_dir):
    flow = parse_job_config(spark_job_config(load(spec_dir)), environ=ENVIRON).flows[0]
    certs = spec_dir / "certs"
    source = flow.source.librdkafka()
    assert source["security.protocol"] == "SSL"
    assert source["ssl.ca.location"] == str(certs / "ca.pem")
    assert source["ssl.certificate.pem"] == (certs / "mm2.pem").read_text()
    assert source["ssl.key.pem"] == (certs / "mm2.enc.key").read_text()
    assert source["ssl.key.password"] == KEY_PASSWORD
    target = flow.target.librdkafka()
    assert (target["sasl.username"], target["sasl.password"]) == ("mm2", SASL_PASSWORD)
    assert "BEGIN CERTIFICATE" in target["ssl.ca.pem"]
    assert target["ssl.keystore.location"].endswith(".p12")  # the JKS keystore, converted
    assert target["ssl.keystore.password"] == STORE_PASSWORD


def test_spark_job_refuses_a_missing_secret_or_file(spec_dir):
    job = spark_job_config(load(spec_dir))
    with pytest.raises(JobConfigError, match=r"environment variable PRIMARY_KEY_PASSWORD is not set "
                                             r"\(referenced as \$\{env:PRIMARY_KEY_PASSWORD\}\)"):
        parse_job_config(job, environ={k: v for k, v in ENVIRON.items() if k != "PRIMARY_KEY_PASSWORD"})
    gone = json.loads(json.dumps(job).replace(":mm2.pem}", ":gone.pem}"))
    with pytest.raises(JobConfigError) as caught:
        parse_job_config(gone, environ=ENVIRON)
    assert str(caught.value) == (f'cluster "primary": source.cluster.ssl.keystore.certificate.chain: '
                                 f'{spec_dir / "certs" / "gone.pem"} does not exist')
