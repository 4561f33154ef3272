"""``mm2spec plan`` against real KRaft clusters and a real Connect worker: drift shows, exit codes hold."""

from __future__ import annotations

import json
import textwrap

import pytest

from mm2spec.cli import main
from mm2spec.spec.load import load_desired_state
from mm2spec.live.connect import ConnectClient
from mm2spec.plan.desired import desired_resources, snapshot_sources
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.spec.model import AclBinding
from mm2spec.render import connectors, render_files, write_files
from specs import write_spec

pytestmark = pytest.mark.integration


def plan_json(spec, capsys) -> tuple[int, dict]:
    code = main(["plan", str(spec), "--format", "json", "--detailed-exitcode"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def apply_desired(spec):
    """Create what the plan wants with the admin wrapper (the Pulumi tests apply with `pulumi up`)."""
    state = load_desired_state(spec, None)
    admins = {c.alias: KafkaAdmin(c) for c in state.clusters}
    resources = desired_resources(state, snapshot_sources(state, admins.__getitem__))
    for topic in resources.topics:
        if topic.name not in admins[topic.cluster].topics(names=[topic.name]):
            admins[topic.cluster].create_topic(topic.name, topic.partitions, -1, dict(topic.configs))
    for alias, admin in admins.items():
        admin.create_acls([b for b in resources.acls if b.cluster == alias])
    return state, admins


def test_plan_lists_creates_then_is_empty_after_apply_and_shows_config_drift(kafka_pair, unique_name, tmp_path, capsys):
    orders, payments = unique_name("orders"), unique_name("payments")
    # engine connect without a REST URL: this test is about the clusters, not the data pipeline
    source = KafkaAdmin(load_desired_state(write_spec(tmp_path / "s.yaml", kafka_pair, [orders], engine="connect"),
                                           None).cluster("primary"))
    source.create_topic(orders, 3, -1, {"retention.ms": "3600000"})
    source.create_topic(payments, 2, -1, {})
    spec = write_spec(tmp_path / "s.yaml", kafka_pair, [orders, payments], engine="connect")

    code, plan = plan_json(spec, capsys)
    assert code == 2
    creates = {c["name"] for c in plan["changes"] if c["action"] == "create" and c["kind"] == "topic"}
    assert {orders, payments} <= creates
    # Another test's MM2 connector (alias primary, same session clusters) may have created it already.
    syncs = "mm2-offset-syncs.primary.internal"
    dr_admin = KafkaAdmin(load_desired_state(spec, None).cluster("dr"))
    assert syncs in creates or syncs in dr_admin.topics(names=[syncs], with_configs=False)
    assert plan["clusters"][1]["defaultReplicationFactor"] == 1
    # The version guardrails read the brokers (Kafka 4.3.1: metadata.version 4.3) and pass.
    assert [c["version"] for c in plan["clusters"]] == ["4.3, metadata.version level 30"] * 2

    state, admins = apply_desired(spec)
    code, plan = plan_json(spec, capsys)
    assert (code, [(c["name"], c["action"], c["fields"]) for c in plan["changes"]]) == (0, []), json.dumps(plan["changes"])

    # the same spec on engine spark, with no mirroring job running: the deployment is missing
    spark_spec = write_spec(tmp_path / "spark.yaml", kafka_pair, [orders, payments], engine="spark")
    code, plan = plan_json(spark_spec, capsys)
    assert code == 2
    assert [(c["kind"], c["action"]) for c in plan["changes"]] == [("spark-deployment", "create")]

    # a change behind the tool's back: the target topic's retention is altered
    admins["dr"].alter_topic_configs(orders, {"retention.ms": "60000"})
    code, plan = plan_json(spec, capsys)
    assert code == 2
    [change] = plan["changes"]
    assert (change["name"], change["action"]) == (orders, "update")
    assert change["fields"] == [{"field": "config.retention.ms", "old": "60000", "new": "3600000"}]

    # partitions added on the source: the target grows; on the target only: refused, exit 1
    source.grow_partitions(payments, 4)
    code, plan = plan_json(spec, capsys)
    grow = [c for c in plan["changes"] if c["name"] == payments][0]
    assert grow["action"] == "update" and grow["fields"][0] == {"field": "partitions", "old": 2, "new": 4}
    admins["dr"].grow_partitions(payments, 6)
    code, plan = plan_json(spec, capsys)
    assert code == 1
    assert [c["action"] for c in plan["changes"] if c["name"] == payments] == ["refused"]


def test_plan_shows_a_removed_acl_on_secured_clusters(secure_kafka_pair, unique_name, tmp_path, capsys, monkeypatch):
    from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD

    monkeypatch.setenv("IT_ADMIN_PASSWORD", ADMIN_PASSWORD)
    monkeypatch.setenv("IT_MM2_PASSWORD", MM2_PASSWORD)
    topic = unique_name("acl")
    spec = write_spec(tmp_path / "s.yaml", secure_kafka_pair, [topic], groups=[unique_name("g")], secure=True, engine="connect",
                      manage_acls=True)
    state = load_desired_state(spec, None)
    KafkaAdmin(state.cluster("primary")).create_topic(topic, 1, -1, {})
    state, admins = apply_desired(spec)
    code, plan = plan_json(spec, capsys)
    assert (code, plan["changes"]) == (0, [])

    removed = AclBinding("primary", "User:mm2", "TOPIC", topic, "LITERAL", "READ")
    admins["primary"].delete_acls([removed])
    extra = AclBinding("dr", "User:mm2", "TOPIC", "not-in-the-spec", "LITERAL", "WRITE")
    admins["dr"].create_acls([extra])
    code, plan = plan_json(spec, capsys)
    assert code == 2
    acl_changes = {(c["scope"], c["action"], c["name"]) for c in plan["changes"]}
    assert acl_changes == {("primary", "create", f"ALLOW User:mm2 READ TOPIC LITERAL {topic}"),
                           ("dr", "delete", "ALLOW User:mm2 WRITE TOPIC LITERAL not-in-the-spec")}
    text = main(["plan", str(spec)]), capsys.readouterr().out
    assert ADMIN_PASSWORD not in text[1] and MM2_PASSWORD not in text[1]
    admins["dr"].delete_acls([extra])


def test_plan_shows_an_edited_connector(kafka_pair, connect_worker, unique_name, tmp_path, capsys):
    topic = unique_name("conn")
    probe = write_spec(tmp_path / "s.yaml", kafka_pair, [topic], engine="connect", rest_url="http://127.0.0.1:1")
    state = load_desired_state(probe, None)
    rendered = tmp_path / "rendered"
    write_files(render_files(state), rendered)
    worker = connect_worker(rendered / "connect-distributed.properties",
                            overrides={"listeners": "http://127.0.0.1:0"})
    spec = write_spec(tmp_path / "s.yaml", kafka_pair, [topic], engine="connect", rest_url=worker.url)
    state = load_desired_state(spec, None)
    client = ConnectClient(worker.url)
    for connector in connectors(state):
        client.put_connector_config(connector["name"], connector["config"])
    code, plan = plan_json(spec, capsys)
    assert not [c for c in plan["changes"] if c["kind"] == "connector"]
    assert plan["connectVersion"] == "4.3.1", "the worker's GET /; every version rule passes (code 0 or 2)"

    edited = dict(connectors(state)[0]["config"], **{"tasks.max": "3"})
    client.put_connector_config(connectors(state)[0]["name"], edited)
    code, plan = plan_json(spec, capsys)
    assert code == 2
    [change] = [c for c in plan["changes"] if c["kind"] == "connector"]
    assert change["action"] == "update" and change["fields"] == [{"field": "tasks.max", "old": "3", "new": "1"}]
    client.delete_connector(connectors(state)[0]["name"])


def test_unreachable_cluster_is_a_clear_error(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text(textwrap.dedent("""\
        apiVersion: mm2spec/v1
        kind: DisasterRecovery
        metadata: {name: it-plan}
        clusters:
          primary: {bootstrapServers: ["127.0.0.1:1"]}
          dr: {bootstrapServers: ["127.0.0.1:2"]}
        mirrors: [{source: primary, target: dr, topics: [orders]}]
        """))
    assert main(["plan", str(spec), "--timeout", "3"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith('error: cluster "primary" (127.0.0.1:1) is unreachable')
    assert "Traceback" not in captured.err
