"""The plan as data and its three renderings, on a fake cluster (no network): golden files.

The fake stands in for ``KafkaAdmin`` with the same methods; the real one is exercised by
tests/integration/test_plan.py on live clusters.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mm2spec.spec.compile import compile_spec
from mm2spec.spec.document import parse
from mm2spec.live.kafka import BrokerVersion
from mm2spec.live.types import LiveTopic
from mm2spec.spec.model import AclBinding
from mm2spec.engines.connect import ConnectEngine
from mm2spec.engines.spark import deployment_changes
from mm2spec.plan.build import build_plan
from mm2spec.plan.formats import mask, to_json, to_markdown, to_text
from mm2spec.spec.validate import resolve, validate

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "plan"


def NO_FAILOVER(_state):
    """No flow is failed over (the real default reads each DR cluster)."""
    return {}


KAFKA_4_3 = BrokerVersion((4, 3), "4.3, metadata.version level 30")


class FakeAdmin:
    """Answers like KafkaAdmin from in-memory topics, groups and ACLs."""

    def __init__(self, topics=None, groups=(), acls=(), authorizer=True, default_rf=3, version=KAFKA_4_3):
        self._topics, self._groups, self._acls = dict(topics or {}), list(groups), set(acls)
        self._authorizer, self._rf, self._version = authorizer, default_rf, version
        self.calls: list[str] = []
        self.config_reads: list[list[str]] = []

    def ping(self):
        self.calls.append("ping")

    def topics(self, names=None, with_configs=True, include_internal=False):
        self.calls.append("topics")
        return {n: (t if with_configs else LiveTopic(n, t.partitions, t.replication_factor, {}))
                for n, t in self._topics.items() if names is None or n in names}

    def topic_configs(self, names):
        self.calls.append("topic_configs")
        self.config_reads.append(sorted(names))
        return {n: dict(self._topics[n].configs) for n in names if n in self._topics}

    def groups(self):
        return list(self._groups)

    def acls(self, principal):
        self.calls.append("acls")
        return {a for a in self._acls if a.principal == principal}

    def authorizer_enabled(self):
        return self._authorizer

    def default_replication_factor(self):
        return self._rf

    def broker_version(self):
        return self._version


class FakeConnect:
    def __init__(self, configs):
        self.configs = configs

    def connector_configs(self):
        return self.configs


def t(name, partitions, configs=None):
    return LiveTopic(name, partitions, 3, configs or {})


def scenario():
    """prod of the contract example with: a new topic, a config drift, a partition decrease refused
    (orders), an ACL missing and an extra one, a connector edited behind the tool's back."""
    spec = (ROOT / "examples/dr-spec.example.yaml").read_text().replace("engine: spark", "engine: connect")
    root = parse(spec, "payments-dr.yaml")
    assert not validate(root, "prod")
    state = compile_spec(resolve(root, "prod"), "prod", "payments-dr.yaml")
    primary = FakeAdmin({"orders": t("orders", 3), "payments": t("payments", 6, {"retention.ms": "604800000"}),
                         "invoices-2026": t("invoices-2026", 2), "audit": t("audit", 1),
                         "scratch": t("scratch", 1, {"retention.ms": "1000"})},
                        groups=["orders-service", "billing-eu"])
    have = [b for b in state.acl_bindings if not (b.resource_name == "payments" and b.operation == "READ")]
    dr_topics = {i.name: t(i.name, i.partitions, dict(i.configs)) for i in state.internal_topics}
    dr_topics.update({"orders": t("orders", 6), "payments": t("payments", 6, {"retention.ms": "86400000"})})
    extra = AclBinding("dr", "User:mm2", "TOPIC", "legacy", "LITERAL", "WRITE")
    dr = FakeAdmin(dr_topics, acls=[b for b in have if b.cluster == "dr"] + [extra])
    primary._acls = {b for b in have if b.cluster == "primary"}
    from mm2spec.render import connectors

    live = {c["name"]: dict(c["config"]) for c in connectors(state)}
    live["primary-to-dr-MirrorSourceConnector"]["tasks.max"] = "4"
    live["primary-to-dr-MirrorSourceConnector"]["source.cluster.sasl.jaas.config"] = (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="leaked-pw";')
    admins = {"primary": primary, "dr": dr}
    plan = build_plan(state, lambda alias: admins[alias], deployment=ConnectEngine(state, client=FakeConnect(live)).plan_changes,
                      failover_states=NO_FAILOVER, worker_version=lambda: "4.3.1")
    return plan, admins


@pytest.fixture(scope="module")
def plan():
    return scenario()[0]


def test_plan_finds_every_kind_of_change(plan):
    by_name = {(c.scope, c.kind, c.name): c for c in plan.changes}
    assert by_name[("dr", "topic", "invoices-2026")].action == "create"
    assert by_name[("dr", "topic", "orders")].action == "refused"
    payments = by_name[("dr", "topic", "payments")]
    assert payments.action == "update" and payments.changes[0].old == "86400000"
    acl_actions = {(c.name, c.action) for c in plan.changes if c.kind == "acl"}
    assert ("ALLOW User:mm2 READ TOPIC LITERAL payments", "create") in acl_actions
    assert ("ALLOW User:mm2 WRITE TOPIC LITERAL legacy", "delete") in acl_actions
    connector = by_name[("connect", "connector", "primary-to-dr-MirrorSourceConnector")]
    assert connector.action == "update"
    assert {f.field for f in connector.changes} == {"tasks.max", "source.cluster.sasl.jaas.config"}
    assert by_name[("primary", "topic", "mm2spec-probe-primary-to-dr")].action == "create"
    assert plan.summary() == {"create": 4, "update": 2, "replace": 0, "delete": 1, "refused": 1}


def test_admin_calls_are_batched_not_per_topic():
    _, admins = scenario()
    # one metadata listing for the source snapshot and one for the desired topics (the source holds
    # the flow's probe topic); never per topic
    assert admins["dr"].calls.count("topics") == 1 and admins["primary"].calls.count("topics") == 2
    assert admins["dr"].calls.count("acls") == 1


def test_source_configs_are_read_only_for_topics_a_flow_mirrors():
    _, admins = scenario()
    # the listing carries no configs; one DescribeConfigs names exactly the mirrored topics ("scratch"
    # matches no pattern: on a big cluster, describing every topic was most of a plan's time)
    assert admins["primary"].config_reads == [["invoices-2026", "orders", "payments"]]


def test_secrets_are_masked_in_every_format(plan):
    for text in (to_text(plan), to_markdown(plan), to_json(plan)):
        assert "leaked-pw" not in text
        assert "${env:PRIMARY_MM2_PASSWORD}" in text  # a reference names the secret, it may show


def test_mask():
    assert mask("sasl.jaas.config", 'x required password="p";') == 'x required password="(sensitive)";'
    assert mask("sasl.jaas.config", 'x password="p";') == "(sensitive)"  # not JAAS: hidden whole
    assert mask("ssl.truststore.password", "changeit") == "(sensitive)"
    assert mask("ssl.truststore.password", "${env:TS}") == "${env:TS}"
    assert mask("tasks.max", "4") == "4"


def test_json_plan_matches_its_schema(plan):
    schema = json.loads((ROOT / "schemas/plan.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(to_json(plan)), schema)


@pytest.mark.parametrize("fmt,render", [("txt", to_text), ("md", to_markdown), ("json", to_json)])
def test_plan_formats_match_golden(plan, fmt, render, update_golden):
    golden = GOLDEN / f"scenario.{fmt}"
    text = render(plan)
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    expected = golden.read_text()
    if fmt == "json":
        assert json.loads(text) == json.loads(expected)
    else:
        assert text == expected


def test_coloured_text_only_on_request(plan):
    assert "\033[" not in to_text(plan)
    assert "\033[32m" in to_text(plan, colour=True)


def test_spark_deployment_drift():
    root = parse((ROOT / "examples/dr-spec.example.yaml").read_text(), "payments-dr.yaml")
    state = compile_spec(resolve(root, "dev"), "dev", "payments-dr.yaml")
    admins = {"primary": FakeAdmin(authorizer=False), "dr": FakeAdmin(authorizer=False)}

    def spark_changes(deployed):
        plan = build_plan(state, admins.__getitem__, failover_states=NO_FAILOVER,
                          deployment=lambda stopped: (deployment_changes(state, deployed, stopped), []))
        return [c for c in plan.changes if c.kind == "spark-deployment"]

    from mm2spec.render import spark_job_config

    [absent] = spark_changes(None)
    assert absent.action == "create" and "not running" in absent.detail
    assert spark_changes(json.loads(json.dumps(spark_job_config(state))))[0].action == "no-op"
    # a running job holds its checkpoint location anchored at the project root: the same thing
    anchored = spark_job_config(state)
    anchored["spark"] = {**anchored["spark"], "checkpoint.location": str(Path.cwd() / ".mm2spec/checkpoints/payments-dr")}
    assert spark_changes(anchored)[0].action == "no-op"
    edited = spark_job_config(state)
    edited["flows"][0]["offset.lag.max"] = "500"
    [drift] = spark_changes(edited)
    assert drift.action == "update"
    assert [(f.field, f.old, f.new) for f in drift.changes] == [("flows.primary-to-dr.offset.lag.max", "500", "100")]


def test_a_failed_over_flow_keeps_its_mirror_stopped_and_says_so():
    from mm2spec.live.types import FailoverState

    root = parse((ROOT / "examples/dr-spec.example.yaml").read_text(), "payments-dr.yaml")
    state = compile_spec(resolve(root, "dev"), "dev", "payments-dr.yaml")
    admins = {"primary": FakeAdmin(authorizer=False), "dr": FakeAdmin(authorizer=False)}
    failed = FailoverState("primary-to-dr", "failed-over", "planned", "primary", "dr", 1_700_000_000_000, 1_700_000_005_000)
    plan = build_plan(state, admins.__getitem__, deployment=lambda stopped: (deployment_changes(state, None, stopped), []),
                      failover_states=lambda _state: {"primary-to-dr": failed})
    [spark] = [c for c in plan.changes if c.kind == "spark-deployment"]
    assert spark.action == "no-op" and "failover" in spark.detail
    assert any("failed over to dr at 2023-11-14 22:13:20 UTC" in n and "failback" in n for n in plan.notes)
    assert "failed over" in to_text(plan)


def test_plan_command_waits_as_long_as_the_admin_client_by_default():
    import inspect

    from mm2spec.cli import build_parser
    from mm2spec.live.kafka import KafkaAdmin

    args = build_parser().parse_args(["plan", "spec.yaml"])
    assert args.timeout == inspect.signature(KafkaAdmin).parameters["timeout"].default
