"""The rendered Prometheus files on the real promtool (Debian's prometheus package; no cluster).

``promtool check config`` / ``check rules`` accept what ``mm2spec render`` writes, ``promtool test
rules`` proves the RPO-over-objective and mirror-down alerts fire on series that breach them and
stay quiet on series that do not, and every dashboard query parses as PromQL.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from mm2spec.render import render_files, write_files
from mm2spec.render.monitoring import DASHBOARD, RULES, SCRAPE_CONFIG, job_names, panel_queries
from mm2spec.spec.load import load_desired_state
from tests.integration.required import missing_component

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
CONNECT = ROOT / "examples" / "redhat-dr-a-to-b.yaml"
KUBERNETES = ROOT / "examples" / "spark-on-kubernetes.dr.yaml"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        missing_component("promtool is not installed: run scripts/setup (Debian package prometheus)")
    return found


def _run(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def _rendered(tmp_path: Path, spec: Path, env: str | None) -> Path:
    folder = tmp_path / f"{spec.stem}-{env or 'base'}"
    write_files(render_files(load_desired_state(spec, env)), folder)
    return folder


@pytest.mark.parametrize("spec,env", [(EXAMPLE, "dev"), (EXAMPLE, "staging"), (EXAMPLE, "prod"), (CONNECT, None)])
def test_promtool_accepts_the_rendered_scrape_config_and_rules(promtool, tmp_path, spec, env):
    folder = _rendered(tmp_path, spec, env)
    config = _run(promtool, "check", "config", SCRAPE_CONFIG, cwd=folder)  # also checks the rule file it loads
    assert config.returncode == 0, config.stdout + config.stderr
    rules = _run(promtool, "check", "rules", RULES, cwd=folder)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS" in rules.stdout


def test_promtool_accepts_the_rules_of_a_spark_job_on_kubernetes(promtool, tmp_path):
    # Its scrape config finds the driver pod through kubernetes_sd_configs, which Debian's build of
    # Prometheus leaves out, so only its rules are checked here.
    folder = _rendered(tmp_path, KUBERNETES, None)
    rules = _run(promtool, "check", "rules", RULES, cwd=folder)
    assert rules.returncode == 0, rules.stdout + rules.stderr


@pytest.mark.parametrize("spec,env", [(EXAMPLE, "prod"), (CONNECT, None)])
def test_every_dashboard_query_is_promql(promtool, tmp_path, spec, env):
    folder = _rendered(tmp_path, spec, env)
    queries = panel_queries(json.loads((folder / DASHBOARD).read_text()))
    # Each query as a recording rule: promtool parses it; Grafana's $flow becomes a regex that matches all.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": query.replace("$flow", ".*")} for i, query in enumerate(queries)]}]}
    (folder / "dashboard-rules.yml").write_text(yaml.safe_dump(rules))
    checked = _run(promtool, "check", "rules", "dashboard-rules.yml", cwd=folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(queries)} rules found" in checked.stdout


def _annotations(rules_file: Path, alert: str, flow: str = "", value: str = "") -> dict:
    """The alert's annotations as Prometheus expands them (promtool compares them too)."""
    for group in yaml.safe_load(rules_file.read_text())["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                return {key: text.replace("{{ $labels.flow }}", flow).replace("{{ $value | humanize }}", value)
                        for key, text in rule["annotations"].items()}
    raise AssertionError(f"no alert {alert} in {rules_file}")


def _alert_test(state_name: str, mirror_job: str, rules_file: Path) -> dict:
    """promtool unit tests of the example's rules (flow primary-to-dr, rpoSeconds 10)."""
    rpo = 'mm2spec_rpo_seconds{spec="%s", env="prod", flow="%s", topic="orders", partition="%d"}'
    breach, within = "primary-to-dr", "primary-to-dr"
    return {
        "rule_files": [RULES],
        "evaluation_interval": "15s",
        "tests": [
            {   # the oldest unmirrored record ages past the 10 s objective on one partition and stays there
                "interval": "15s",
                "input_series": [
                    {"series": rpo % (state_name, breach, 0), "values": "1 5 12 14 20 25 30 35 40 45 50"},
                    {"series": rpo % (state_name, breach, 1), "values": "0x10"},
                    {"series": f'up{{job="{mirror_job}", instance="driver:9405"}}', "values": "1x10"},
                ],
                "alert_rule_test": [
                    {"eval_time": "30s", "alertname": "Mm2specRpoOverObjective", "exp_alerts": []},  # pending
                    {"eval_time": "2m", "alertname": "Mm2specRpoOverObjective", "exp_alerts": [{
                        "exp_labels": {"severity": "critical", "spec": state_name, "flow": breach},
                        "exp_annotations": _annotations(rules_file, "Mm2specRpoOverObjective", breach, "40")}]},
                    {"eval_time": "2m", "alertname": "Mm2specMirrorDown", "exp_alerts": []},
                ],
            },
            {   # within the objective: never fires
                "interval": "15s",
                "input_series": [
                    {"series": rpo % (state_name, within, 0), "values": "0 2 4 9 9.9 3 1 0 0 0 0"},
                    {"series": f'up{{job="{mirror_job}", instance="driver:9405"}}', "values": "1x10"},
                ],
                "alert_rule_test": [
                    {"eval_time": "2m", "alertname": "Mm2specRpoOverObjective", "exp_alerts": []},
                ],
            },
            {   # the mirror stops answering: down after two minutes
                "interval": "15s",
                "input_series": [
                    {"series": f'up{{job="{mirror_job}", instance="driver:9405"}}', "values": "1 1 0x20"},
                ],
                "alert_rule_test": [
                    {"eval_time": "1m", "alertname": "Mm2specMirrorDown", "exp_alerts": []},  # pending
                    {"eval_time": "4m", "alertname": "Mm2specMirrorDown", "exp_alerts": [{
                        "exp_labels": {"severity": "critical", "job": mirror_job},
                        "exp_annotations": _annotations(rules_file, "Mm2specMirrorDown")}]},
                ],
            },
            {   # stopped on purpose by a failover: quiet
                "interval": "15s",
                "input_series": [
                    {"series": f'up{{job="{mirror_job}", instance="driver:9405"}}', "values": "1 1 0x20"},
                    {"series": f'mm2spec_flow_failed_over{{spec="{state_name}", flow="{breach}"}}',
                     "values": "0 1x21"},
                ],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "Mm2specMirrorDown", "exp_alerts": []},
                    {"eval_time": "4m", "alertname": "Mm2specFlowFailedOver", "exp_alerts": [{
                        "exp_labels": {"severity": "warning", "spec": state_name, "flow": breach},
                        "exp_annotations": _annotations(rules_file, "Mm2specFlowFailedOver", breach)}]},
                ],
            },
            {   # never scraped at all (the target is gone): down too
                "interval": "15s",
                "input_series": [{"series": 'up{job="some-other-job"}', "values": "1x20"}],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "Mm2specMirrorDown", "exp_alerts": [{
                        "exp_labels": {"severity": "critical", "job": mirror_job},
                        "exp_annotations": _annotations(rules_file, "Mm2specMirrorDown")}]},
                ],
            },
        ],
    }


def test_the_rpo_and_mirror_down_alerts_fire_on_breaches_and_only_then(promtool, tmp_path):
    state = load_desired_state(EXAMPLE, "prod")
    assert state.mirrors[0].objectives.rpo_seconds == 10
    folder = _rendered(tmp_path, EXAMPLE, "prod")
    (folder / "alerts.test.yml").write_text(yaml.safe_dump(_alert_test(state.name, job_names(state)["mirror"], folder / RULES),
                                                           sort_keys=False))
    tested = _run(promtool, "test", "rules", "alerts.test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_promtool_test_rules_would_catch_a_wrong_expectation(promtool, tmp_path):
    # The harness can fail: expecting no RPO alert on the breaching series is reported as a failure.
    state = load_desired_state(EXAMPLE, "prod")
    folder = _rendered(tmp_path, EXAMPLE, "prod")
    wrong = _alert_test(state.name, job_names(state)["mirror"], folder / RULES)
    wrong["tests"][0]["alert_rule_test"][1]["exp_alerts"] = []
    (folder / "wrong.test.yml").write_text(yaml.safe_dump(wrong, sort_keys=False))
    tested = _run(promtool, "test", "rules", "wrong.test.yml", cwd=folder)
    assert tested.returncode != 0
    assert "Mm2specRpoOverObjective" in tested.stdout + tested.stderr
