"""``mm2spec promote``: intended overlay differences versus changes carried to the target."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mm2spec.cli import main
from mm2spec.spec.promote import promote

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dr-spec.example.yaml"


@pytest.fixture
def repo(tmp_path):
    """A git repository holding the contract example, committed."""
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (tmp_path / "dr.yaml").write_text(EXAMPLE.read_text())
    git("add", "dr.yaml")
    git("commit", "-qm", "spec")
    return tmp_path


def test_overlay_differences_are_intended_and_nothing_is_carried_without_edits(repo):
    result = promote(str(repo / "dr.yaml"), "staging", "prod")
    assert result.baseline == "git:HEAD"
    assert [(d.path, d.old, d.new) for d in result.intended] == [("/mirrors/primary-to-dr/tasksMax", 8, 30)]
    assert result.carried == () and not result.has_changes


def test_a_base_edit_is_carried_to_prod(repo, capsys):
    spec = repo / "dr.yaml"
    spec.write_text(spec.read_text().replace('topics: [orders, payments, "invoices-.*"]',
                                             'topics: [orders, payments, "invoices-.*", refunds]')
                    .replace("offsetLagMax: 100", "offsetLagMax: 500"))
    assert main(["promote", str(spec), "--from", "staging", "--to", "prod", "--detailed-exitcode",
                 "--format", "json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert {(c["path"], json.dumps(c["new"])) for c in report["carried"]} == {
        ("/mirrors/primary-to-dr/topics", '["orders", "payments", "invoices-.*", "refunds"]'),
        ("/mirrors/primary-to-dr/offsetLagMax", "500")}
    assert [i["path"] for i in report["intended"]] == ["/mirrors/primary-to-dr/tasksMax"]


def test_dev_overlay_differences_point_into_the_overlay(repo):
    result = promote(str(repo / "dr.yaml"), "dev", "prod")
    paths = {d.path for d in result.intended}
    assert "/clusters/primary/bootstrapServers" in paths and "/acls/manage" in paths
    assert "/clusters/primary/security/passwordSecret" in paths  # deleted by dev's null
    dev_line = next(d for d in result.intended if d.path == "/mirrors/primary-to-dr/tasksMax").old_pos.line
    assert "tasksMax: 2" in (repo / "dr.yaml").read_text().splitlines()[dev_line - 1]


def test_explicit_file_baseline_and_unknown_env(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    old.write_text(EXAMPLE.read_text().replace("tasksMax: 30", "tasksMax: 20"))
    result = promote(str(EXAMPLE), "staging", "prod", baseline=str(old))
    assert [(d.path, d.old, d.new) for d in result.carried] == [("/mirrors/primary-to-dr/tasksMax", 20, 30)]
    assert main(["promote", str(EXAMPLE), "--from", "staging", "--to", "qa"]) == 1
    assert 'unknown environment "qa"' in capsys.readouterr().err


def test_bad_git_revision_is_a_clear_error(repo, capsys):
    assert main(["promote", str(repo / "dr.yaml"), "--from", "staging", "--to", "prod",
                 "--baseline", "git:no-such-rev"]) == 1
    assert capsys.readouterr().err.startswith("error: baseline git:no-such-rev: cannot read")
