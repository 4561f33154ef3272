"""The Pulumi program under ``pulumi.runtime.set_mocks``, and the providers' check/diff (no network).

Which resources the contract example means, with which inputs, given an in-memory snapshot of the
source cluster; how secrets travel; what each provider's diff decides.
"""

from __future__ import annotations

import base64
import gc
import json
import signal
import subprocess
import sys
from pathlib import Path

import dill
import pulumi
import pytest
from pulumi.runtime import Mocks, set_mocks

from mm2spec.spec.load import load_desired_state
from mm2spec.plan.desired import SourceSnapshot
from mm2spec.errors import ProvisionFailed, SecretMissing
from mm2spec.live.types import LiveTopic
from mm2spec.provision import acl, base, component, connection, connector, program, spark_deployment, topic, worker_config
from mm2spec.provision.files import RenderedFileProvider
from mm2spec.render import connectors, spark_job_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
SECRET_SIG = "4dabf18193072939515e22adb298388d"
PASSWORDS = {"PRIMARY_MM2_PASSWORD": "primary-pw-123", "DR_MM2_PASSWORD": "dr-pw-456"}
TARGET_OPS = ["ALTER", "ALTER_CONFIGS", "CREATE", "DESCRIBE", "READ", "WRITE"]
SOURCE_OPS = ["DESCRIBE", "DESCRIBE_CONFIGS", "READ"]


class Recorder(Mocks):
    """Records every registered resource; a resource's outputs are its inputs."""

    def __init__(self):
        self.resources: dict[str, pulumi.runtime.MockResourceArgs] = {}

    def new_resource(self, args):
        self.resources[args.name] = args
        return [f"{args.name}-id", args.inputs]

    def call(self, args):
        return {}

    def of_type(self, suffix: str) -> dict:
        return {name: r for name, r in self.resources.items() if r.typ.endswith(suffix)}


def snapshot() -> dict[str, SourceSnapshot]:
    """What the primary cluster holds: three topics the example selects, two it does not."""
    topics = {
        "orders": LiveTopic("orders", 6, 3, {"retention.ms": "604800000", "min.insync.replicas": "2"}),
        "payments": LiveTopic("payments", 3, 3, {}),
        "invoices-2024": LiveTopic("invoices-2024", 2, 3, {"cleanup.policy": "compact"}),
        "audit": LiveTopic("audit", 1, 3, {}),
        "mm2-offset-syncs.dr.internal": LiveTopic("mm2-offset-syncs.dr.internal", 1, 3, {}),
    }
    return {"primary": SourceSnapshot("primary", topics, ("orders-service", "billing-eu", "other"))}


def run(state, passwords, stack="prod", out_dir=".mm2spec/out/prod", preview=False) -> tuple[Recorder, program.Declared]:
    mocks = Recorder()
    set_mocks(mocks, project="mm2spec", stack=stack, preview=preview)
    declared = {}

    @pulumi.runtime.test
    def body():
        declared["d"] = program.declare(state, snapshot(), passwords,
                                        program.ProgramSettings(str(ROOT), out_dir, plugin=False))

    body()
    return mocks, declared["d"]


@pytest.fixture
def prod():
    return load_desired_state(EXAMPLE, "prod")


def plain(value):
    """A recorded input without Pulumi's secret wrapper."""
    return value["value"] if isinstance(value, dict) and SECRET_SIG in value else value


def test_prod_declares_internal_and_mirrored_topics_with_rf_minus_one(prod):
    mocks, _ = run(prod, {"primary": "primary-pw-123", "dr": "dr-pw-456"})
    topics = mocks.of_type(":Topic")
    assert sorted(topics) == sorted([
        "dr/__connect-mirrormaker-primary-to-dr-configs", "dr/__connect-mirrormaker-primary-to-dr-offsets",
        "dr/__connect-mirrormaker-primary-to-dr-status", "dr/mm2-offset-syncs.primary.internal",
        "dr/primary.checkpoints.internal", "dr/orders", "dr/payments", "dr/invoices-2024",
        # the flow's probe topic on its source, and its copy (identity policy)
        "primary/mm2spec-probe-primary-to-dr", "dr/mm2spec-probe-primary-to-dr"])
    assert all(t.typ == "pulumi-python:dynamic/kafka:Topic" for t in topics.values())
    assert all(t.inputs["options"]["replicationFactor"] == -1 for t in topics.values())
    for name, partitions in (("configs", 1), ("offsets", 25), ("status", 5)):
        internal = topics[f"dr/__connect-mirrormaker-primary-to-dr-{name}"].inputs
        assert (internal["partitions"], internal["configs"], internal["options"]["kind"]) == (
            partitions, {"cleanup.policy": "compact"}, "internal")
    assert topics["dr/primary.checkpoints.internal"].inputs["configs"] == {"cleanup.policy": "compact"}
    orders = topics["dr/orders"].inputs
    # The source's partition count and synced configs (min.insync.replicas is never synced, as in MM2).
    assert (orders["partitions"], orders["configs"]) == (6, {"retention.ms": "604800000"})
    assert orders["options"] == {"replicationFactor": -1, "allowReplacement": False, "kind": "mirror",
                                 "sourceTopic": "orders", "purpose": "primary-to-dr: mirror of primary/orders"}
    assert topics["dr/invoices-2024"].inputs["configs"] == {"cleanup.policy": "compact"}
    assert orders["cluster"] == "dr"
    assert orders["connection"] == {"bootstrapServers": "dr-1:9092,dr-2:9092,dr-3:9092", "securityProtocol": "SASL_SSL",
                                    "saslMechanism": "SCRAM-SHA-512", "username": "mm2", "passwordSecret": "DR_MM2_PASSWORD"}


@pytest.mark.parametrize("preview", [True, False])
def test_a_preview_registers_the_acl_resources_first_an_update_last(prod, preview, monkeypatch):
    """The order the waves declare them in (the engine may answer two waves in flight in any order)."""
    declared_kinds: list[str] = []
    waves = program.in_waves

    def watched(makers, then, **kwargs):
        def watch(make):
            def declare_one():
                resource = make()
                declared_kinds.append(type(resource).__name__)
                return resource
            return declare_one
        waves([watch(make) for make in makers], then, **kwargs)

    monkeypatch.setattr(program, "in_waves", watched)
    mocks, _ = run(prod, {"primary": "primary-pw-123", "dr": "dr-pw-456"}, preview=preview)
    kinds = [k for k in declared_kinds if k in ("Acl", "Topic")]
    assert len(kinds) == len([r for r in mocks.resources.values() if r.typ.rpartition(":")[2] in ("Acl", "Topic")])
    first_topic, last_acl = kinds.index("Topic"), len(kinds) - 1 - kinds[::-1].index("Acl")
    assert (last_acl < first_topic) is preview and kinds.count("Acl") > 1


def test_prod_declares_one_acl_resource_per_stated_binding(prod):
    mocks, _ = run(prod, {"primary": "primary-pw-123", "dr": "dr-pw-456"})
    acls = {name: r.inputs for name, r in mocks.of_type(":Acl").items()}
    assert acls["dr/User:mm2/TOPIC/LITERAL/orders"]["resources"] == {"orders": TARGET_OPS}
    assert acls["primary/User:mm2/TOPIC/LITERAL/orders"]["resources"] == {"orders": SOURCE_OPS}
    # "invoices-.*" is a plain prefix: PREFIXED on both clusters, not one ACL per matched topic.
    assert acls["dr/User:mm2/TOPIC/PREFIXED/invoices-"]["resources"] == {"invoices-": TARGET_OPS}
    assert acls["primary/User:mm2/TOPIC/PREFIXED/invoices-"]["resources"] == {"invoices-": SOURCE_OPS}
    assert acls["dr/User:mm2/GROUP/PREFIXED/billing-"]["resources"] == {"billing-": ["DESCRIBE", "READ"]}
    assert acls["primary/User:mm2/CLUSTER/LITERAL/kafka-cluster"]["resources"] == {"kafka-cluster": ["DESCRIBE"]}
    assert acls["dr/User:mm2/CLUSTER/LITERAL/kafka-cluster"]["resources"] == {
        "kafka-cluster": ["ALTER", "DESCRIBE", "IDEMPOTENT_WRITE"]}
    # prod keeps the base's exactlyOnce: the worker's transactional IDs.
    eos = acls["dr/User:mm2/TRANSACTIONAL_ID/PREFIXED/connect-mirrormaker-primary-to-dr-"]
    assert eos["resources"] == {"connect-mirrormaker-primary-to-dr-": ["DESCRIBE", "WRITE"]}
    first = acls["dr/User:mm2/TOPIC/LITERAL/orders"]
    assert first["binding"] == {"principal": "User:mm2", "resourceType": "TOPIC", "patternType": "LITERAL",
                                "permission": "ALLOW", "host": "*"}
    assert first["reasons"] and all(isinstance(r, str) for r in first["reasons"])
    assert covered(acls) == {(b.cluster, b.resource_type, b.resource_name, b.pattern_type, b.operation)
                             for b in prod.acl_bindings}


def covered(acls: dict) -> set:
    """Every (cluster, type, name, pattern, operation) the Acl resources hold, each exactly once."""
    found = [(i["cluster"], i["binding"]["resourceType"], name, i["binding"]["patternType"], op)
             for i in acls.values() for name, ops in i["resources"].items() for op in ops]
    assert len(found) == len(set(found)), "a binding is managed by two resources"
    return set(found)


def test_a_regex_gives_one_acl_resource_for_all_the_names_it_matches_today(tmp_path):
    spec = tmp_path / "spec.yaml"
    text = EXAMPLE.read_text().replace('topics: [orders, payments, "invoices-.*"]',
                                       'topics: [orders, "(orders|audit|payments)"]')
    spec.write_text(text.replace("replicationPolicy: identity ", "replicationPolicy: default  "))
    state = load_desired_state(spec, "prod")
    mocks, declared = run(state, {"primary": "p", "dr": "d"})
    acls = {name: r.inputs for name, r in mocks.of_type(":Acl").items()}
    source = acls["primary/User:mm2/TOPIC/matching/(orders|audit|payments)"]
    # orders is also stated literally: its bindings stay with the literal resource, never in two.
    assert source["resources"] == {"audit": SOURCE_OPS, "payments": SOURCE_OPS}
    target = acls["dr/User:mm2/TOPIC/matching/primary.((orders|audit|payments))"]
    assert target["resources"] == {"primary.audit": TARGET_OPS, "primary.payments": TARGET_OPS}
    assert acls["dr/User:mm2/TOPIC/LITERAL/primary.orders"]["resources"] == {"primary.orders": TARGET_OPS}
    assert sorted(t for t in declared.topics if "primary." in t and "internal" not in t) == [
        "dr/primary.audit", "dr/primary.mm2spec-probe-primary-to-dr", "dr/primary.orders", "dr/primary.payments"]
    assert covered(acls) == {(b.cluster, b.resource_type, b.resource_name, b.pattern_type, b.operation)
                             for b in declared.resources.acls}


def test_passwords_are_secret_inputs_and_providers_pickle_by_reference(prod):
    mocks, _ = run(prod, {"primary": "primary-pw-123", "dr": "dr-pw-456"})
    kafka = {**mocks.of_type(":Topic"), **mocks.of_type(":Acl")}
    for name, resource in kafka.items():
        password = resource.inputs["password"]
        assert isinstance(password, dict) and password.get(SECRET_SIG), f"{name}: password is not a secret"
        assert password["value"] == ("dr-pw-456" if resource.inputs["cluster"] == "dr" else "primary-pw-123")
    for resource in mocks.resources.values():
        pickled = resource.inputs["__provider"]
        assert isinstance(pickled, str), "the provider must not be a secret: it holds nothing secret"
        raw = base64.b64decode(pickled)
        assert len(raw) < 200 and b"mm2spec.provision." in raw  # a class reference, not code by value
        assert b"pw-" not in raw
        assert dill.loads(raw).__class__.__module__.startswith("mm2spec.provision.")
        assert dill.loads(raw).__dict__ == {}, "a provider holds nothing (no client, no secret)"
    spark = mocks.of_type(":Deployment")["spark-mirror"].inputs["content"]
    assert "pw-" not in json.dumps({n: {k: plain(v) for k, v in r.inputs.items() if k != "password"}
                                    for n, r in mocks.resources.items()}) and "pw-" not in spark


#: Providers as existing stacks hold them (``__provider`` in the state), pickled before the providers
#: shared ``mm2spec.provision.base``: they must keep loading as these classes.
RECORDED_PROVIDERS = {
    "mm2spec.provision.topic.TopicProvider":
        "gASVMAAAAAAAAACMF21tMnNwZWMucHJvdmlzaW9uLnRvcGljlIwNVG9waWNQcm92aWRlcpSTlCmBlC4=",
    "mm2spec.provision.acl.AclProvider":
        "gASVLAAAAAAAAACMFW1tMnNwZWMucHJvdmlzaW9uLmFjbJSMC0FjbFByb3ZpZGVylJOUKYGULg==",
    "mm2spec.provision.connector.ConnectorProvider":
        "gASVOAAAAAAAAACMG21tMnNwZWMucHJvdmlzaW9uLmNvbm5lY3RvcpSMEUNvbm5lY3RvclByb3ZpZGVylJOUKYGULg==",
    "mm2spec.provision.worker_config.WorkerConfigProvider":
        "gASVPwAAAAAAAACMH21tMnNwZWMucHJvdmlzaW9uLndvcmtlcl9jb25maWeUjBRXb3JrZXJDb25maWdQcm92aWRlcpSTlCmBlC4=",
    "mm2spec.provision.spark_deployment.SparkDeploymentProvider":
        "gASVRQAAAAAAAACMIm1tMnNwZWMucHJvdmlzaW9uLnNwYXJrX2RlcGxveW1lbnSUjBdTcGFya0RlcGxveW1lbnRQcm92aWRlcpSTlCmBlC4=",
}


@pytest.mark.parametrize("reference", sorted(RECORDED_PROVIDERS))
def test_providers_recorded_in_existing_stacks_still_load_and_pickle_the_same(reference):
    from pulumi.dynamic.dynamic import serialize_provider

    module, _, name = reference.rpartition(".")
    provider = dill.loads(base64.b64decode(RECORDED_PROVIDERS[reference]))
    assert (type(provider).__module__, type(provider).__name__) == (module, name)
    # The program pickles today's provider to the very same bytes: no diff, no rewrite of the state.
    assert serialize_provider(type(provider)()) == RECORDED_PROVIDERS[reference]


def test_spark_engine_writes_the_job_config_and_registers_no_connector(prod):
    mocks, declared = run(prod, {"primary": "p", "dr": "d"})
    assert not mocks.of_type(":Connector") and not mocks.of_type(":WorkerConfig")
    deployment = mocks.of_type(":Deployment")["spark-mirror"]
    assert deployment.typ == "pulumi-python:dynamic/spark:Deployment"
    assert deployment.inputs["path"] == ".mm2spec/out/prod/spark-mirror.json"
    assert deployment.inputs["root"] == str(ROOT)
    assert json.loads(deployment.inputs["content"]) == spark_job_config(prod)
    assert (deployment.inputs["run"], deployment.inputs["stateDir"]) == (False, ".mm2spec/spark/payments-dr")
    assert set(declared.of_kind("SparkDeployment")) == {"spark-mirror"} and not declared.of_kind("Connector")


def test_spark_deployment_diff_and_the_job_environment(monkeypatch):
    provider = spark_deployment.SparkDeploymentProvider()
    props = {"path": "out/spark-mirror.json", "root": "/r", "content": '{"a": "${env:DR_PW}"}', "run": False,
             "stateDir": ".mm2spec/spark/x"}
    assert provider.diff("id", {**props, "root": "/elsewhere"}, props).changes is False
    assert provider.diff("id", props, {**props, "run": True}).changes is True
    assert provider.diff("id", props, {**props, "content": "{}"}).changes is True
    assert provider.diff("id", props, {**props, "path": "x.json"}).replaces == ["path"]
    monkeypatch.setenv("DR_PW", "from-env")
    monkeypatch.delenv("OTHER", raising=False)
    assert spark_deployment.job_environment('{"a": "${env:DR_PW}", "b": "${env:OTHER}"}') == {"DR_PW": "from-env"}


def test_dev_has_no_acls_and_no_passwords():
    state = load_desired_state(EXAMPLE, "dev")
    mocks, _ = run(state, {"primary": None, "dr": None}, stack="dev", out_dir=".mm2spec/out/dev")
    assert not mocks.of_type(":Acl")
    orders = mocks.of_type(":Topic")["dr/orders"].inputs
    assert orders["connection"] == {"bootstrapServers": "127.0.0.1:29092", "securityProtocol": "PLAINTEXT"}
    assert "password" not in orders  # None inputs are not sent


def test_connect_engine_registers_the_worker_config_and_each_connector(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE.read_text().replace("engine: spark ", "engine: connect"))
    state = load_desired_state(spec, "staging")
    mocks, declared = run(state, {"primary": "pw-p", "dr": "pw-d"}, stack="staging", out_dir="out/staging")
    found = mocks.of_type(":Connector")
    assert sorted(found) == ["primary-to-dr-MirrorCheckpointConnector", "primary-to-dr-MirrorSourceConnector"]
    for rendered in connectors(state):
        inputs = found[rendered["name"]].inputs
        assert inputs["connectUrl"] == "http://connect.dr.internal:8083"
        assert inputs["config"] == rendered["config"]
    assert found["primary-to-dr-MirrorSourceConnector"].inputs["config"]["tasks.max"] == "8"
    worker = mocks.of_type(":WorkerConfig")["connect-worker"].inputs
    assert worker["path"] == "out/staging/connect-distributed.properties"
    assert "group.id=connect-mirrormaker-primary-to-dr" in worker["content"]
    assert "${env:DR_MM2_PASSWORD}" in worker["content"] and "pw-" not in worker["content"]
    assert not mocks.of_type(":Deployment")
    assert set(declared.of_kind("WorkerConfig")) == {"connect-worker"}
    assert sorted(declared.of_kind("Connector")) == sorted(found)


def test_connect_engine_without_rest_url_is_refused_before_anything_is_registered(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE.read_text().replace("engine: spark ", "engine: connect")
                    .replace("  restUrl: http://connect.dr.internal:8083\n", ""))
    state = load_desired_state(spec, "dev")
    with pytest.raises(Exception, match="set connect.restUrl"):
        run(state, {"primary": None, "dr": None}, stack="dev")


def test_missing_password_names_the_secret(prod):
    found = {"PRIMARY_MM2_PASSWORD": "x"}
    with pytest.raises(SecretMissing) as raised:
        program.resolve_passwords(prod, found.get)
    assert "DR_MM2_PASSWORD" in str(raised.value) and "pulumi config set --secret DR_MM2_PASSWORD" in str(raised.value)
    assert "PRIMARY" not in str(raised.value)


def run_main(config: dict, secret_keys=(), monkeypatch=None, stack="prod", sources=None, plugin: bool | None = False):
    """The program's ``main`` with this stack config; these tests look at the dynamic resources
    (``mm2spec:plugin: false``) unless ``plugin`` says otherwise (``None``: the config leaves it out)."""
    mocks = Recorder()
    set_mocks(mocks, project="mm2spec", stack=stack, preview=True)
    if plugin is not None:
        config = {"plugin": "true" if plugin else "false", **config}
    pulumi.runtime.set_all_config({f"mm2spec:{k}": v for k, v in config.items()}, [f"mm2spec:{k}" for k in secret_keys])
    result = {}
    thresholds = gc.get_threshold()

    @pulumi.runtime.test
    def body():
        result["declared"] = component.main(snapshot=lambda state, admin_for: sources or snapshot())

    try:
        body()
    finally:
        pulumi.runtime.set_all_config({}, [])
        mocks.gc_thresholds = gc.get_threshold()  # what the program set, for its test
        gc.set_threshold(*thresholds)  # the test process's own, back
    return mocks, result.get("declared")


def test_the_program_collects_garbage_less_often_than_python_by_default():
    """10,000 resources' Outputs live for the whole run: at Python's default thresholds the cyclic
    collector took a third of a no-op preview's program CPU (``base.fewer_collections``)."""
    mocks, _ = run_main({"spec": str(EXAMPLE), "environment": "prod", "DR_MM2_PASSWORD": "x",
                         "PRIMARY_MM2_PASSWORD": "y"})
    assert mocks.gc_thresholds == base.GC_THRESHOLDS
    assert mocks.gc_thresholds[0] > 10 * gc.get_threshold()[0]  # the young generation: Python's is 700


def test_the_plugin_serves_every_resource_unless_the_stack_opts_out():
    mocks, _ = run_main({"spec": str(EXAMPLE), "environment": "prod", "DR_MM2_PASSWORD": "x",
                         "PRIMARY_MM2_PASSWORD": "y"}, plugin=None)
    custom = {name: r.typ for name, r in mocks.resources.items() if r.typ != "pulumi:pulumi:Stack"
              and not r.typ.endswith(":DisasterRecovery")}
    assert custom and all(typ.startswith("mm2spec:index:") for typ in custom.values()), custom
    assert {typ.rpartition(":")[2] for typ in custom.values()} >= {"Topic", "AclBinding", "SparkDeployment"}
    opted_out, _ = run_main({"spec": str(EXAMPLE), "environment": "prod", "DR_MM2_PASSWORD": "x",
                             "PRIMARY_MM2_PASSWORD": "y"}, plugin=False)
    dynamic = {name: r.typ for name, r in opted_out.resources.items() if r.typ.startswith("pulumi-python:dynamic/")}
    # The same resources by name, either way.
    assert sorted(dynamic) == sorted(custom)


def test_main_reads_stack_config_and_secret_config_before_the_environment(monkeypatch):
    monkeypatch.setenv("PRIMARY_MM2_PASSWORD", "from-env")
    monkeypatch.delenv("DR_MM2_PASSWORD", raising=False)
    mocks, _ = run_main({"spec": str(EXAMPLE), "environment": "prod", "DR_MM2_PASSWORD": "from-config",
                         "PRIMARY_MM2_PASSWORD": "config-wins"}, secret_keys=("DR_MM2_PASSWORD", "PRIMARY_MM2_PASSWORD"))
    topics = mocks.of_type(":Topic")
    assert plain(topics["dr/orders"].inputs["password"]) == "from-config"
    assert plain(mocks.of_type(":Acl")["primary/User:mm2/TOPIC/LITERAL/orders"].inputs["password"]) == "config-wins"
    assert mocks.of_type(":Deployment")["spark-mirror"].inputs["path"] == ".mm2spec/out/prod/spark-mirror.json"

    mocks, _ = run_main({"spec": str(EXAMPLE), "environment": "prod", "DR_MM2_PASSWORD": "x"},
                        secret_keys=("DR_MM2_PASSWORD",))
    assert plain(mocks.of_type(":Acl")["primary/User:mm2/TOPIC/LITERAL/orders"].inputs["password"]) == "from-env"


def test_main_turns_an_invalid_spec_into_located_diagnostics(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("tasksMax: 30", "tasksMax: 0"))
    with pytest.raises(pulumi.RunError) as raised:
        run_main({"spec": str(bad), "environment": "prod"})
    message = str(raised.value)
    assert f"{bad}:" in message and "/mirrors/0/tasksMax" in message and "Traceback" not in message


def test_main_without_a_password_fails_naming_the_secret(monkeypatch):
    for name in PASSWORDS:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(pulumi.RunError, match="PRIMARY_MM2_PASSWORD.*DR_MM2_PASSWORD"):
        run_main({"spec": str(EXAMPLE), "environment": "prod"})


# ------------------------------------------------------------------------ providers: check and diff

def topic_props(**changes):
    options = {"replicationFactor": -1, "allowReplacement": changes.pop("allowReplacement", False),
               "kind": "mirror", "purpose": "p", "sourceTopic": "orders"}
    props = {"cluster": "dr", "connection": {"bootstrapServers": "127.0.0.1:9092", "securityProtocol": "PLAINTEXT"},
             "name": "orders", "partitions": 6, "configs": {"retention.ms": "1000"}, "options": options,
             "password": "old", "__provider": "x"}
    props.update(changes)
    return props


def test_topic_diff_is_the_shared_diff_without_network():
    provider = topic.TopicProvider()
    old = {**topic_props(), "adopted": False}
    assert provider.diff("id", old, topic_props()).changes is False
    # Pulumi hands numbers back as floats.
    floats = {**old, "partitions": 6.0, "options": {**old["options"], "replicationFactor": -1.0}}
    assert provider.diff("id", floats, topic_props()).changes is False
    assert provider.diff("id", old, topic_props(password="rotated")).changes is False
    grow = provider.diff("id", old, topic_props(partitions=8))
    assert grow.changes is True and not grow.replaces
    config = provider.diff("id", old, topic_props(configs={"retention.ms": "2000"}))
    assert config.changes is True and not config.replaces
    renamed = provider.diff("id", old, topic_props(name="orders2"))
    assert renamed.replaces == ["name"] and renamed.delete_before_replace
    shrink = provider.diff("id", old, topic_props(partitions=3, allowReplacement=True))
    assert shrink.replaces == ["partitions"] and shrink.delete_before_replace


def test_topic_check_refuses_a_partition_decrease_unless_replacement_is_allowed():
    provider = topic.TopicProvider()
    refused = provider.check(topic_props(), topic_props(partitions=3))
    assert [f.property for f in refused.failures] == ["partitions"]
    assert 'cluster "dr": topic orders has 6 partitions; Kafka cannot remove partitions' in refused.failures[0].reason
    assert "allowTopicReplacement: true" in refused.failures[0].reason
    assert not provider.check(topic_props(), topic_props(partitions=3, allowReplacement=True)).failures
    assert not provider.check({}, topic_props(partitions=3)).failures  # a create
    bad = provider.check({}, topic_props(name="no spaces", partitions=0))
    assert sorted(f.property for f in bad.failures) == ["name", "partitions"]


def acl_props(**changes):
    binding = {"principal": "User:mm2", "resourceType": "TOPIC", "patternType": "LITERAL",
               "permission": "ALLOW", "host": "*"}
    binding.update({k: changes.pop(k) for k in list(changes) if k in binding})
    props = {"cluster": "dr", "connection": {"bootstrapServers": "h:1"}, "binding": binding,
             "resources": {"orders": ["READ", "WRITE"]}, "reasons": ["r"], "password": "pw", "__provider": "x"}
    props.update(changes)
    return props


def test_acl_diff_updates_resources_in_place_and_replaces_identity():
    provider = acl.AclProvider()
    old = {**acl_props(), "preexisting": {}}
    assert provider.diff("id", old, acl_props()).changes is False
    assert provider.diff("id", old, acl_props(password="rotated")).changes is False
    assert provider.diff("id", old, acl_props(resources={"orders": ["READ"]})).changes is True
    grown = provider.diff("id", old, acl_props(resources={"orders": ["READ", "WRITE"], "new": ["READ"]}))
    assert grown.changes is True and not grown.replaces
    assert provider.diff("id", old, acl_props(patternType="PREFIXED")).replaces == ["binding"]
    assert [f.property for f in provider.check({}, acl_props(resourceType="USER")).failures] == ["binding"]
    assert not provider.check({}, acl_props()).failures
    assert [f.property for f in provider.check({}, acl_props(resources={"x": ["FLY"]})).failures] == ["resources"]
    assert [f.property for f in provider.check({}, acl_props(resources={})).failures] == ["resources"]


def test_connector_diff_uses_the_connector_config_diff():
    provider = connector.ConnectorProvider()
    props = {"connectUrl": "http://c:8083", "name": "a-MirrorSourceConnector",
             "config": {"connector.class": "X", "tasks.max": "2"}}
    assert provider.diff("id", {**props, "adopted": False}, props).changes is False
    assert provider.diff("id", props, {**props, "config": {"connector.class": "X", "tasks.max": "3"}}).changes is True
    moved = provider.diff("id", props, {**props, "connectUrl": "http://other:8083"})
    assert moved.replaces == ["connectUrl"] and moved.delete_before_replace
    assert [f.property for f in provider.check({}, {**props, "connectUrl": "c:8083"}).failures] == ["connectUrl"]


def test_rendered_file_is_written_atomically_and_only_removed_if_unchanged(tmp_path):
    provider: RenderedFileProvider = worker_config.WorkerConfigProvider()
    props = {"path": "out/w.properties", "root": str(tmp_path), "content": "a=1\n"}
    created = provider.create(props)
    path = tmp_path / "out" / "w.properties"
    assert created.id == str(path) and path.read_text() == "a=1\n"
    assert provider.diff(created.id, created.outs, {**props, "root": "/elsewhere"}).changes is False
    assert provider.diff(created.id, created.outs, {**props, "path": "x"}).replaces == ["path"]
    updated = provider.update(created.id, created.outs, {**props, "content": "a=2\n"}).outs
    assert path.read_text() == "a=2\n"
    path.write_text("edited by hand\n")
    provider.delete(created.id, updated)
    assert path.exists()
    path.write_text("a=2\n")
    provider.delete(created.id, updated)
    assert not path.exists()


class LingeringAdmin:
    """A fake admin client whose brokers keep listing a deleted topic for ``lookups`` more looks."""

    def __init__(self, lookups: int | None):
        self.lookups = lookups
        self.deleted: list[str] = []

    def delete_topics(self, names) -> None:
        self.deleted.extend(names)

    def topics(self, names, with_configs: bool = True) -> dict:
        if self.lookups == 0:
            return {}
        if self.lookups is not None:
            self.lookups -= 1
        return {n: LiveTopic(n, 6, 3, {}) for n in names}


def test_topic_delete_waits_until_the_brokers_no_longer_list_the_topic(monkeypatch):
    fake, naps = LingeringAdmin(lookups=2), []
    monkeypatch.setattr(connection, "admin", lambda props, prefer_current=False: fake)
    monkeypatch.setattr(topic.time, "sleep", naps.append)
    topic.TopicProvider().delete("dr/orders", {**topic_props(), "adopted": False})
    assert fake.deleted == ["orders"] and naps == [topic.TOPIC_DELETE_POLL] * 2


def test_topic_delete_fails_saying_what_to_do_when_the_topic_is_still_listed(monkeypatch):
    fake = LingeringAdmin(lookups=None)  # never gone
    monkeypatch.setattr(connection, "admin", lambda props, prefer_current=False: fake)
    monkeypatch.setattr(topic, "TOPIC_DELETE_WAIT", 0.0)
    with pytest.raises(ProvisionFailed) as raised:
        topic.TopicProvider().delete("dr/orders", {**topic_props(), "adopted": False})
    message = str(raised.value)
    assert fake.deleted == ["orders"]
    assert message.startswith('cluster "dr": topic orders was deleted, but the brokers still list it after 0 s')
    assert "brokers are up" in message and "run the command again" in message


class ExistingTopicAdmin:
    """A fake admin client on whose cluster the topic is already there, with these end offsets."""

    def __init__(self, end_offsets: list[int]):
        self.offsets = end_offsets

    def create_topic(self, name, partitions, replication_factor, configs, exist_ok=False) -> bool:
        assert exist_ok
        return False

    def create_topics(self, topics, exist_ok=False) -> set:
        return {t.topic for t in topics if self.create_topic(t.topic, t.num_partitions, t.replication_factor,
                                                              t.config, exist_ok)}

    def topics(self, names, with_configs: bool = True) -> dict:
        return {n: LiveTopic(n, len(self.offsets), 3, {"retention.ms": "1000"}) for n in names}

    def end_offsets(self, topic_name: str, partitions: int) -> list[int]:
        assert partitions == len(self.offsets)
        return self.offsets

    def grow_partitions(self, name: str, total: int) -> None:
        pass

    def alter_topic_configs(self, name, set_configs, delete=()) -> None:
        pass


@pytest.mark.parametrize(("end_offsets", "adopted"), [([0] * 6, False), ([0, 0, 7, 0, 0, 0], True)])
def test_an_existing_topic_is_adopted_only_when_it_held_records(monkeypatch, end_offsets, adopted):
    # Empty: what a pulumi up killed before Pulumi recorded its create leaves; destroy must delete it.
    monkeypatch.setattr(connection, "admin", lambda props, prefer_current=False: ExistingTopicAdmin(end_offsets))
    assert topic.TopicProvider().create(topic_props()).outs["adopted"] is adopted


def test_adopted_topics_and_connectors_are_left_in_place_on_delete(monkeypatch):
    def no_client(*_args, **_kwargs):
        raise AssertionError("an adopted resource must not be deleted")

    monkeypatch.setattr(connection, "admin", no_client)
    monkeypatch.setattr(connector, "ConnectClient", no_client)
    topic.TopicProvider().delete("dr/orders", {**topic_props(), "adopted": True})
    connector.ConnectorProvider().delete("c", {"connectUrl": "http://c:8083", "name": "n", "config": {},
                                               "adopted": True})


def test_delete_prefers_the_current_secret_over_the_recorded_one(monkeypatch):
    props = {"cluster": "dr", "connection": {"bootstrapServers": "127.0.0.1:1", "securityProtocol": "SASL_PLAINTEXT",
                                             "saslMechanism": "SCRAM-SHA-512", "username": "mm2",
                                             "passwordSecret": "DR_PW"}, "password": "old"}
    monkeypatch.setenv("DR_PW", "new")
    assert connection.admin(props, prefer_current=True) is connection.admin({**props, "password": "new"})
    assert connection.admin(props) is not connection.admin({**props, "password": "new"})


def test_every_wave_is_registered_and_the_outputs_list_everything(monkeypatch):
    names = [f"invoices-{i:04d}" for i in range(2 * program.WAVE + 50)]
    sources = {"primary": SourceSnapshot("primary", {n: LiveTopic(n, 1, 3, {}) for n in names}, ())}
    exported = {}
    monkeypatch.setattr(program.pulumi, "export", exported.__setitem__)
    monkeypatch.setenv("PRIMARY_MM2_PASSWORD", "x")
    monkeypatch.setenv("DR_MM2_PASSWORD", "y")
    mocks, declared = run_main({"spec": str(EXAMPLE), "environment": "prod"}, sources=sources)
    topics = mocks.of_type(":Topic")
    assert {f"dr/{n}" for n in names} <= set(topics) and set(topics) == set(declared.topics)
    assert exported["topics"] == sorted(topics)
    assert exported["aclResources"] == len(mocks.of_type(":Acl")) == len(declared.acl_groups)
    # The Spark deployment comes after the last wave, depending on every topic and ACL.
    assert "spark-mirror" in mocks.resources
    [resolution] = [r for r in exported["patternResolutions"] if r["pattern"] == "invoices-.*"]
    assert resolution["matched"] == names


def test_the_sdks_debug_messages_are_not_sent_unless_asked(monkeypatch):
    sent = []
    monkeypatch.setattr(pulumi.log, "debug", lambda msg, *args, **kwargs: sent.append(msg))
    monkeypatch.setenv(program.SDK_DEBUG_ENV, "1")
    program.skip_sdk_debug_messages()
    pulumi.log.debug("kept")
    monkeypatch.delenv(program.SDK_DEBUG_ENV)
    program.skip_sdk_debug_messages()
    pulumi.log.debug("dropped")
    assert sent == ["kept"]


CANCELLED_PROGRAM = """
import signal, sys, threading, concurrent.futures
from mm2spec.provision import program
if sys.argv[1] == "quiet":
    program.exit_quietly_when_cancelled()
else:  # Python's own handler (a child of a shell's background job inherits SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
release = threading.Event()
executor = concurrent.futures.ThreadPoolExecutor(1)
executor.submit(release.wait, 60)  # a registration the engine has not answered
try:
    print("waiting", flush=True)
    executor.shutdown(wait=True)  # where the SDK's launcher waits at the end of a run
finally:
    release.set()
"""


@pytest.mark.parametrize("mode", ["quiet", "default"])
def test_a_cancelled_program_ends_without_a_traceback(mode):
    """The language host sends SIGINT when the engine cancels the run (a resource failed): the
    program ends at once and prints nothing, where Python's default prints a KeyboardInterrupt
    traceback that the engine shows under the resource's error."""
    child = subprocess.Popen([sys.executable, "-c", CANCELLED_PROGRAM, mode], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "waiting\n"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    if mode == "quiet":
        assert (child.returncode, err) == (program.CANCELLED_EXIT, ""), err
    else:  # what the handler is for
        assert "KeyboardInterrupt" in err and child.returncode != 0

