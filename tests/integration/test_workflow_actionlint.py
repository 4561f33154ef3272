"""The CI workflow as GitHub reads it, checked by actionlint (no runner is reachable here): the one
``mm2spec init`` writes, for the skeleton and for flags with unusual environment names, and this
checkout's example. actionlint checks the workflow syntax, expressions and contexts, job ``needs``,
the inputs of well-known actions and, when shellcheck is on PATH, every ``run:`` script.
scripts/install-actionlint.sh builds it (scripts/setup runs it); missing, the test fails in CI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mm2spec.cli import main
from mm2spec.render.workflow import WORKFLOW_FILE
from required import actionlint

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


def _lint(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(actionlint()), "-no-color", *map(str, files)], capture_output=True, text=True,
                          timeout=60)


def test_actionlint_passes_the_workflows_init_writes_and_the_example(tmp_path, capsys):
    skeleton, flags = tmp_path / "skeleton", tmp_path / "flags"
    assert main(["init", str(skeleton)]) == 0
    assert main(["init", str(flags), "--name", "orders-dr", "--source", "eu-1=k1:9092", "--target", "1dr=k2:9092",
                 "--environments", "qa,Test_1,prod-eu", "--engine", "connect"]) == 0
    capsys.readouterr()
    files = [skeleton / WORKFLOW_FILE, flags / WORKFLOW_FILE, ROOT / WORKFLOW_FILE]
    done = _lint(*files)
    assert done.returncode == 0, f"actionlint found problems:\n{done.stdout}{done.stderr}"


def test_actionlint_reports_a_broken_chain(tmp_path, capsys):
    """The check above can fail: a workflow whose `up` chain names a missing job is refused."""
    repo = tmp_path / "repo"
    assert main(["init", str(repo)]) == 0
    capsys.readouterr()
    broken = tmp_path / "broken.yml"
    broken.write_text((repo / WORKFLOW_FILE).read_text().replace("needs: up-staging", "needs: up-stage"))
    done = _lint(broken)
    assert done.returncode == 1 and 'needs job "up-stage" which does not exist' in done.stdout, done.stdout
