"""Loading with positions, environment overlays, Java regex checks and pattern classification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mm2spec.cli import main
from mm2spec.spec.compile import compile_spec
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.document import Position, locate, parse, to_plain
from mm2spec.spec.patterns import classify, java_regex_error
from mm2spec.errors import SpecInvalid, UnknownEnvironment
from mm2spec.spec.validate import resolve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def test_positions_point_at_values_and_keys():
    root = parse("a:\n  b: [1, 2]\n  c: x\n", "f.yaml")
    assert locate(root, ["a", "b", 1]) == Position("f.yaml", 2, 10)
    assert locate(root, ["a", "c"], key=True) == Position("f.yaml", 3, 3)
    # a path that does not exist resolves to its deepest existing parent
    assert locate(root, ["a", "missing", "x"]) == Position("f.yaml", 2, 3)


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_contract_example_compiles_for_every_environment(env):
    state = load_desired_state(EXAMPLE, env)
    assert state.mirrors[0].name == "primary-to-dr"
    assert all(t.replication_factor == -1 for t in state.internal_topics)


def test_overlay_merges_mirrors_by_name_and_null_deletes():
    root = parse(EXAMPLE.read_text(), "ex.yaml")
    dev = to_plain(resolve(root, "dev"))
    assert dev["mirrors"][0]["tasksMax"] == 2 and dev["mirrors"][0]["exactlyOnce"] is False
    assert dev["mirrors"][0]["topics"] == ["orders", "payments", "invoices-.*"]  # kept from the base
    assert dev["clusters"]["primary"]["security"] == {"protocol": "PLAINTEXT"}  # nulls deleted keys
    assert dev["spark"]["triggerInterval"] == "1 second" and dev["spark"]["master"] == "local[2]"
    assert "environments" not in dev
    staging = to_plain(resolve(root, "staging"))
    assert staging["mirrors"][0]["tasksMax"] == 8 and staging["mirrors"][0]["exactlyOnce"] is True


def test_overlay_positions_point_into_the_environment_block():
    root = parse(EXAMPLE.read_text(), "ex.yaml")
    dev = resolve(root, "dev")
    line = locate(dev, ["mirrors", 0, "tasksMax"]).line
    assert EXAMPLE.read_text().splitlines()[line - 1].strip() == "tasksMax: 2"


def test_overlay_can_add_a_new_named_mirror():
    text = EXAMPLE.read_text().replace(
        "  prod: {}", "  prod:\n    mirrors:\n      - {source: dr, target: primary, topics: [audit]}")
    root = parse(text, "ex.yaml")
    state = compile_spec(resolve(root, "prod"), "prod")
    assert [m.name for m in state.mirrors] == ["primary-to-dr", "dr-to-primary"]
    assert state.mirrors[1].replication_policy == "default"
    assert state.mirrors[1].target_topic("audit") == "dr.audit"


def test_unknown_environment_lists_the_known_ones():
    root = parse(EXAMPLE.read_text(), "ex.yaml")
    with pytest.raises(UnknownEnvironment, match='unknown environment "qa": the spec defines dev, staging, prod'):
        resolve(root, "qa")


@pytest.mark.parametrize("pattern,error", [
    ("orders", None), ("invoices-.*", None), (r"\Qa.b(\E", None), (r"\p{Alpha}+", None),
    ("(?<year>[0-9]{4})-\\k<year>", None), ("a(?i)b", None), ("x*+", None), ("(?>ab)", None),
    ("invoices-(", "missing ), unterminated subpattern"), ("[a-", "unterminated character set"),
    ("*x", "nothing to repeat"), ("a(?q)", "unknown inline flag 'q'"), (r"\p{Alpha", "unclosed character class name \\p{"),
])
def test_java_regex_validation(pattern, error):
    assert java_regex_error(pattern) == error


@pytest.mark.parametrize("pattern,kind,value", [
    ("orders", "literal", "orders"), ("orders.v1", "literal", "orders.v1"), (r"orders\.v1", "literal", "orders.v1"),
    ("invoices-.*", "prefix", "invoices-"), (".*", "literal", "*"), ("a.*b", "regex", "a.*b"),
    ("(orders|payments)", "regex", "(orders|payments)"), ("billing-[0-9]+", "regex", "billing-[0-9]+"),
])
def test_pattern_classification(pattern, kind, value):
    classified = classify(pattern)
    assert (classified.kind, classified.value) == (kind, value)


def test_regex_patterns_become_acl_patterns_not_bindings(tmp_path):
    spec = EXAMPLE.read_text().replace('topics: [orders, payments, "invoices-.*"]',
                                       'topics: [orders, "(refunds|chargebacks)-v[0-9]+"]')
    path = tmp_path / "s.yaml"
    path.write_text(spec)
    state = load_desired_state(path, "prod")
    regexes = {(p.cluster, p.resource_type, p.regex, p.name_prefix) for p in state.acl_patterns}
    assert regexes == {("primary", "TOPIC", "(refunds|chargebacks)-v[0-9]+", ""),
                       ("dr", "TOPIC", "(refunds|chargebacks)-v[0-9]+", "")}
    assert not any("refunds" in b.resource_name for b in state.acl_bindings)


def test_load_desired_state_raises_with_every_problem(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(EXAMPLE.read_text().replace("tasksMax: 30", "tasksMax: 0").replace("target: dr\n", "target: nowhere\n", 1))
    with pytest.raises(SpecInvalid) as caught:
        load_desired_state(path, "prod")
    pointers = {d.pointer for d in caught.value.diagnostics}
    assert {"/mirrors/0/tasksMax", "/mirrors/0/target"} <= pointers


# ------------------------------------------------------------------------------------------ CLI

def test_cli_validate_ok_and_json(capsys):
    assert main(["validate", str(EXAMPLE)]) == 0
    assert "valid (base, dev, staging, prod)" in capsys.readouterr().out
    assert main(["validate", str(EXAMPLE), "--env", "dev", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "valid": True, "files": [{"file": str(EXAMPLE), "valid": True, "environments": ["dev"], "errors": []}]}


def test_cli_json_errors(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("tasksMax: 30", "tasksMax: 0"))
    assert main(["validate", str(bad), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["files"][0]["valid"] is False
    line = EXAMPLE.read_text().splitlines().index("    tasksMax: 30") + 1
    errors = report["files"][0]["errors"]
    assert errors[0]["pointer"] == "/mirrors/0/tasksMax" and errors[0]["line"] == line


@pytest.mark.parametrize("argv,message", [
    (["validate", "no-such-file.yaml"], "error: no-such-file.yaml: no such file"),
    (["validate", str(EXAMPLE), "--env", "qa"], f'error: {EXAMPLE}: unknown environment "qa"'),
    (["render", str(EXAMPLE), "--env", "qa", "--out", "x"], 'error: unknown environment "qa"'),
])
def test_cli_errors_exit_1_without_traceback(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err


def test_render_writes_nothing_when_invalid(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("tasksMax: 2", "tasksMax: 0"))
    out = tmp_path / "out"
    assert main(["render", str(bad), "--env", "dev", "--out", str(out)]) == 1
    assert not out.exists()
    assert "/mirrors/0/tasksMax: environment dev: tasksMax must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["a-file", "a-file/below", "missing/../a-file/deeper/still"])
def test_render_refuses_an_unusable_out_before_it_loads_the_spec(where, tmp_path, capsys, monkeypatch):
    # A spec with 50,000 regex topics took 1.2 GB before render said its --out was unusable: the spec
    # must not even be read when --out cannot be written.
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr("mm2spec.cli.spec.load_desired_state", lambda *a: pytest.fail("the spec was loaded"))
    assert main(["render", str(EXAMPLE), "--out", str(tmp_path / where)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {tmp_path / where}") and "a-file is not a folder" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_render_writes_every_file(tmp_path):
    assert main(["render", str(EXAMPLE), "--env", "dev", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".mm2spec-render.json", "connect-distributed.properties", "grafana-dashboard.json", "mm2.properties",
                     "primary-to-dr-MirrorCheckpointConnector.json", "primary-to-dr-MirrorSourceConnector.json",
                     "prometheus-rules.yml", "prometheus.yml", "resources.json", "resources.txt", "spark-mirror.json"]


def test_an_undefined_cluster_alias_is_a_domain_error_naming_the_defined_ones():
    from mm2spec.errors import Mm2specError, UnknownCluster

    state = load_desired_state(EXAMPLE, "dev")
    with pytest.raises(UnknownCluster, match=r'cluster "nowhere" is not defined .*defined: primary, dr') as caught:
        state.cluster("nowhere")
    assert isinstance(caught.value, Mm2specError)
