"""The project's Pulumi program end to end: the real CLI (scripts/pulumi) on the secured dev clusters.

The project under test is a temporary folder holding the repository's ``Pulumi.yaml`` and
symlinks to the repository's program folder and ``.venv``, so the program runs exactly as from the
repository root (``pulumi/`` beside the project file, which must not shadow the SDK; the relative
virtualenv found by the program and by the provider host) while the stack config, the file backend
and PULUMI_HOME stay in tmp. Cluster
aliases, topic names and the ACL principal are unique per run, so nothing collides with other
tests on the shared clusters.

One stack goes through: an invalid spec and a missing secret fail the preview with actionable
messages; preview lists the creates; ``up`` creates them (topics, ACLs on both clusters, the Spark
job config); a second preview has no changes, nor has ``refresh --preview-only``; a topic config
altered and an ACL binding deleted behind the stack fail that drift check, and after a refresh the
preview puts back exactly those; a spec edit (a topic added, a topic config changed
at the source, a group added) previews as exactly that and ``up`` applies it; a partition decrease
is refused, and replaced once the mirror allows it; ``destroy`` removes what the stack created
and nothing else. No password appears in any output or in the exported state.

A missing Pulumi CLI fails the test when ``CI`` is set and skips it otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from required import missing_component
import yaml

from mm2spec.components import components
from mm2spec.errors import ComponentMissing
from mm2spec.dev import ADMIN_PASSWORD, MM2_PASSWORD
from tests.kit.ledger import SequencedProducer
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.spec.model import AclBinding, Cluster, Security
from specs import ADMIN_SECRET, MM2_SECRET, spec_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
WRAPPER = PROJECT_ROOT / "scripts" / "pulumi"
PASSWORDS = (ADMIN_PASSWORD, MM2_PASSWORD)
TARGET_OPS = ["ALTER", "ALTER_CONFIGS", "CREATE", "DESCRIBE", "READ", "WRITE"]
COMPONENT = "mm2spec:index:DisasterRecovery"


@pytest.fixture(scope="module")
def pulumi_bin() -> Path:
    try:
        return components().pulumi_bin
    except ComponentMissing as exc:
        missing_component(exc)


class Stack:
    """One stack of the project in a temporary folder, driven through scripts/pulumi."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        self.project = root / "project"
        self.env = env
        self.transcript: list[str] = []

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run([str(WRAPPER), *args, "--non-interactive"], cwd=self.project, capture_output=True,
                              text=True, timeout=600, env={**self.env, **(env or {})})
        shown = " ".join("<secret>" if "--secret" in args and a == args[-1] else a for a in args)
        self.transcript.append(f"$ pulumi {shown}\n{done.stdout}\n{done.stderr}")
        if check and done.returncode != 0:
            pytest.fail(f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}", pytrace=False)
        return done

    def preview_steps(self) -> dict[str, str]:
        """URN name -> operation, for every resource the preview would change."""
        done = self.run("preview", "--json")
        ops: dict[str, set[str]] = {}
        for step in json.loads(done.stdout)["steps"]:
            # The stack and the DisasterRecovery component hold the resources; they change nothing.
            if step["op"] != "same" and step["urn"].split("::")[2] not in ("pulumi:pulumi:Stack", COMPONENT):
                ops.setdefault(step["urn"].split("::")[-1], set()).add(step["op"])
        # A replacement is several steps (create-replacement, replace, delete-replaced): one "replace".
        return {name: "replace" if any("replace" in op for op in found) else found.pop() for name, found in ops.items()}


def project_stack(tmp_path: Path, env: dict[str, str] | None = None) -> Stack:
    """A Pulumi project in ``tmp_path`` with this repository's Pulumi.yaml, program folder and venv,
    a file backend and a passphrase of its own; ``env`` adds to the environment."""
    stack = Stack(tmp_path, {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
                             "PULUMI_HOME": str(tmp_path / "home"), "PULUMI_CONFIG_PASSPHRASE": "it-passphrase",
                             "NO_COLOR": "1", **(env or {})})
    stack.env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    (tmp_path / "state").mkdir(parents=True)
    stack.project.mkdir()
    (stack.project / "Pulumi.yaml").write_text((PROJECT_ROOT / "Pulumi.yaml").read_text())
    (stack.project / "pulumi").symlink_to(PROJECT_ROOT / "pulumi")
    (stack.project / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    return stack


def admin_for(broker, alias: str) -> KafkaAdmin:
    security = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "IT_ADMIN")
    return KafkaAdmin(Cluster(alias, (broker.bootstrap,), security), secrets=lambda _name: ADMIN_PASSWORD)


def wait_for(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            assert value, f"timed out waiting for {what}"
            return value
        time.sleep(0.5)


def test_stack_lifecycle_on_secured_clusters(pulumi_bin, secure_kafka_pair, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    src, dst = f"src{run_id}", f"dst{run_id}"
    principal = f"User:it-{run_id}"
    orders, payments, outside, adopted = (f"{n}-{run_id}" for n in ("orders", "payments", "outside", "adopted"))
    group = f"billing-{run_id}"
    probe = f"mm2spec-probe-{src}-to-{dst}"
    primary, dr = admin_for(secure_kafka_pair.primary, src), admin_for(secure_kafka_pair.dr, dst)
    primary.create_topic(orders, 3, -1, {"retention.ms": "3600000"})
    primary.create_topic(payments, 2, -1, {})
    primary.create_topic(adopted, 1, -1, {})
    dr.create_topic(outside, 1, -1, {})       # not in the spec: must survive destroy
    dr.create_topic(adopted, 1, -1, {})       # in the spec, there before the stack with data: adopted, left in place
    SequencedProducer(secure_kafka_pair.client_config("dr"), adopted, 1, limit=1).start().wait()

    # The project: the repository's Pulumi.yaml and program folder, everything else in tmp.
    stack = project_stack(tmp_path, {MM2_SECRET: MM2_PASSWORD})
    stack.env.pop(ADMIN_SECRET, None)
    dr_admin_secret = f"IT_DR_ADMIN_{run_id.upper()}"
    assert not (PROJECT_ROOT / "pulumi" / "__init__.py").exists(), "pulumi/ must stay a plain program folder"

    def write(topics, groups=(), **mirror):
        spec = spec_for(secure_kafka_pair, topics, groups, secure=True, manage_acls=True, name=f"it-{run_id}",
                        mirror=mirror, connect={"cluster": "dr", "groupId": f"it-connect-{run_id}"})
        spec["clusters"] = {src: spec["clusters"]["primary"], dst: spec["clusters"]["dr"]}
        spec["mirrors"][0].update(source=src, target=dst)
        spec["connect"]["cluster"] = dst
        spec["acls"]["principal"] = principal
        spec["clusters"][dst]["security"]["admin"]["passwordSecret"] = dr_admin_secret
        (stack.project / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))

    stack.run("login")
    stack.run("stack", "init", "it")
    stack.run("config", "set", "mm2spec:spec", "spec.yaml")
    stack.run("config", "set", "mm2spec:outDir", "out")

    # An invalid spec stops the preview with located diagnostics, not a traceback.
    write([orders], tasksMax=0)
    bad = stack.run("preview", check=False)
    assert bad.returncode != 0
    assert "spec.yaml:" in bad.stdout and "/mirrors/0/tasksMax" in bad.stdout, bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr

    # Provisioning passwords: one cluster's as Pulumi secret config, the other's from the environment
    # (MM2's own password is not needed to provision). Missing, they are named.
    write([orders, "adopted-.*", f"(ordersx|{payments})"])
    missing = stack.run("preview", check=False)
    assert missing.returncode != 0 and "Traceback" not in missing.stdout
    assert f"needs the secret {ADMIN_SECRET}" in missing.stdout and f"needs the secret {dr_admin_secret}" in missing.stdout
    stack.run("config", "set", "--secret", ADMIN_SECRET, ADMIN_PASSWORD)
    stack.env[dr_admin_secret] = ADMIN_PASSWORD

    steps = stack.preview_steps()
    expected = {
        f"{dst}/{orders}", f"{dst}/{payments}", f"{dst}/{adopted}", f"{dst}/mm2-offset-syncs.{src}.internal",
        f"{dst}/__it-connect-{run_id}-configs", f"{dst}/__it-connect-{run_id}-offsets",
        f"{dst}/__it-connect-{run_id}-status", "spark-mirror",
        f"{src}/{principal}/TOPIC/LITERAL/{orders}", f"{dst}/{principal}/TOPIC/LITERAL/{orders}",
        f"{src}/{principal}/TOPIC/PREFIXED/adopted-", f"{dst}/{principal}/TOPIC/PREFIXED/adopted-",
        f"{src}/{principal}/TOPIC/matching/(ordersx|{payments})",
        f"{dst}/{principal}/TOPIC/matching/(ordersx|{payments})",
        f"{src}/{principal}/CLUSTER/LITERAL/kafka-cluster", f"{dst}/{principal}/CLUSTER/LITERAL/kafka-cluster",
        f"{dst}/{principal}/TOPIC/LITERAL/mm2-offset-syncs.{src}.internal",
        f"{dst}/{principal}/GROUP/LITERAL/it-connect-{run_id}",
        *(f"{dst}/{principal}/TOPIC/LITERAL/__it-connect-{run_id}-{k}" for k in ("configs", "offsets", "status")),
        # the flow's probe topic (mirrored whatever the patterns), its copy (identity) and their grants
        f"{src}/{probe}", f"{dst}/{probe}", f"{src}/{principal}/TOPIC/LITERAL/{probe}",
        f"{dst}/{principal}/TOPIC/LITERAL/{probe}",
    }
    assert steps == {name: "create" for name in expected}, sorted(steps.items())
    assert orders not in dr.topics(with_configs=False), "preview must not create anything"

    up = stack.run("up", "--yes")
    assert "Traceback" not in up.stdout
    live = dr.topics(include_internal=True)
    assert (live[orders].partitions, dict(live[orders].configs)) == (3, {"retention.ms": "3600000"})
    assert live[payments].partitions == 2
    assert live[f"mm2-offset-syncs.{src}.internal"].configs == {"cleanup.policy": "compact"}
    assert live[f"__it-connect-{run_id}-offsets"].partitions == 25
    target_acls = dr.acls(principal)
    assert {b.operation for b in target_acls if b.resource_name == payments} == set(TARGET_OPS)
    assert {b.operation for b in primary.acls(principal) if b.resource_name == orders} == {
        "READ", "DESCRIBE", "DESCRIBE_CONFIGS"}
    job = json.loads((stack.project / "out" / "spark-mirror.json").read_text())
    assert job["flows"][0]["source.cluster.alias"] == src

    stack.run("preview", "--expect-no-changes")

    # Refresh: nothing drifted, so the CI drift check passes ...
    began = time.monotonic()
    stack.run("refresh", "--preview-only", "--expect-no-changes")
    print(f"pulumi refresh --preview-only of {len(expected) + 1} resources: {time.monotonic() - began:.1f} s")
    # ... a topic config altered and an ACL binding deleted behind the stack fail it, naming them ...
    dr.alter_topic_configs(orders, {"retention.ms": "60000"})
    wait_for(lambda: dr.topics([orders])[orders].configs.get("retention.ms") == "60000", "the altered config")
    dr.delete_acls([AclBinding(dst, principal, "TOPIC", payments, "LITERAL", "WRITE")])
    regex_acl = f"{dst}/{principal}/TOPIC/matching/(ordersx|{payments})"
    drift = stack.run("refresh", "--preview-only", "--expect-no-changes", check=False)
    assert drift.returncode != 0 and "Traceback" not in drift.stdout + drift.stderr
    assert f"{dst}/{orders}" in drift.stdout and regex_acl in drift.stdout, drift.stdout
    # ... and once refreshed, the preview puts back exactly those (what `mm2spec plan` shows).
    stack.run("refresh", "--yes")
    assert stack.preview_steps() == {f"{dst}/{orders}": "update", regex_acl: "update"}
    stack.run("up", "--yes")
    assert dr.topics([orders])[orders].configs["retention.ms"] == "3600000"
    assert {b.operation for b in dr.acls(principal) if b.resource_name == payments} == set(TARGET_OPS)

    # A spec edit: a topic added, a source topic's config changed, a group added.
    extra = f"extra-{run_id}"
    primary.create_topic(extra, 4, -1, {})
    primary.alter_topic_configs(orders, {"retention.ms": "7200000"})
    write([orders, "adopted-.*", f"(ordersx|{payments})", extra], [group])
    steps = stack.preview_steps()
    assert steps == {
        f"{dst}/{extra}": "create",
        f"{src}/{principal}/TOPIC/LITERAL/{extra}": "create",
        f"{dst}/{principal}/TOPIC/LITERAL/{extra}": "create",
        f"{dst}/{orders}": "update",
        f"{dst}/{src}.checkpoints.internal": "create",
        f"{dst}/{principal}/TOPIC/LITERAL/{src}.checkpoints.internal": "create",
        f"{src}/{principal}/GROUP/LITERAL/{group}": "create",
        f"{dst}/{principal}/GROUP/LITERAL/{group}": "create",
        # a flow that checkpoints groups checkpoints its probe group too
        f"{src}/{principal}/GROUP/LITERAL/{probe}": "create",
        f"{dst}/{principal}/GROUP/LITERAL/{probe}": "create",
        "spark-mirror": "update",
    }, sorted(steps.items())
    stack.run("up", "--yes")
    live = dr.topics(include_internal=True)
    assert live[extra].partitions == 4 and live[orders].configs["retention.ms"] == "7200000"
    assert {b.operation for b in dr.acls(principal) if b.resource_name == group} == {"DESCRIBE", "READ"}
    stack.run("preview", "--expect-no-changes")

    # A partition decrease (the source topic was re-created smaller) is refused...
    primary.delete_topic(extra)
    wait_for(lambda: extra not in primary.topics([extra], with_configs=False), f"{extra} to go")
    wait_for(lambda: primary.create_topic(extra, 2, -1, {}, exist_ok=True), f"{extra} to be re-created")
    refused = stack.run("preview", check=False)
    assert refused.returncode != 0
    assert f"topic {extra} has 4 partitions; Kafka cannot remove partitions" in refused.stdout, refused.stdout
    assert "allowTopicReplacement: true" in refused.stdout
    assert stack.run("up", "--yes", check=False).returncode != 0
    assert dr.topics([extra], with_configs=False)[extra].partitions == 4, "a refused change must not be applied"
    # ... and replaced once the mirror allows it.
    write([orders, "adopted-.*", f"(ordersx|{payments})", extra], [group], allowTopicReplacement=True)
    steps = stack.preview_steps()
    assert steps[f"{dst}/{extra}"] == "replace"
    # The other mirrored topics only record the new flag (an update without a Kafka call).
    assert {name: op for name, op in steps.items() if op != "update"} == {f"{dst}/{extra}": "replace"}
    stack.run("up", "--yes")
    assert dr.topics([extra], with_configs=False)[extra].partitions == 2
    stack.run("preview", "--expect-no-changes")

    # Nothing secret anywhere: outputs, the exported state, the backend's files.
    exported = stack.run("stack", "export").stdout
    assert '"ciphertext"' in exported
    # The provider plugin serves every resource by default (no mm2spec:plugin in the stack config).
    kinds = {r["type"] for r in json.loads(exported)["deployment"]["resources"]
             if not r["type"].startswith(("pulumi:", "mm2spec:index:DisasterRecovery"))}
    assert kinds and all(kind.startswith("mm2spec:index:") for kind in kinds), kinds
    # ... found where Pulumi.yaml's plugins section says (the venv), not as an ambient plugin on PATH.
    assert not any("pulumi-resource-mm2spec from $PATH" in run for run in stack.transcript)
    backend = "".join(p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*") if p.is_file())
    everything = "\n".join(stack.transcript) + exported + backend
    for password in PASSWORDS:
        assert password not in everything, "a password leaked into Pulumi's output or state"

    stack.run("destroy", "--yes")
    left = dr.topics(with_configs=False, include_internal=True)
    assert outside in left and adopted in left, "destroy removed a topic the stack did not create"
    for gone in (orders, payments, extra, f"mm2-offset-syncs.{src}.internal", f"__it-connect-{run_id}-configs"):
        assert gone not in left, f"destroy left {gone}"
    assert {orders, payments, extra, adopted} <= set(primary.topics(with_configs=False)), "source topics survive"
    assert not dr.acls(principal) and not primary.acls(principal)
    assert not (stack.project / "out" / "spark-mirror.json").exists()
    stack.run("stack", "rm", "it", "--yes")


def test_up_waits_for_connectors_to_run_and_fails_with_a_failed_tasks_error(pulumi_bin, kafka_pair, connect_worker,
                                                                           tmp_path):
    """Engine connect on a real worker: ``up`` returns once the MM2 connectors and their tasks run; a
    refresh that cannot reach a resource's cluster fails naming it and keeps the state; a connector
    whose task fails (its source consumer given a setting Kafka refuses) fails ``up``
    with the first line of the task's error."""
    from mm2spec.live.connect import ConnectClient

    worker = connect_worker()
    run_id = uuid.uuid4().hex[:6]
    src, dst, flow = f"src{run_id}", f"dst{run_id}", f"flow-{run_id}"
    topic = f"mirrored-{run_id}"
    KafkaAdmin(Cluster(src, (kafka_pair.primary.bootstrap,))).create_topic(topic, 1, -1, {})
    stack = project_stack(tmp_path)

    def write(config):
        spec = spec_for(kafka_pair, [topic], engine="connect", rest_url=worker.url, name=f"it-{run_id}",
                        aliases=(src, dst), mirror={"name": flow, "config": config},
                        connect={"groupId": f"it-connect-{run_id}", "readyTimeoutSeconds": 90})
        (stack.project / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))

    stack.run("login")
    stack.run("stack", "init", "it")
    stack.run("config", "set", "mm2spec:spec", "spec.yaml")
    stack.run("config", "set", "mm2spec:outDir", "out")
    client = ConnectClient(worker.url)
    source = f"{flow}-MirrorSourceConnector"
    try:
        write({})
        stack.run("up", "--yes")
        running = client.connector_status(source)
        assert running["connector"]["state"] == "RUNNING" and running["tasks"], running
        assert {t["state"] for t in running["tasks"]} == {"RUNNING"}, running

        # A resource whose cluster does not answer fails the refresh naming the cluster; the state keeps it.
        exported = stack.run("stack", "export").stdout
        state = json.loads(exported)
        urn_end = f"::{dst}/{topic}"
        record = next(r for r in state["deployment"]["resources"] if r["urn"].endswith(urn_end))
        record["outputs"]["connection"]["bootstrapServers"] = "127.0.0.1:1"
        (tmp_path / "unreachable.json").write_text(json.dumps(state))
        stack.run("stack", "import", "--file", str(tmp_path / "unreachable.json"))
        refused = stack.run("refresh", "--yes", check=False)
        assert refused.returncode != 0 and "Traceback" not in refused.stdout + refused.stderr
        assert f'cluster "{dst}" (127.0.0.1:1) is unreachable' in refused.stdout, refused.stdout
        kept = json.loads(stack.run("stack", "export").stdout)["deployment"]["resources"]
        assert any(r["urn"].endswith(urn_end) for r in kept), "a failed refresh must not drop the resource"
        (tmp_path / "state.json").write_text(exported)
        stack.run("stack", "import", "--file", str(tmp_path / "state.json"))

        write({"source.consumer.auto.offset.reset": "bogus"})  # the task's consumer refuses it at start
        failed = stack.run("up", "--yes", check=False)
        assert failed.returncode != 0 and "Traceback" not in failed.stdout + failed.stderr
        assert f"connector {source}: task 0 FAILED" in failed.stdout, failed.stdout
        assert "auto.offset.reset" in failed.stdout and "run pulumi up again" in failed.stdout, failed.stdout
    finally:
        stack.run("destroy", "--yes", check=False)
    assert client.connector_config(source) is None
