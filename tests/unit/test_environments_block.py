"""The ``environments`` block is checked like the rest: an overlay that is not a mapping, or an overlay mirror
that patches no base mirror, is a located error, never silently the base (``tests/unit/invalid`` has the texts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mm2spec.cli import main
from mm2spec.errors import SpecInvalid
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def _spec(tmp_path: Path, environments) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["environments"] = environments
    path = tmp_path / "s.dr.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("environments,pointer,got", [
    ({"dev": [{"clusters": {"primary": {"bootstrapServers": ["127.0.0.1:19092"]}}}], "prod": {}}, "/environments/dev", "a list"),
    ({"dev": {}, "prod": "oops"}, "/environments/prod", "a string"),
    ({"dev": {}, "prod": None}, "/environments/prod", "null"),
    (["dev", "prod"], "/environments", "a list"),
])
def test_an_overlay_that_is_not_a_mapping_is_a_located_error(environments, pointer, got, tmp_path, capsys):
    spec = _spec(tmp_path, environments)
    assert main(["validate", str(spec), "--format", "json"]) == 1
    errors = json.loads(capsys.readouterr().out)["files"][0]["errors"]
    assert [(e["pointer"], e["message"]) for e in errors] == [(pointer, f"expected object, got {got}")]
    assert errors[0]["line"] > 1 and errors[0]["hint"]


@pytest.mark.parametrize("environments", [
    {"dev": [{"clusters": {"primary": {"bootstrapServers": ["127.0.0.1:19092"]}}}]},
    ["dev"],
])
def test_render_of_a_broken_overlay_writes_nothing(environments, tmp_path, capsys):
    # It once rendered the base's brokers for dev: a typo pointed an environment at another one's clusters.
    out = tmp_path / "out"
    assert main(["render", str(_spec(tmp_path, environments)), "--env", "dev", "--out", str(out)]) == 1
    assert "expected object, got a list" in capsys.readouterr().err and not out.exists()


def test_an_overlay_mirror_with_a_misspelt_name_says_so_and_suggests_the_base_one(tmp_path):
    spec = _spec(tmp_path, {"dev": {"mirrors": [{"name": "primary-to-drr", "tasksMax": 2}]}})
    with pytest.raises(SpecInvalid) as caught:
        load_desired_state(spec, "dev")
    [problem] = caught.value.diagnostics
    assert (problem.pointer, problem.env) == ("/environments/dev/mirrors/0/name", "dev")
    assert problem.message == 'overlay mirror "primary-to-drr" names no mirror of the base'
    assert problem.hint.startswith('did you mean "primary-to-dr"?')
    assert problem.line == spec.read_text().splitlines().index("    - name: primary-to-drr") + 1


def test_without_a_close_name_the_hint_lists_the_base_mirrors(tmp_path):
    spec = _spec(tmp_path, {"dev": {"mirrors": [{"name": "zzzz", "tasksMax": 2}]}})
    with pytest.raises(SpecInvalid) as caught:
        load_desired_state(spec, "dev")
    assert [d.hint for d in caught.value.diagnostics] == [
        "a patch names the base mirror it changes: primary-to-dr; a new flow needs source, target and topics"]


def test_an_overlay_may_add_a_whole_new_flow(tmp_path):
    spec = _spec(tmp_path, {"dev": {"mirrors": [{"name": "dr-to-primary", "source": "dr", "target": "primary",
                                                 "topics": ["orders"]}]}})
    flows = [flow.name for flow in load_desired_state(spec, "dev").mirrors]
    assert flows == ["primary-to-dr", "dr-to-primary"]
