"""``mm2spec validate`` takes every file a pre-commit hook passes: each checked and reported, exit 1 when any is invalid."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from mm2spec.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def _specs(folder: Path) -> tuple[Path, Path, Path]:
    good = folder / "staging.dr.yaml"
    good.write_text(EXAMPLE.read_text())
    bad = folder / "staging-extra.dr.yaml"
    bad.write_text(EXAMPLE.read_text().replace("tasksMax: 30", "tasksMax: 0"))
    other = folder / "also-good.dr.yaml"
    other.write_text(EXAMPLE.read_text())
    return good, bad, other


def test_every_file_is_checked_and_reported_and_one_invalid_fails_the_run(tmp_path, capsys):
    good, bad, other = _specs(tmp_path)
    assert main(["validate", str(good), str(bad), str(tmp_path / "missing.dr.yaml"), str(other)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{good}: valid (base, dev, staging, prod)",
                                         f"{other}: valid (base, dev, staging, prod)"]
    assert f"{bad}:" in captured.err and "/mirrors/0/tasksMax: tasksMax must be at least 1" in captured.err
    assert f"error: {tmp_path / 'missing.dr.yaml'}: no such file" in captured.err


def test_json_has_one_entry_per_file(tmp_path, capsys):
    good, bad, _other = _specs(tmp_path)
    assert main(["validate", str(good), str(bad), "--env", "prod", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert [(f["file"], f["valid"], f["environments"]) for f in report["files"]] == [
        (str(good), True, ["prod"]), (str(bad), False, [])]
    assert report["files"][0]["errors"] == []
    assert [(e["file"], e["pointer"]) for e in report["files"][1]["errors"]] == [(str(bad), "/mirrors/0/tasksMax")]


def test_an_error_that_names_no_file_gets_the_files_name(tmp_path, capsys):
    good, _bad, other = _specs(tmp_path)
    assert main(["validate", str(good), str(other), "--env", "qa"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f'error: {path}: unknown environment "qa": the spec defines dev, staging, prod' for path in (good, other)]


def test_all_valid_exits_0(tmp_path, capsys):
    good, _bad, other = _specs(tmp_path)
    assert main(["validate", str(good), str(other), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True


def test_the_published_hook_selects_dr_specs_only_and_passes_them_at_once(tmp_path, capsys):
    hook = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())[0]
    assert hook["entry"] == "mm2spec validate" and hook.get("pass_filenames", True) and hook["require_serial"]
    assert main(["init", str(tmp_path / "repo")]) == 0
    capsys.readouterr()
    files = sorted(p.relative_to(tmp_path / "repo").as_posix() for p in (tmp_path / "repo").rglob("*") if p.is_file())
    selected = [f for f in files if re.search(hook["files"], f)]
    assert selected == ["repo.dr.yaml"]  # not Pulumi.*.yaml, .pre-commit-config.yaml, the CI workflow
    init_hook = yaml.safe_load((tmp_path / "repo" / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"][0]
    assert [f for f in files if re.search(init_hook["files"], f)] == selected
    extra = tmp_path / "repo" / "staging-extra.dr.yaml"
    extra.write_text((tmp_path / "repo" / "repo.dr.yaml").read_text())
    assert main(["validate", *(str(tmp_path / "repo" / f) for f in selected), str(extra)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
