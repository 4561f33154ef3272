"""``scripts/pulumi``: the CLI's own log of each command is off in the project's PULUMI_HOME unless
asked for (``MM2SPEC_PULUMI_LOGS``), and a PULUMI_HOME the caller gives is left as it is.

A stand-in CLI (``MM2SPEC_CACHE`` points the wrapper at it) reports what it was started with."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path):
    """A copy of the wrapper in a project of its own, and a stand-in CLI that prints what logs is."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    for name in ("pulumi", "versions.env"):
        shutil.copy(ROOT / "scripts" / name, project / "scripts" / name)
    version = next(line.split("=", 1)[1] for line in (ROOT / "scripts" / "versions.env").read_text().splitlines()
                   if line.startswith("PULUMI_VERSION="))
    cli = tmp_path / "cache" / f"pulumi-{version}" / "bin" / "pulumi"
    cli.parent.mkdir(parents=True)
    cli.write_text('#!/usr/bin/env bash\nif [ -d "$PULUMI_HOME/logs" ]; then echo "folder $PULUMI_HOME";'
                   ' elif [ -f "$PULUMI_HOME/logs" ]; then echo "file $PULUMI_HOME"; else echo "none $PULUMI_HOME"; fi\n')
    cli.chmod(0o755)
    return project, tmp_path / "cache"


def run(checkout, **env) -> str:
    project, cache = checkout
    clean = {k: v for k, v in os.environ.items() if k not in ("PULUMI_HOME", "MM2SPEC_PULUMI_LOGS")}
    done = subprocess.run(["bash", str(project / "scripts" / "pulumi"), "version"], capture_output=True, text=True,
                          env={**clean, "MM2SPEC_CACHE": str(cache), "PULUMI_BACKEND_URL": "file:///nowhere", **env},
                          check=True)
    return done.stdout.strip()


def test_the_logs_are_off_in_the_projects_home_and_earlier_ones_go(checkout):
    project, _cache = checkout
    home = project / ".mm2spec" / "pulumi-home"
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "old.log").write_text("x")
    assert run(checkout) == f"file {home}"
    assert run(checkout, MM2SPEC_PULUMI_LOGS="1") == f"none {home}"  # the CLI makes its folder again


def test_a_home_the_caller_gives_is_left_alone_unless_told(checkout, tmp_path):
    home = tmp_path / "my-home"
    (home / "logs").mkdir(parents=True)
    assert run(checkout, PULUMI_HOME=str(home)) == f"folder {home}"
    other = tmp_path / "fresh-home"
    assert run(checkout, PULUMI_HOME=str(other)) == f"none {other}"
    assert run(checkout, PULUMI_HOME=str(other), MM2SPEC_PULUMI_LOGS="0") == f"file {other}"
    assert run(checkout, PULUMI_HOME=str(home), MM2SPEC_PULUMI_LOGS="0") == f"folder {home}"  # a folder of theirs stays
