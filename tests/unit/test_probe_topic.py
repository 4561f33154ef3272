"""Every flow's probe topic (``mm2spec.mm2.policy.probe_topic``): named by one rule, mirrored by both
engines whatever the flow's patterns, provisioned with the internal topics, granted, refused by
validation when the mirror could never carry it, and the drill's default."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from mm2spec.cli import main
from mm2spec.mm2 import policy, selection
from mm2spec.ops.drill.drill import DrillSettings, plan_drill
from mm2spec.ops.playbooks.context import Options
from mm2spec.render import render_files
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "spark"))

from mm2spark.config import parse_job_config  # noqa: E402
from mm2spark.topics import subscribe_pattern  # noqa: E402

SEED = ROOT / "examples" / "redhat-dr-a-to-b.yaml"
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
SOURCE_OPS = {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}
TARGET_OPS = {"CREATE", "DESCRIBE", "WRITE", "ALTER", "ALTER_CONFIGS", "READ"}


def _spec(tmp_path: Path, **flow) -> Path:
    """The example with its first flow changed (its environments kept)."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["mirrors"][0].update(flow)
    path = tmp_path / "flow.dr.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_one_rule_names_it_and_no_rule_of_mm2_excludes_it():
    name = policy.probe_topic("primary-to-dr")
    assert name == "mm2spec-probe-primary-to-dr"
    never = selection.never_replicated(identity=False, target_alias="dr") + selection.TOPICS_EXCLUDE_DEFAULT
    assert not any(re.fullmatch(p, name) for p in never)
    # a flow name with dots is still one literal name, never a pattern matching others
    assert selection.literal_pattern("mm2spec-probe-a.b") == r"mm2spec-probe-a\.b"
    assert selection.with_probe(["orders"], "p.q") == ("orders", r"p\.q")
    assert selection.with_probe([r"p\.q"], "p.q") == (r"p\.q",), "never twice"


@pytest.mark.parametrize("policy_kind, copy", [("identity", "mm2spec-probe-primary-to-dr"),
                                               ("default", "primary.mm2spec-probe-primary-to-dr")])
def test_a_flow_of_literal_topics_mirrors_its_probe_with_either_policy(tmp_path, policy_kind, copy):
    state = load_desired_state(_spec(tmp_path, topics=["ledger-entries"], replicationPolicy=policy_kind), "dev")
    flow = state.mirrors[0]
    assert flow.mirrored_topics(["ledger-entries", "mm2spec-probe-primary-to-dr", "other"]) == [
        "ledger-entries", "mm2spec-probe-primary-to-dr"]
    assert flow.target_topic(flow.probe_topic) == copy
    # Connect: the connectors' topics list; Spark: the job's subscription built from its config
    files = render_files(state)
    connector = json.loads(files["primary-to-dr-MirrorSourceConnector.json"])["config"]
    assert connector["topics"] == "ledger-entries,mm2spec-probe-primary-to-dr"
    job = parse_job_config(json.loads(files["spark-mirror.json"]), {"PRIMARY_MM2_PASSWORD": "x", "DR_MM2_PASSWORD": "y"})
    pattern = subscribe_pattern(job.flows[0])
    assert re.search(pattern, "mm2spec-probe-primary-to-dr") and re.search(pattern, "ledger-entries")
    assert not re.search(pattern, "other")


def test_it_is_provisioned_with_the_internal_topics_and_granted(tmp_path):
    state = load_desired_state(_spec(tmp_path, topics=["ledger-entries"], replicationPolicy="default"), "dev")
    [probe] = [t for t in state.internal_topics if t.name == "mm2spec-probe-primary-to-dr"]
    assert (probe.cluster, probe.partitions, probe.configs) == ("primary", policy.PROBE_TOPIC_PARTITIONS, ())
    granted = {(b.cluster, b.resource_name, b.pattern_type, b.operation) for b in state.acl_bindings
               if b.resource_type == "TOPIC"}
    for op in SOURCE_OPS:
        assert ("primary", "mm2spec-probe-primary-to-dr", "LITERAL", op) in granted
    for op in TARGET_OPS:
        assert ("dr", "primary.mm2spec-probe-primary-to-dr", "LITERAL", op) in granted


def test_seed000_acls_gain_the_probe_bindings_as_a_documented_addition():
    # Seed 000 section 5.7's list is unchanged (test_render checks it is all there); the only
    # addition is the flow's probe topic, the same grants as a mirrored literal topic's.
    state = load_desired_state(SEED, None)
    probe = {(b.cluster, b.operation) for b in state.acl_bindings
             if b.resource_name == "mm2spec-probe-A-to-B" and b.resource_type == "TOPIC"}
    assert probe == {("A", op) for op in SOURCE_OPS} | {("B", op) for op in TARGET_OPS}
    group = {(b.cluster, b.operation) for b in state.acl_bindings
             if b.resource_name == "mm2spec-probe-A-to-B" and b.resource_type == "GROUP"}
    assert group == {("A", "DESCRIBE"), ("B", "DESCRIBE"), ("B", "READ")}, "as a mirrored literal group's"


def test_the_drill_needs_no_probe_topic_option_and_never_writes_application_topics(tmp_path):
    state = load_desired_state(_spec(tmp_path, topics=["ledger-entries"], groups=["ledger-service"]), "dev")
    plan = plan_drill(state, Options(), DrillSettings())
    assert plan.topics == {"primary-to-dr": ("mm2spec-probe-primary-to-dr",)}
    assert "ledger-entries" not in plan.names_on("primary")
    # its probe group too: checkpointed whatever the flow's (literal) groups say
    assert plan.groups == {"mm2spec-probe-primary-to-dr": ("mm2spec-probe-primary-to-dr",)}
    flow = state.mirrors[0]
    assert flow.mirrored_groups(["ledger-service", "mm2spec-probe-primary-to-dr", "other"]) == [
        "ledger-service", "mm2spec-probe-primary-to-dr"]
    files = render_files(state)
    assert json.loads(files["primary-to-dr-MirrorCheckpointConnector.json"])["config"]["groups"] == (
        "ledger-service,mm2spec-probe-primary-to-dr")
    granted = {(b.cluster, b.operation) for b in state.acl_bindings
               if b.resource_type == "GROUP" and b.resource_name == "mm2spec-probe-primary-to-dr"}
    assert granted == {("primary", "DESCRIBE"), ("dr", "DESCRIBE"), ("dr", "READ")}


def test_a_flow_whose_probe_the_mirror_could_not_carry_is_invalid(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT / "tests" / "unit" / "invalid")
    assert main(["validate", "probe_topic_not_mirrored.yaml"]) == 1
    err = capsys.readouterr().err
    assert 'pattern "mm2spec-probe-.*" excludes the flow\'s probe group mm2spec-probe-groups-excluded' in err
    assert 'pattern "mm2spec-.*" excludes the flow\'s probe topic mm2spec-probe-primary-to-dr' in err
    assert "MM2 would never mirror the flow's probe topic mm2spec-probe-x.internal" in err
    assert "Traceback" not in err


def test_a_probe_copy_name_too_long_for_kafka_is_invalid(tmp_path, capsys):
    source = "s" * 60
    path = tmp_path / "long.dr.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": "demo"},
        "clusters": {source: {"bootstrapServers": ["p-1:9092"]}, "dr": {"bootstrapServers": ["d-1:9092"]}},
        "mirrors": [{"name": "f" * 190, "source": source, "target": "dr", "topics": ["orders"]}]}))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "the probe topic's copy ssssssssss" in err and "is 265 characters long: Kafka allows 249" in err, err


def test_the_dev_seed_creates_each_flows_probe_topic_once(monkeypatch):
    from mm2spec.dev import demo

    created: list[tuple[str, str, int]] = []

    class Admin:
        def __init__(self, cluster):
            self.alias = cluster.alias

        def topics(self, names=None, with_configs=True):
            return {n: object() for n in names or () if (self.alias, n, demo.PARTITIONS) in created}

        def create_topic(self, name, partitions, replication_factor, configs):
            created.append((self.alias, name, partitions))

    monkeypatch.setattr(demo, "KafkaAdmin", Admin)
    state = load_desired_state(EXAMPLE, "dev")
    assert list(demo._probe_topics(state)) == ["probe topic mm2spec-probe-primary-to-dr on primary (the drill's, "
                                               "always mirrored)"]
    assert created == [("primary", "mm2spec-probe-primary-to-dr", policy.PROBE_TOPIC_PARTITIONS)]
    assert list(demo._probe_topics(state)) == [], "an existing one is left alone"
