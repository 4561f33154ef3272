"""``pip install mm2spec`` is the light core: validate, render, promote and plan run without pyspark,
pulumi or matplotlib, and a command that needs one of them names the extra to install.

The CLI runs in a subprocess whose ``sitecustomize`` (on PYTHONPATH) puts a finder first on
``sys.meta_path`` that refuses the blocked modules, as if they were not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mm2spec.components import EXTRAS, module_missing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
OPTIONAL = ("pyspark", "pulumi", "matplotlib")
#: One CLI start in a subprocess on a busy machine.
CLI_TIMEOUT = 120

BLOCKER = textwrap.dedent('''
    import os, sys

    BLOCKED = set(os.environ["MM2SPEC_TEST_BLOCKED"].split(","))


    class NotInstalled:
        """Refuses the blocked top-level modules, as an environment without them would."""

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, NotInstalled())
''')


@pytest.fixture
def without(tmp_path):
    """Runs Python code with the given modules uninstallable; ``mm2spec(blocked, *args)`` runs the CLI."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)

    def python(blocked: tuple[str, ...], code: str, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(site), "MM2SPEC_TEST_BLOCKED": ",".join(blocked)}
        return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=CLI_TIMEOUT)

    def mm2spec(blocked: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
        return python(blocked, "import sys; from mm2spec.cli import main; sys.exit(main(sys.argv[1:]))", *args)

    mm2spec.python = python
    return mm2spec


def test_the_blocker_really_blocks(without):
    for module in OPTIONAL:
        done = without.python(OPTIONAL, f"import {module}")
        assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr, module


def test_the_core_commands_run_without_the_extras(without, tmp_path):
    blocked = (*OPTIONAL, "confluent_kafka")  # the offline commands do not even need the Kafka client
    assert without(blocked, "--help").returncode == 0
    done = without(blocked, "validate", str(EXAMPLE))
    assert done.returncode == 0 and "valid (base, dev, staging, prod)" in done.stdout, done.stderr
    done = without(blocked, "render", str(EXAMPLE), "--env", "prod", "--out", str(tmp_path / "out"))
    assert done.returncode == 0 and (tmp_path / "out" / "spark-mirror.json").is_file(), done.stderr
    done = without(blocked, "promote", str(EXAMPLE), "--from", "staging", "--to", "prod", "--baseline", str(EXAMPLE))
    assert done.returncode == 0 and "none: prod already has this spec" in done.stdout, done.stderr
    for command in ("dev", "mirror", "drill", "plan", "verify", "failover", "failback", "playbook"):
        assert without(blocked, command, "--help").returncode == 0, command


def test_plan_reaches_the_clusters_without_the_extras(without, tmp_path):
    # Nothing listens on port 1: the plan gets as far as asking the clusters, which is all the core needs.
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE.read_text().replace("127.0.0.1:19092", "127.0.0.1:1").replace("127.0.0.1:29092", "127.0.0.1:1"))
    done = without(OPTIONAL, "plan", str(spec), "--env", "dev", "--timeout", "1")
    assert done.returncode == 1 and "unreachable" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "mm2spec[" not in done.stderr


@pytest.mark.parametrize("command,extra", [
    (["mirror", str(EXAMPLE), "--env", "dev"], "spark"),
    (["mirror", str(EXAMPLE), "--env", "dev", "--detach"], "spark"),
    (["drill", str(EXAMPLE), "--env", "dev"], "drill"),
])
def test_a_command_whose_extra_is_missing_says_which_to_install(without, command, extra):
    done = without(OPTIONAL, *command)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"pip install 'mm2spec[{extra}]'" in done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


@pytest.mark.parametrize("missing,expected", [
    ("pulumi.dynamic", "error: pulumi is not installed (provisions through Pulumi): pip install 'mm2spec[pulumi]'"),
    ("yaml", "error: the Python module yaml is not installed, and mm2spec needs it: reinstall mm2spec"),
    ("mm2spec.nowhere", "internal error: ModuleNotFoundError"),  # its own module: a bug, not an extra
])
def test_an_import_failing_inside_a_command_is_named_by_the_same_table(missing, expected, monkeypatch, capsys):
    from mm2spec.cli import main

    def late_import(_args):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr("mm2spec.cli.spec.cmd_validate", late_import)
    assert main(["validate", str(EXAMPLE)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(expected) and "Traceback" not in err, err


@pytest.mark.parametrize("module,extra", [(module, extra) for module, (extra, _) in EXTRAS.items()])
def test_every_optional_library_names_its_extra(module, extra):
    assert f"pip install 'mm2spec[{extra}]'" in str(module_missing(f"{module}.sub"))


def test_the_extras_in_pyproject_are_the_table():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for module, (extra, _) in EXTRAS.items():
        assert any(dep.startswith(module) for dep in extras[extra]), extra
        assert not any(dep.startswith(module) for dep in project["dependencies"]), module
    assert extras["all"] == [f"mm2spec[{','.join(extra for extra, _ in EXTRAS.values())}]"]
    assert "dev" in extras
