"""``pip install mm2spec`` with no extra, as a team's pre-commit hook or review job installs it: the
freshly built wheel goes into a fresh virtualenv (its dependencies from the package index), and the
core commands run from a temporary directory while pyspark, pulumi and matplotlib are absent.

Needs no cluster: ``plan`` is run against an address where nothing listens, which is as far as a
plan gets without one (it has loaded the spec, the Kafka client and asked the cluster).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import wheel

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
#: Building the wheel and installing the core (pyyaml, jsonschema, confluent-kafka) from the index.
INSTALL_TIMEOUT = 600
#: One CLI call on the installed package; all offline or failing fast.
CLI_TIMEOUT = 120
OPTIONAL = ("pyspark", "pulumi", "matplotlib")


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the freshly built wheel of mm2spec installed without any extra."""
    work = tmp_path_factory.mktemp("package-core")
    wheels, _ = wheel.build(work / "dist", INSTALL_TIMEOUT)
    return wheel.install(work, wheels[0], "", INSTALL_TIMEOUT)


def run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of the installed package, in ``cwd``, with nothing pointing at the checkout."""
    return wheel.run(venv, cwd, *args, timeout=CLI_TIMEOUT)


def test_the_core_install_has_none_of_the_heavy_libraries(core, tmp_path):
    probe = ("import importlib.util, json; "
             f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {list(OPTIONAL)!r}}}))")
    done = run(core, tmp_path, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {module: False for module in OPTIONAL}
    installed = run(core, tmp_path, "pip", "list", "--format", "json")
    names = {row["name"].lower() for row in json.loads(installed.stdout)}
    assert {"mm2spec", "pyyaml", "jsonschema", "confluent-kafka"} <= names
    assert not names & {"pyspark", "pulumi", "matplotlib", "py4j", "grpcio", "numpy"}, names


def test_validate_render_promote_and_plan_run_on_the_core(core, tmp_path):
    shutil.copy(ROOT / "examples" / "dr-spec.example.yaml", tmp_path / "payments.yaml")
    assert run(core, tmp_path, "mm2spec", "--help").returncode == 0
    done = run(core, tmp_path, "mm2spec", "validate", "payments.yaml")
    assert done.returncode == 0 and "valid (base, dev, staging, prod)" in done.stdout, done.stderr
    done = run(core, tmp_path, "mm2spec", "render", "payments.yaml", "--env", "prod", "--out", "out")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "spark-mirror.json").read_text())["environment"] == "prod"
    done = run(core, tmp_path, "mm2spec", "promote", "payments.yaml", "--from", "staging", "--to", "prod",
               "--baseline", "payments.yaml", "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout)["hasChanges"] is False, done.stderr

    # Nothing listens on port 1: plan loads the Kafka client and asks, so the core is all it needs.
    unreachable = (tmp_path / "payments.yaml").read_text().replace("127.0.0.1:19092", "127.0.0.1:1")
    (tmp_path / "nowhere.yaml").write_text(unreachable.replace("127.0.0.1:29092", "127.0.0.1:1"))
    done = run(core, tmp_path, "mm2spec", "plan", "nowhere.yaml", "--env", "dev", "--timeout", "2")
    assert done.returncode == 1 and "unreachable" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command,extra", [(["mirror", "payments.yaml", "--env", "dev"], "spark"),
                                           (["drill", "payments.yaml", "--env", "dev"], "drill")])
def test_a_command_that_needs_an_extra_names_it(core, tmp_path, command, extra):
    shutil.copy(ROOT / "examples" / "dr-spec.example.yaml", tmp_path / "payments.yaml")
    done = run(core, tmp_path, "mm2spec", *command)
    assert done.returncode == 1 and f"pip install 'mm2spec[{extra}]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
