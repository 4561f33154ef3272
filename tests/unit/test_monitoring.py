"""The rendered monitoring files (scrape config, rules, dashboard, JMX exporter) and the objectives.

promtool itself runs in tests/integration/test_monitoring_promtool.py; these need nothing installed.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from mm2spec.mm2.metric_names import METRICS, NAMES
from mm2spec.ops.modules.verify import _rpo_bound
from mm2spec.render import render_files
from mm2spec.render.monitoring import (DASHBOARD, JMX_EXPORTER_CONFIG, RULES, SCRAPE_CONFIG, WORKER_ENV,
                                       dr_exporter_port, dr_exporter_port_field, panel_queries)
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import Objectives

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
CONNECT = ROOT / "examples" / "redhat-dr-a-to-b.yaml"

PROMQL_WORDS = {
    # functions and aggregations the rendered queries use, and PromQL's keywords
    "sum", "max", "min", "avg", "count", "rate", "increase", "absent", "vector", "last_over_time",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
}


def metric_names_in(query: str) -> set[str]:
    """The metric names a PromQL query reads: identifiers that are not functions, keywords, label
    names (inside ``{}`` or a ``by (...)``/``on (...)`` list) or strings."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)           # strings out
    text = re.sub(r"\{[^}]*\}", "{}", text)                      # label matchers out
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)
    text = re.sub(r"\[[^\]]*\]", "", text)                       # range selectors out
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text))
    return {name for name in names if name not in PROMQL_WORDS}


def files_of(spec: Path, env: str | None) -> dict[str, str]:
    return render_files(load_desired_state(spec, env))


@pytest.mark.parametrize("spec,env", [(EXAMPLE, "dev"), (EXAMPLE, "prod"), (CONNECT, None)])
def test_every_dashboard_and_alert_query_reads_only_names_of_the_one_table(spec, env):
    files = files_of(spec, env)
    queries = panel_queries(json.loads(files[DASHBOARD]))
    queries += [rule["expr"] for group in yaml.safe_load(files[RULES])["groups"] for rule in group["rules"]
                if "alert" in rule]
    assert len(queries) > 40
    read = set().union(*(metric_names_in(q) for q in queries))
    assert read <= NAMES, f"not in mm2spec.mm2.metric_names: {sorted(read - NAMES)}"
    # the recording rules write names of the table too
    recorded = {rule["record"] for group in yaml.safe_load(files[RULES])["groups"] for rule in group["rules"]
                if "record" in rule}
    assert recorded <= NAMES


def test_the_query_parser_of_these_tests_finds_a_name_not_in_the_table():
    assert metric_names_in('max by (flow) (mm2spec_rpo_secs{spec="x", flow=~"$flow"}) > on (flow) up') == \
        {"mm2spec_rpo_secs", "up"}


def test_the_dashboard_has_seed_002s_panels_and_the_rpo_panels():
    board = json.loads(files_of(EXAMPLE, "prod")[DASHBOARD])
    titles = {panel["title"] for panel in board["panels"]}
    for seed002 in ("Source -> Destination", "Last rebalance (s ago)", "Completed rebalances", "Throughput (records/s)",
                    "Topics synced", "Bytes transferred", "Replication latency (ms)", "Message count",
                    "Topics throughput (records/s)", "Topics bytes transferred", "Topics replication latency (ms)",
                    "Task errors", "Synced topics", "Source task metrics", "Connector task metrics",
                    "Connect worker metrics"):
        assert seed002 in titles
    assert {"RPO now (s)", "RPO against the objective (s)", "Checkpoint age per group (s)", "Failed over"} <= titles
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_the_jmx_exporter_maps_every_mbean_metric_of_the_table_once():
    config = yaml.safe_load(files_of(CONNECT, None)[JMX_EXPORTER_CONFIG])
    names = [rule["name"] for rule in config["rules"]]
    assert sorted(names) == sorted(m.name for m in METRICS if m.mbean is not None)
    by_name = {rule["name"]: rule for rule in config["rules"]}
    # an attribute that is the prefix of another must not catch it
    assert by_name["kafka_connect_mirror_source_connector_record_age_ms"]["pattern"].endswith("><>record-age-ms:")
    status = by_name["kafka_connect_connector_task_status"]
    assert status["value"] == 1 and status["labels"] == {"connector": "$1", "task": "$2", "status": "$3"}
    # the exporter keeps _total only on a COUNTER's name, and adds it to every COUNTER's
    assert {rule["name"] for rule in config["rules"] if rule["type"] == "COUNTER"} == {
        "kafka_connect_worker_rebalance_completed_rebalances_total",
        "kafka_connect_source_task_source_record_poll_total", "kafka_connect_source_task_source_record_write_total"}
    assert {rule["type"] for rule in config["rules"]} == {"GAUGE", "COUNTER"}
    # Kafka 4's MirrorSourceMetrics MBean names the source cluster before the target
    record_count = by_name["kafka_connect_mirror_source_connector_record_count"]
    assert record_count["pattern"].startswith("kafka.connect.mirror<type=MirrorSourceConnector, source=(.+), target=")
    assert record_count["labels"] == {"source": "$1", "target": "$2", "topic": "$3", "partition": "$4"}


def test_engine_spark_scrapes_the_driver_and_engine_connect_the_workers_and_both_the_dr_exporter():
    spark = yaml.safe_load(files_of(EXAMPLE, "dev")[SCRAPE_CONFIG])
    assert [job["job_name"] for job in spark["scrape_configs"]] == ["mm2spec-payments-dr-spark",
                                                                  "mm2spec-payments-dr-dr-exporter"]
    assert [job["static_configs"][0]["targets"] for job in spark["scrape_configs"]] == [["localhost:9405"],
                                                                                      ["localhost:9406"]]
    for job in spark["scrape_configs"]:
        assert job["static_configs"][0]["labels"] == {"spec": "payments-dr", "env": "dev"}
    assert JMX_EXPORTER_CONFIG not in files_of(EXAMPLE, "dev") and WORKER_ENV not in files_of(EXAMPLE, "dev")
    connect = yaml.safe_load(files_of(CONNECT, None)[SCRAPE_CONFIG])
    assert [job["job_name"] for job in connect["scrape_configs"]] == ["mm2spec-a-to-b-connect",
                                                                    "mm2spec-a-to-b-dr-exporter"]
    assert connect["rule_files"] == [RULES]


def test_metrics_ports_come_from_the_spec(tmp_path):
    spec = tmp_path / "ports.yaml"
    spec.write_text(CONNECT.read_text().replace(
        "\nconnect:\n", "\nconnect:\n  metrics: {port: 7071, exporterPort: 7072}\n  restUrl: http://worker-1.dr:8083\n"))
    state = load_desired_state(spec, None)
    assert (state.connect.metrics_port, state.connect.exporter_port) == (7071, 7072)
    jobs = yaml.safe_load(render_files(state)[SCRAPE_CONFIG])["scrape_configs"]
    assert [job["static_configs"][0]["targets"] for job in jobs] == [["worker-1.dr:7071"], ["localhost:7072"]]


def test_engine_sparks_dr_exporter_port_is_spark_metrics_exporter_port(tmp_path):
    spec = tmp_path / "ports.yaml"
    spec.write_text(EXAMPLE.read_text().replace("  executors: {instances: 3, cores: 2, memory: 4g}\n",
                    "  executors: {instances: 3, cores: 2, memory: 4g}\n  metrics: {port: 7081, exporterPort: 7082}\n"))
    state = load_desired_state(spec, "dev")
    assert (state.spark.metrics_port, state.spark.exporter_port) == (7081, 7082)
    assert (dr_exporter_port(state), dr_exporter_port_field(state)) == (7082, "spark.metrics.exporterPort")
    jobs = yaml.safe_load(render_files(state)[SCRAPE_CONFIG])["scrape_configs"]
    assert [job["static_configs"][0]["targets"] for job in jobs] == [["localhost:7081"], ["localhost:7082"]]


def test_engine_connects_worker_env_starts_the_jmx_exporter_agent_on_the_metrics_port(tmp_path):
    spec = tmp_path / "ports.yaml"
    spec.write_text(CONNECT.read_text().replace("\nconnect:\n", "\nconnect:\n  metrics: {port: 7071}\n"))
    text = render_files(load_desired_state(spec, None))[WORKER_ENV]
    script = text + 'printf %s "$KAFKA_OPTS"'
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                         env={"JMX_EXPORTER_JAR": "/opt/agent.jar", "MM2SPEC_RENDERED": "/etc/dr", "KAFKA_OPTS": "-Xms1g"})
    assert run.stdout == "-Xms1g -javaagent:/opt/agent.jar=7071:/etc/dr/jmx-exporter.yml", run.stderr
    unset = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={})
    assert unset.returncode != 0 and "set JMX_EXPORTER_JAR to jmx_prometheus_javaagent" in unset.stderr


def test_objectives_compile_per_environment_and_become_recording_rules(tmp_path):
    spec = tmp_path / "objectives.yaml"
    spec.write_text(EXAMPLE.read_text().replace(
        "        tasksMax: 8\n", "        tasksMax: 8\n        objectives: {rpoSeconds: 2.5}\n"))
    staging = load_desired_state(spec, "staging").mirrors[0].objectives
    assert staging == Objectives(rpo_seconds=2.5, checkpoint_age_seconds=120)  # merged over the base's
    assert load_desired_state(spec, "prod").mirrors[0].objectives == Objectives(10, 120)
    rules = yaml.safe_load(render_files(load_desired_state(spec, "staging"))[RULES])["groups"][0]["rules"]
    assert {(r["record"], r["expr"]) for r in rules} == {("mm2spec_objective_rpo_seconds", "vector(2.5)"),
                                                        ("mm2spec_objective_checkpoint_age_seconds", "vector(120)")}


def test_a_flow_without_objectives_has_no_rpo_objective_and_checkpoints_bounded_by_two_intervals():
    state = load_desired_state(CONNECT, None)
    assert all(flow.objectives == Objectives() for flow in state.mirrors)
    rules = [r for g in yaml.safe_load(render_files(state)[RULES])["groups"] for r in g["rules"]]
    assert "mm2spec_objective_rpo_seconds" not in {r.get("record") for r in rules}
    checkpoint = [r for r in rules if r.get("record") == "mm2spec_objective_checkpoint_age_seconds"]
    flow = state.mirrors[0]
    assert checkpoint and checkpoint[0]["expr"] == f"vector({2 * flow.emit_checkpoints_interval_seconds})"


def test_verify_judges_the_rpo_by_the_objective_before_the_playbooks_argument():
    flow = load_desired_state(EXAMPLE, "prod").mirrors[0]
    assert _rpo_bound(flow, 60.0) == (10.0, "objective rpoSeconds 10")
    assert _rpo_bound(replace(flow, objectives=Objectives()), 60.0) == (60.0, "max_age_seconds 60")
