"""The pre-commit hook and the example CI workflow stay in step with the CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_pre_commit_hook_rejects_an_invalid_spec_and_accepts_the_example(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "examples/dr-spec.example.yaml").read_text().replace("tasksMax: 30", "tasksMax: 0"))
    hook = ROOT / "scripts/git-pre-commit"
    failed = subprocess.run([hook, str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert failed.returncode == 1 and "/mirrors/0/tasksMax: tasksMax must be at least 1" in failed.stderr
    ok = subprocess.run([hook, "examples/dr-spec.example.yaml", "Pulumi.yaml"], cwd=ROOT, capture_output=True)
    assert ok.returncode == 0


def test_workflow_runs_commands_the_cli_has():
    workflow = yaml.safe_load((ROOT / ".github/workflows/dr-spec.yml").read_text())
    steps = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    text = "\n".join(steps)
    for command in ("mm2spec validate", "--format markdown --detailed-exitcode", "mm2spec promote",
                    "pulumi preview", "pulumi up", "pulumi refresh"):
        assert command in text, command
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hooks[0]["entry"] == "mm2spec validate"


def test_pulumi_sdk_pin_matches_the_cli_version():
    from mm2spec.components import versions

    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"pulumi=={versions()["PULUMI_VERSION"]}"' in pyproject


def test_test_modules_have_unique_names():
    """tests/ has no packages: pytest imports each test file by its base name, so a name used in
    both unit/ and integration/ stops the whole run at collection."""
    tests = Path(__file__).resolve().parents[1]
    names = [p.name for p in tests.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
