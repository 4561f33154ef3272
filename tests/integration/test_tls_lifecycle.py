"""TLS end to end, on the TLS dev pair (each cluster its own CA, in no system store): one lifecycle
per shape, every command and both engines, instead of repeating every other test on TLS.

- **mTLS, Spark (micro-batch):** principals are certificates' subjects (``User:CN=mm2``); mm2spec
  provisions with the admin certificate. Bad TLS input is refused by ``plan`` within seconds, naming
  the cluster and the cause; ``validate``, ``plan``, ``pulumi up`` (topics, ACLs for the certificate
  principal on both clusters, the Spark job config), the ACLs enforced (another principal is denied),
  the Spark job mirroring as ``CN=mm2`` with its least-privilege ACLs only, the drill (verify,
  failover, failback: 0 skipped, 0 re-read), the DR exporter scraped, ``pulumi refresh`` and
  ``destroy``; no private key and no password in Pulumi's output or state.
- **SASL_SSL (SCRAM) with a JKS truststore, Connect/MM2 and Spark Real-time:** ``pulumi up``
  registers MM2's connectors on a Connect worker started from the rendered worker config (TLS
  settings, passwords by ``${env:...}``), the drill runs on the Connect engine; then the Spark job
  mirrors in Real-time Mode over the same clusters.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mm2spec.cli import main
from mm2spec.dev import ADMIN_PASSWORD, MM2_PASSWORD
from mm2spec.dev.config import tls_env
from mm2spec.dev.process import pick_free_ports
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.records import retrying
from mm2spec.render import render_files, spark_job_config, write_files
from mm2spec.render.spark import anchor_checkpoint
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_pulumi_stack import project_stack, pulumi_bin  # noqa: F401  (pulumi_bin: a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
RUNNING_TIMEOUT = 180.0
PARTITIONS = 2
RECORDS = 200
#: A bad TLS setting is refused by mm2spec's probe, not by a client's timeout.
REFUSED_WITHIN_S = 10.0
DRILL = ("--duration", "2", "--rate", "20", "--verify-timeout", "120", "--settle-timeout", "180", "--quiet")
FLOW = {"offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False,
        "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5, "tasksMax": 1}


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    printed = capsys.readouterr()
    return code, printed.out + printed.err


def _wait(check, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while problems := check():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise AssertionError(f"timed out waiting for {what}: {problems}\n{tail}")
        time.sleep(0.5)


def _seed(config: dict, topic: str, groups: list[str], cluster) -> None:
    """``RECORDS`` records on ``topic`` and each group stopped at random offsets, as applications left them."""
    producer = Producer({**config, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    rng = random.Random(7)
    for group in groups:
        consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
        offsets = [TopicPartition(topic, p, rng.randrange(1, RECORDS // PARTITIONS)) for p in range(PARTITIONS)]
        try:
            retrying(lambda: consumer.commit(offsets=offsets, asynchronous=False), f"commit {group}", cluster)
        finally:
            consumer.close()


def _mirrored(state, topic: str) -> list[str]:
    """Partitions of ``topic`` whose end offset on DR is behind the source's."""
    source, target = KafkaAdmin(state.cluster("primary")), KafkaAdmin(state.cluster("dr"))
    if topic not in target.topics([topic], with_configs=False):
        return [f"{topic} not on dr yet"]
    ends, copies = source.end_offsets(topic, PARTITIONS), target.end_offsets(topic, PARTITIONS)
    return [f"{topic}-{p}: {c}/{e}" for p, (e, c) in enumerate(zip(ends, copies)) if c < e]


def _drill(capsys, spec: Path, out: Path, *extra: str) -> dict:
    code, printed = _run(capsys, "drill", str(spec), "--out", str(out), *extra, *DRILL)
    data = json.loads((out / "drill.json").read_text())
    assert code == 0 and data["passed"], f"{printed[-3000:]}\n{json.dumps(data['phases'], indent=1)[-4000:]}"
    head = data["headline"]
    assert head["skipped"] == 0 and head["reread"] == 0 and head["unknown"] == 0, head
    assert all(r["result"] == "exact" for r in data["probes"]), data["probes"]
    assert {r["switch"] for r in data["probes"]} == {"failover", "failback"}
    return data


def _spec(pair, shape: str, run: str, tmp: Path, **more) -> dict:
    flow = {"name": f"tls-{run}", "source": "primary", "target": "dr", "replicationPolicy": "identity",
            "topics": [f"tls-{run}-.*"], "groups": [f"tls-{run}-.*"], **FLOW}
    spec = {
        "apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": f"it-tls-{run}"},
        "clusters": {alias: pair.spec_fragment(alias, shape) for alias in ("primary", "dr")},
        "mirrors": [flow],
        "engine": "spark",
        "acls": {"manage": True, "principal": "User:mm2"},
        "connect": {"cluster": "dr", "groupId": f"it-tls-connect-{run}"},
        "spark": {"metrics": {"port": pick_free_ports(1)[0]}, "master": "local[2]", "triggerInterval": "1 second",
                  "checkpointLocation": str(tmp / "checkpoint")},
    }
    for key, value in more.items():
        spec[key] = value | spec[key] if isinstance(value, dict) and key in spec else value
    return spec


def _write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _refused(capsys, tmp: Path, spec: dict, change, expected: str) -> str:
    """``plan`` of ``spec`` changed by ``change``: exit 1 within ``REFUSED_WITHIN_S``, the message naming
    the cluster and ``expected``, no traceback, no password."""
    bad = json.loads(json.dumps(spec))
    change(bad)
    path = _write(tmp / "bad.yaml", bad)
    began = time.monotonic()
    code, printed = _run(capsys, "plan", str(path))
    took = time.monotonic() - began
    assert code == 1 and expected in printed and "Traceback" not in printed, printed
    assert 'cluster "' in printed, printed
    assert took < REFUSED_WITHIN_S, f"refused after {took:.1f} s: {printed}"
    for password in (ADMIN_PASSWORD, MM2_PASSWORD):
        assert password not in printed
    return printed.strip().splitlines()[-1]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return answer.read().decode()


def _secrets_absent(stack, tmp: Path, secrets: list[str]) -> None:
    exported = stack.run("stack", "export").stdout
    backend = "".join(p.read_text(errors="replace") for p in (tmp / "state").rglob("*") if p.is_file())
    everything = "\n".join(stack.transcript) + exported + backend
    for secret in secrets:
        assert secret not in everything, "a secret leaked into Pulumi's output or state"


def _applied_stack(tmp: Path, env: dict[str, str], spec: Path):
    """A stack ``tls`` of the project in ``tmp`` on ``spec`` (written out under ``out``), ``up`` done."""
    stack = project_stack(tmp, env)
    (stack.project / "spec.yaml").write_text(spec.read_text())
    stack.run("login")
    stack.run("stack", "init", "tls")
    stack.run("config", "set", "mm2spec:spec", "spec.yaml")
    stack.run("config", "set", "mm2spec:outDir", "out")
    stack.run("up", "--yes")
    return stack


def _key_body(path: str) -> str:
    """A line from the middle of a PEM key: present in any copy of the key, whatever its framing."""
    lines = [line for line in Path(path).read_text().splitlines() if line and not line.startswith("-----")]
    return lines[len(lines) // 2]


def test_mtls_every_command_and_the_spark_engine(tls_kafka_pair, pulumi_bin, tmp_path, capsys,  # noqa: F811
                                                 monkeypatch):
    pair, run = tls_kafka_pair, uuid.uuid4().hex[:6]
    monkeypatch.setenv("IT_TLS_WRONG_KEY_PASSWORD", "not-the-key-password")
    topic, groups = f"tls-{run}-orders", [f"tls-{run}-app-{i}" for i in range(2)]
    spec = _spec(pair, "mtls", run, tmp_path, acls={"principal": "User:CN=mm2"})
    path = _write(tmp_path / "tls.dr.yaml", spec)
    state = load_desired_state(path, None)
    primary, dr = KafkaAdmin(state.cluster("primary")), KafkaAdmin(state.cluster("dr"))
    primary.create_topic(topic, PARTITIONS, -1, {})
    _seed(pair.client_config("primary", "admin"), topic, groups, state.cluster("primary"))

    assert _run(capsys, "validate", str(path))[0] == 0
    certs = {alias: pair.certs(alias) for alias in ("primary", "dr")}
    primary_tls = spec["clusters"]["primary"]["tls"]
    messages = [
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["primary"]["tls"].update(ca=str(certs["dr"].ca)),
                 "is not signed by a CA the client trusts"),
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["primary"]["tls"]["admin"].update(
            certificate=str(certs["primary"].expired_certificate), key=str(certs["primary"].expired_key)),
            "the client certificate expired on"),
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["primary"]["tls"]["admin"].update(
            certificate=str(certs["primary"].foreign_certificate), key=str(certs["primary"].foreign_key)),
            "refused the client certificate"),
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["dr"]["tls"].update(ca=str(tmp_path / "absent.pem")),
                 "absent.pem does not exist"),
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["dr"]["tls"].update(ca=str(certs["dr"].truststore_jks)),
                 "is a JKS store, not PEM"),
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["primary"]["tls"]["admin"].update(
            key=str(certs["primary"].mm2_encrypted_key), certificate=primary_tls["certificate"],
            keyPasswordSecret="IT_TLS_WRONG_KEY_PASSWORD"), "the key's password is wrong"),
        _refused(capsys, tmp_path, spec, lambda s: (s["clusters"]["primary"]["tls"].pop("admin"),
                                                      s["clusters"]["primary"]["tls"].pop("certificate"),
                                                      s["clusters"]["primary"]["tls"].pop("key")),
                 "requires a client certificate (mutual TLS) and none was given"),
        _refused(capsys, tmp_path, spec, lambda s: s["clusters"]["primary"].update(
            bootstrapServers=[pair.primary.sasl_ssl_bootstrap]), "is a SASL listener"),
    ]
    print("\n".join(messages))

    code, printed = _run(capsys, "plan", str(path))
    assert code == 0 and "User:CN=mm2" in printed, printed

    stack = _applied_stack(tmp_path, {"IT_TLS_WRONG_KEY_PASSWORD": "not-it"}, path)
    assert topic in dr.topics([topic], with_configs=False)
    for admin, operations in ((primary, {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}),
                              (dr, {"ALTER", "ALTER_CONFIGS", "CREATE", "DESCRIBE", "READ", "WRITE"})):
        granted = {b.operation for b in admin.acls("User:CN=mm2") if b.resource_name == f"tls-{run}-"}
        assert granted == operations, granted

    # Enforced: the mirror's certificate may read the topic's offsets, another principal may not.
    for user, allowed in (("mm2", True), ("intruder", False)):
        consumer = Consumer({**pair.client_config("primary", user), "group.id": f"tls-{run}-probe-{user}"})
        try:
            if allowed:
                assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1] > 0
            else:
                # A topic a principal may not describe is not in its metadata: unknown to it.
                with pytest.raises(KafkaException, match="AUTHORIZATION|Unknown partition"):
                    consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        finally:
            consumer.close()

    job = mirror.start(anchor_checkpoint(spark_job_config(state), tmp_path), state_dir=tmp_path / "spark",
                       wait_running=START_TIMEOUT)
    exporter_port = pick_free_ports(1)[0]
    exporter_log = tmp_path / "exporter.log"
    with open(exporter_log, "wb") as out:
        exporter = subprocess.Popen([str(Path(sys.executable).with_name("mm2spec")), "verify", str(path), "--serve",
                                     str(exporter_port), "--refresh", "1"], stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ})
    try:
        _wait(lambda: _mirrored(state, topic), CATCH_UP_TIMEOUT, "the Spark job to mirror the seed records",
              Path(job.log_file))
        _drill(capsys, path, tmp_path / "drill", "--state-dir", str(tmp_path / "spark"))

        def exporter_answers() -> list[str]:
            try:
                text = _scrape(exporter_port)
            except OSError as exc:
                return [str(exc)]
            up = [line for line in text.splitlines() if line.startswith("mm2spec_cluster_up{")]
            return [] if len(up) == 2 and all(line.endswith(" 1.0") or line.endswith(" 1") for line in up) else up
        _wait(exporter_answers, 60, "the DR exporter to serve both clusters up", exporter_log)
    finally:
        exporter.terminate()
        exporter.wait(30)
        mirror.stop(tmp_path / "spark")

    stack.run("refresh", "--preview-only", "--expect-no-changes")
    _secrets_absent(stack, tmp_path, [_key_body(primary_tls["key"]), _key_body(primary_tls["admin"]["key"])])
    stack.run("destroy", "--yes")
    assert topic not in dr.topics([topic], with_configs=False)
    assert not dr.acls("User:CN=mm2") and not primary.acls("User:CN=mm2")
    stack.run("stack", "rm", "tls", "--yes")


def test_sasl_ssl_with_a_jks_truststore_connect_and_spark_realtime(tls_kafka_pair, pulumi_bin, connect_worker,  # noqa: F811
                                                                   tmp_path, capsys, monkeypatch):
    pair, run = tls_kafka_pair, uuid.uuid4().hex[:6]
    topic, groups = f"tls-{run}-orders", [f"tls-{run}-app-{i}" for i in range(2)]
    secrets = {**tls_env(), "IT_DR_TRUSTSTORE_PASSWORD": pair.certs("dr").store_password()}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    spec = _spec(pair, "sasl_ssl", run, tmp_path, engine="connect",
                 connect={"config": {"offset.flush.interval.ms": "1000"}})
    spec["clusters"]["dr"]["tls"] = {"truststore": {"path": str(pair.certs("dr").truststore_jks), "type": "JKS",
                                                    "passwordSecret": "IT_DR_TRUSTSTORE_PASSWORD"}}
    spec["mirrors"][0]["heartbeats"] = False
    path = _write(tmp_path / "tls.dr.yaml", spec)
    state = load_desired_state(path, None)
    primary, dr = KafkaAdmin(state.cluster("primary")), KafkaAdmin(state.cluster("dr"))
    primary.create_topic(topic, PARTITIONS, -1, {})
    _seed(pair.client_config("primary", "admin", "sasl_ssl"), topic, groups, state.cluster("primary"))

    # MM2 on a Connect worker started from the rendered worker config (TLS, passwords by ${env:...}).
    write_files(render_files(state), tmp_path / "rendered")
    rendered = (tmp_path / "rendered" / "connect-distributed.properties").read_text()
    assert "ssl.truststore.type=JKS" in rendered and "${env:IT_DR_TRUSTSTORE_PASSWORD}" in rendered
    assert all(value not in rendered for value in secrets.values())
    # The worker's own clients as admin: mm2's ACLs on its internal topics come with the stack's
    # `up`, which needs the worker to register the connectors (they run as mm2, by their own settings).
    admin_login = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
                   'password="${env:DR_ADMIN_PASSWORD}";')
    worker = connect_worker(tmp_path / "rendered" / "connect-distributed.properties",
                            overrides={"listeners": "http://127.0.0.1:0", "sasl.jaas.config": admin_login}, env=secrets)
    spec["connect"]["restUrl"] = worker.url
    _write(path, spec)
    state = load_desired_state(path, None)

    stack = _applied_stack(tmp_path, secrets, path)
    assert {b.operation for b in dr.acls("User:mm2") if b.resource_name == f"tls-{run}-"} >= {"WRITE", "CREATE"}
    _wait(lambda: _mirrored(state, topic), CATCH_UP_TIMEOUT, "MM2 to mirror the seed records", worker.process.log)
    _drill(capsys, path, tmp_path / "drill", "--connect-url", worker.url)
    stack.run("refresh", "--preview-only", "--expect-no-changes")
    _secrets_absent(stack, tmp_path, list(secrets.values()))
    stack.run("destroy", "--yes")
    assert not dr.acls("User:mm2") or all(b.resource_name != f"tls-{run}-" for b in dr.acls("User:mm2"))
    stack.run("stack", "rm", "tls", "--yes")

    # The Spark job in Real-time Mode over the same SASL_SSL clusters (admin's ACLs: a super user).
    later = f"tls-{run}-later"
    primary.create_topic(later, PARTITIONS, -1, {})
    _seed(pair.client_config("primary", "admin", "sasl_ssl"), later, [], state.cluster("primary"))
    realtime = _spec(pair, "sasl_ssl", run, tmp_path, spark={"mode": "realtime"})
    realtime["clusters"]["dr"]["tls"] = spec["clusters"]["dr"]["tls"]
    for alias in ("primary", "dr"):  # the mirror as admin: the stack that granted mm2 its ACLs is gone
        realtime["clusters"][alias]["security"]["username"] = "admin"
        realtime["clusters"][alias]["security"]["passwordSecret"] = f"{alias.upper()}_ADMIN_PASSWORD"
    rt_state = load_desired_state(_write(tmp_path / "realtime.dr.yaml", realtime), None)
    job = mirror.start(anchor_checkpoint(spark_job_config(rt_state), tmp_path), state_dir=tmp_path / "spark-rt",
                       env=secrets, wait_running=START_TIMEOUT)
    try:
        _wait(lambda: _mirrored(rt_state, later), CATCH_UP_TIMEOUT, "the Real-time job to mirror", Path(job.log_file))
    finally:
        mirror.stop(tmp_path / "spark-rt")
