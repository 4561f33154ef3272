"""The Pulumi CLI that scripts/install-pulumi.sh builds, run through scripts/pulumi, offline.

A throwaway Python project in tmp_path (its own file backend and PULUMI_HOME, never the project's
Pulumi.yaml or .mm2spec/) registers one ``pulumi.dynamic.Resource`` whose provider writes a marker
file on create and removes it on delete, so the test sees the provider really ran: preview, up,
a no-op preview (--expect-no-changes), destroy.

A missing CLI fails the test when ``CI`` is set and skips it with the install hint otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from required import missing_component

from mm2spec.components import components, versions
from mm2spec.errors import ComponentMissing

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
WRAPPER = PROJECT_ROOT / "scripts" / "pulumi"

PROGRAM = '''\
import os

import pulumi
from pulumi.dynamic import CreateResult, ResourceProvider, Resource


class MarkerProvider(ResourceProvider):
    def create(self, props):
        with open(props["path"], "w") as f:
            f.write(props["text"])
        return CreateResult(id_=props["path"], outs={**props, "length": len(props["text"])})

    def delete(self, id, props):
        os.remove(id)


class Marker(Resource):
    length: pulumi.Output[int]

    def __init__(self, name, path, text, opts=None):
        super().__init__(MarkerProvider(), name, {"path": path, "text": text, "length": None}, opts)


marker = Marker("marker", pulumi.Config().require("path"), "hello from a dynamic provider")
pulumi.export("length", marker.length)
'''


@pytest.fixture(scope="module")
def pulumi_bin() -> Path:
    try:
        return components().pulumi_bin
    except ComponentMissing as exc:
        missing_component(f"{exc} (or scripts/install-pulumi.sh alone)")


def _venv() -> Path:
    """The virtualenv the program runs in: the project's .venv, else the one running the tests."""
    venv = PROJECT_ROOT / ".venv"
    return venv if (venv / "bin" / "python").exists() else Path(sys.prefix)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PULUMI_BACKEND_URL=f"file://{tmp_path / 'state'}",
        PULUMI_HOME=str(tmp_path / "pulumi-home"),
        PULUMI_CONFIG_PASSPHRASE="test-passphrase",
        NO_COLOR="1",
    )
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    return env


def _pulumi(tmp_path: Path, *args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(WRAPPER), *args], cwd=cwd, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    if check and done.returncode != 0:
        pytest.fail(f"scripts/pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}",
                    pytrace=False)
    return done


def test_cli_version_matches_the_pin(pulumi_bin: Path, tmp_path: Path) -> None:
    done = _pulumi(tmp_path, "version", cwd=tmp_path)
    assert done.stdout.strip() == f"v{versions()['PULUMI_VERSION']}"
    for name in ("pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python"):
        assert os.access(pulumi_bin / name, os.X_OK), f"{name} is missing or not executable in {pulumi_bin}"


def test_dynamic_resource_preview_up_noop_destroy(pulumi_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    project = tmp_path / "smoke"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(textwrap.dedent(f"""\
        name: smoke
        runtime:
          name: python
          options:
            virtualenv: {_venv()}
        """))
    (project / "__main__.py").write_text(PROGRAM)
    marker = tmp_path / "marker.txt"

    _pulumi(tmp_path, "login", cwd=project)
    _pulumi(tmp_path, "stack", "init", "dev", cwd=project)
    _pulumi(tmp_path, "config", "set", "path", str(marker), cwd=project)

    preview = _pulumi(tmp_path, "preview", "--non-interactive", cwd=project)
    assert "pulumi-python:dynamic:Resource" in preview.stdout
    assert "2 to create" in preview.stdout
    assert not marker.exists(), "preview must not run the provider's create"

    _pulumi(tmp_path, "up", "--yes", "--non-interactive", cwd=project)
    assert marker.read_text() == "hello from a dynamic provider"
    outputs = json.loads(_pulumi(tmp_path, "stack", "output", "--json", cwd=project).stdout)
    assert outputs == {"length": len("hello from a dynamic provider")}

    noop = _pulumi(tmp_path, "preview", "--expect-no-changes", "--non-interactive", cwd=project)
    assert "2 unchanged" in noop.stdout

    _pulumi(tmp_path, "destroy", "--yes", "--non-interactive", cwd=project)
    assert not marker.exists(), "destroy must run the provider's delete"
    assert json.loads(_pulumi(tmp_path, "stack", "output", "--json", cwd=project).stdout) == {}
    _pulumi(tmp_path, "stack", "rm", "dev", "--yes", cwd=project)
