"""Input hardening (issue 14, item 1) beyond the golden texts of tests/unit/invalid/: secrets in the
hostile cases are never echoed, ``--format json`` is JSON for every failure, and render writes all
its files or none."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mm2spec.cli import main

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "invalid"
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"

# Secrets planted in the invalid cases, by case: none may appear in what validate prints.
PLANTED = {
    "yaml_tags": ["dGFnZ2VkLXNlY3JldA==", "tagged-secret", "90210", "tagged-secret-value"],
    "secret_values": ["MIIEvpemkeysecretvalue", "barejaassecret", "singlequotedsecret", "urlpasswordsecret"],
    "inline_password": ["hunter2", "changeit-secret", "topsecret-value"],
}


@pytest.mark.parametrize("case", sorted(PLANTED))
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_planted_secrets_are_never_echoed(case, fmt, capsys, monkeypatch):
    monkeypatch.chdir(CASES)
    assert main(["validate", f"{case}.yaml", "--format", fmt]) == 1
    captured = capsys.readouterr()
    for secret in PLANTED[case]:
        assert secret not in captured.out + captured.err


def test_a_newline_in_a_value_cannot_forge_an_error_line(capsys, monkeypatch):
    monkeypatch.chdir(CASES)
    assert main(["validate", "control_characters.yaml"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert not any(line.startswith("forged.yaml") for line in lines)
    assert len(lines) == 2 and lines[1] == "1 error found"


def _json_failure(argv: list[str], capsys) -> dict:
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return json.loads(captured.out)


@pytest.mark.parametrize("case", ["yaml_syntax", "alias_bomb", "deep_nesting", "merge_key", "non_string_keys"])
def test_json_format_reports_yaml_problems_as_json(case, capsys, monkeypatch):
    monkeypatch.chdir(CASES)
    document = _json_failure(["validate", f"{case}.yaml", "--format", "json"], capsys)
    assert f"{case}.yaml" in json.dumps(document)


def test_json_format_reports_a_missing_file_and_an_unknown_environment_as_json(capsys, tmp_path):
    missing = _json_failure(["validate", str(tmp_path / "nowhere.yaml"), "--format", "json"], capsys)
    assert "nowhere.yaml" in json.dumps(missing)
    unknown = _json_failure(["validate", str(EXAMPLE), "--env", "no-such-env", "--format", "json"], capsys)
    assert "no-such-env" in json.dumps(unknown)


def test_render_creates_a_missing_out_folder_and_files_hold_no_secret_so_are_not_hidden(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main(["render", str(EXAMPLE), "--env", "dev", "--out", str(out)]) == 0
    written = [p for p in out.iterdir()]
    assert written and not [p for p in written if p.name.startswith(".") and p.name != ".mm2spec-render.json"], \
        "no staging folder may be left (only the render's manifest)"
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o044 for p in written), "secret-free files keep the umask's mode"


def test_render_into_a_file_or_from_a_bad_spec_writes_nothing(tmp_path, capsys, monkeypatch):
    taken = tmp_path / "taken"
    taken.write_text("mine")
    assert main(["render", str(EXAMPLE), "--out", str(taken)]) == 1
    assert "is not a folder" in capsys.readouterr().err and taken.read_text() == "mine"
    monkeypatch.chdir(CASES)
    assert main(["render", "names_trailing_newline.yaml", "--out", str(tmp_path / "new" / "out")]) == 1
    assert not (tmp_path / "new").exists()
