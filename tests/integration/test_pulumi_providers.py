"""The dynamic providers' methods against the real dev clusters and a real Connect worker.

Called directly, as Pulumi's provider host calls them (inputs as the program builds them, outputs
fed back as the recorded state), so each create / update / delete is checked on the live cluster.
"""

from __future__ import annotations

import time
import uuid

import pytest
import yaml

from mm2spec.spec.load import load_desired_state
from mm2spec.live.connect import ConnectClient
from mm2spec.plan.desired import TopicSpec
from mm2spec.dev import ADMIN_PASSWORD
from tests.kit.ledger import SequencedProducer
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.spec.model import AclBinding, Cluster, Security
from mm2spec.provision import connection
from mm2spec.provision.acl import AclGroup, AclProvider, acl_inputs
from mm2spec.errors import ProvisionFailed
from mm2spec.provision.connection import connection_inputs
from mm2spec.provision.connector import ConnectorProvider, connector_inputs
from mm2spec.provision.topic import TopicProvider, topic_inputs
from mm2spec.render import connectors
from specs import spec_for, write_spec

pytestmark = pytest.mark.integration


def plain_cluster(broker, alias="dr") -> Cluster:
    return Cluster(alias, (broker.bootstrap,))


def admin_cluster(broker, alias="dr") -> Cluster:
    return Cluster(alias, (broker.bootstrap,), Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "IT_ADMIN_PASSWORD"))


def topic_props(cluster: Cluster, name: str, partitions: int, configs: dict, allow=False, password=None) -> dict:
    spec = TopicSpec(cluster.alias, name, partitions, tuple(sorted(configs.items())), "test", "mirror",
                     allow_replacement=allow, source_topic=name)
    return topic_inputs(spec, connection_inputs(cluster, password))


def eventually(check, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_topic_create_update_delete(kafka_pair, unique_name):
    cluster, provider = plain_cluster(kafka_pair.dr), TopicProvider()
    admin = KafkaAdmin(cluster)
    name = unique_name("topic")
    props = topic_props(cluster, name, 2, {"retention.ms": "3600000", "cleanup.policy": "compact"})

    created = provider.create(props)
    assert created.id == f"dr/{name}" and created.outs["adopted"] is False
    live = admin.topics([name])[name]
    assert (live.partitions, dict(live.configs)) == (2, {"retention.ms": "3600000", "cleanup.policy": "compact"})

    # Partitions grow, a config changes, one the spec no longer sets goes back to the default.
    news = topic_props(cluster, name, 5, {"retention.ms": "7200000"})
    assert provider.diff(created.id, created.outs, news).changes is True
    updated = provider.update(created.id, created.outs, news).outs
    # Brokers apply an altered config from the metadata log: it shows a moment later.
    eventually(lambda: (lambda t: (t.partitions, dict(t.configs)))(admin.topics([name])[name])
               == (5, {"retention.ms": "7200000"}),
               "the new partition count and configs")
    assert provider.diff(created.id, updated, news).changes is False

    # The live topic has more partitions than the spec (grown by hand): update refuses, touching nothing.
    admin.grow_partitions(name, 6)
    with pytest.raises(ProvisionFailed, match=f"topic {name} exists with 6 partitions.*allowTopicReplacement"):
        provider.update(created.id, updated, topic_props(cluster, name, 5, {"retention.ms": "1000"}))
    assert admin.topics([name])[name].configs == {"retention.ms": "7200000"}

    # Replacement is delete then create of the same name: delete waits until the name is free.
    provider.delete(created.id, updated)
    assert name not in admin.topics([name], with_configs=False)
    again = provider.create(topic_props(cluster, name, 1, {}))
    assert again.outs["adopted"] is False and admin.topics([name])[name].partitions == 1
    provider.delete(again.id, again.outs)


def test_topic_that_exists_empty_is_the_stacks_and_delete_removes_it(kafka_pair, unique_name):
    # What a pulumi up killed after CreateTopics, before Pulumi recorded the create, leaves behind.
    cluster, provider = plain_cluster(kafka_pair.dr), TopicProvider()
    admin = KafkaAdmin(cluster)
    name = unique_name("killed")
    admin.create_topic(name, 2, -1, {})
    created = provider.create(topic_props(cluster, name, 2, {}))
    assert created.outs["adopted"] is False
    provider.delete(created.id, created.outs)
    assert name not in admin.topics([name], with_configs=False)


def test_topic_that_exists_with_records_is_adopted_and_survives_delete(kafka_pair, unique_name):
    cluster, provider = plain_cluster(kafka_pair.dr), TopicProvider()
    admin = KafkaAdmin(cluster)
    name = unique_name("adopt")
    admin.create_topic(name, 1, -1, {"retention.ms": "60000", "segment.ms": "600000"})
    SequencedProducer(kafka_pair.client_config("dr"), name, 1, limit=1).start().wait()

    created = provider.create(topic_props(cluster, name, 3, {"retention.ms": "120000"}))
    assert created.outs["adopted"] is True
    eventually(lambda: (lambda t: (t.partitions, dict(t.configs)))(admin.topics([name])[name]) == (3, {"retention.ms": "120000"}),
               "the adopted topic brought to the spec")
    provider.delete(created.id, created.outs)
    assert name in admin.topics([name], with_configs=False)

    # Deleted behind the stack's back: an update creates it again.
    admin.delete_topic(name)
    eventually(lambda: name not in admin.topics([name], with_configs=False), f"{name} deleted")
    provider.update(created.id, created.outs, topic_props(cluster, name, 3, {"retention.ms": "120000"}))
    assert admin.topics([name])[name].partitions == 3
    admin.delete_topic(name)


def test_topic_on_a_secured_cluster_with_the_password_as_input(secure_kafka_pair, unique_name):
    cluster, provider = admin_cluster(secure_kafka_pair.dr), TopicProvider()
    name = unique_name("sasl")
    created = provider.create(topic_props(cluster, name, 1, {}, password=ADMIN_PASSWORD))
    admin = KafkaAdmin(cluster, secrets=lambda _n: ADMIN_PASSWORD)
    assert name in admin.topics([name], with_configs=False)
    provider.delete(created.id, created.outs)
    assert name not in admin.topics([name], with_configs=False)


def test_acl_create_update_delete_keeps_preexisting_bindings(secure_kafka_pair, unique_name):
    cluster, provider = admin_cluster(secure_kafka_pair.dr), AclProvider()
    admin = KafkaAdmin(cluster, secrets=lambda _n: ADMIN_PASSWORD)
    principal = f"User:{unique_name('p')}"
    a, b, c = unique_name("a"), unique_name("b"), unique_name("c")
    before = AclBinding("dr", principal, "TOPIC", a, "LITERAL", "READ")
    admin.create_acls([before])  # there before the stack

    def group(resources):
        return AclGroup("g", "dr", principal, "TOPIC", "LITERAL", "ALLOW", "*",
                        tuple((n, tuple(sorted(ops))) for n, ops in sorted(resources.items())), ("test",))

    def props(resources):
        return acl_inputs(group(resources), connection_inputs(cluster, ADMIN_PASSWORD))

    def live():
        return {(x.resource_name, x.operation) for x in admin.acls(principal)}

    created = provider.create(props({a: ["READ", "WRITE"], b: ["DESCRIBE"]}))
    assert created.outs["preexisting"] == {a: ["READ"]}
    assert live() == {(a, "READ"), (a, "WRITE"), (b, "DESCRIBE")}

    news = props({a: ["WRITE"], c: ["READ", "DESCRIBE"]})
    assert provider.diff(created.id, created.outs, news).changes is True
    updated = provider.update(created.id, created.outs, news).outs
    # b's binding was the stack's: removed; a READ was there before: kept although no longer wanted.
    assert live() == {(a, "READ"), (a, "WRITE"), (c, "READ"), (c, "DESCRIBE")}
    assert updated["preexisting"] == {}

    provider.delete(created.id, updated)
    assert live() == {(a, "READ")}
    admin.delete_acls([before])


def test_connector_create_update_delete_on_a_real_worker(kafka_pair, connect_worker, unique_name, tmp_path):
    worker = connect_worker()
    flow = unique_name("flow")
    spec = write_spec(tmp_path / "s.yaml", kafka_pair, [unique_name("t")], engine="connect", rest_url=worker.url,
                      mirror={"name": flow})
    source = next(c for c in connectors(load_desired_state(spec, None)) if c["name"].endswith("SourceConnector"))
    provider, client = ConnectorProvider(), ConnectClient(worker.url)

    created = provider.create(connector_inputs(worker.url, source))
    assert created.outs["adopted"] is False
    assert {k: v for k, v in client.connector_config(source["name"]).items() if k != "name"} == source["config"]

    news = connector_inputs(worker.url, {**source, "config": {**source["config"], "tasks.max": "2"}})
    assert provider.diff(created.id, created.outs, news).changes is True
    updated = provider.update(created.id, created.outs, news).outs
    assert client.connector_config(source["name"])["tasks.max"] == "2"
    assert provider.diff(created.id, updated, news).changes is False

    provider.delete(created.id, updated)
    assert client.connector_config(source["name"]) is None

    # Registered before the stack: taken over, and left registered on delete.
    client.put_connector_config(source["name"], source["config"])
    adopted = provider.create(connector_inputs(worker.url, source, ready_timeout=0))  # no wait: not about health
    assert adopted.outs["adopted"] is True
    provider.delete(adopted.id, adopted.outs)
    assert client.connector_config(source["name"]) is not None
    client.delete_connector(source["name"])


def test_delete_uses_the_current_secret_when_the_recorded_one_is_stale(secure_kafka_pair, unique_name, monkeypatch):
    cluster, provider = admin_cluster(secure_kafka_pair.dr), TopicProvider()
    name = unique_name("rotated")
    created = provider.create(topic_props(cluster, name, 1, {}, password=ADMIN_PASSWORD))
    stale = {**created.outs, connection.PASSWORD: "rotated-away"}
    monkeypatch.setenv("IT_ADMIN_PASSWORD", ADMIN_PASSWORD)
    provider.delete(created.id, stale)
    admin = KafkaAdmin(cluster, secrets=lambda _n: ADMIN_PASSWORD)
    assert name not in admin.topics([name], with_configs=False)


def test_spark_deployment_runs_and_stops_the_mirroring_job(kafka_pair, unique_name, tmp_path):
    from conftest import missing_component
    from mm2spec.runtime import deployment as mirror
    from mm2spec.components import components
    from mm2spec.errors import ComponentMissing
    from mm2spec.provision.spark_deployment import SparkDeploymentProvider, spark_deployment_inputs

    try:
        _ = components().spark_kafka_jars  # raises ComponentMissing when the jars are not installed
    except ComponentMissing as exc:
        missing_component(exc)
    topic = unique_name("spark")
    for broker in (kafka_pair.primary, kafka_pair.dr):
        KafkaAdmin(plain_cluster(broker)).create_topic(topic, 1, -1, {})
    data = spec_for(kafka_pair, [topic], name=f"job-{uuid.uuid4().hex[:8]}")
    data["spark"] |= {"master": "local[1]", "checkpointLocation": "checkpoints"}
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    state = load_desired_state(spec, None)
    props = spark_deployment_inputs(state, "out", str(tmp_path), run=True, state_dir="job")
    provider = SparkDeploymentProvider()

    created = provider.create(props)  # returns once the job's first micro-batch ran
    try:
        assert created.outs["pid"] and mirror.status(tmp_path / "job").running
        assert (tmp_path / "checkpoints").is_dir(), "a relative checkpoint location is taken from the project root"
        assert (tmp_path / "out" / "spark-mirror.json").is_file()
    finally:
        provider.delete(created.id, created.outs)
    assert not mirror.status(tmp_path / "job").running
    assert not (tmp_path / "out" / "spark-mirror.json").exists()


def test_acls_on_a_cluster_without_authorizer_say_what_to_do(kafka_pair, unique_name):
    cluster = plain_cluster(kafka_pair.dr)
    group = AclGroup("g", "dr", "User:mm2", "TOPIC", "LITERAL", "ALLOW", "*", ((unique_name("t"), ("READ",)),), ())
    with pytest.raises(ProvisionFailed, match='cluster "dr" has no authorizer.*acls.manage: false'):
        AclProvider().create(acl_inputs(group, connection_inputs(cluster, None)))
