"""mm2spec as a user installs it: ``python -m build`` makes a wheel and an sdist, the wheel goes into
a fresh virtualenv outside the repository (with the ``spark`` extra; ``test_package_core.py`` installs
the core alone), and its ``mm2spec`` runs from a temporary directory:
``--version``, ``validate`` and ``render`` on the example spec, ``plan`` against real clusters,
and ``mirror`` running the Spark job shipped inside the wheel.

Nothing here may reach the checkout: the commands run with the temporary directory as working
directory and without PYTHONPATH, and the test checks that the package, its schemas and the Spark
job load from the new virtualenv.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from mm2spec import __version__
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.runtime.process import tail
from mm2spec.spec.model import Cluster
from specs import spec_for
from tests.kit import wheel

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
#: Building the wheel and installing it with its dependencies (pyspark alone is ~300 MB, from
#: pip's cache after scripts/setup) takes a minute or two; ten cover a loaded machine.
INSTALL_TIMEOUT = 600
#: One CLI call on the installed package (a plan reads two clusters; the rest is offline).
CLI_TIMEOUT = 180
#: How long ``mirror --detach --wait`` waits for the job's first micro-batch: a cold Spark driver
#: needs tens of seconds, minutes on two busy cores (as runtime.deployment's own start budget).
MIRROR_START_TIMEOUT = 300


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the freshly built wheel of mm2spec installed (not editable)."""
    work = tmp_path_factory.mktemp("package")
    wheels, sdists = wheel.build(work / "dist", INSTALL_TIMEOUT)
    assert [w.name for w in wheels] == [f"mm2spec-{__version__}-py3-none-any.whl"]
    assert [s.name for s in sdists] == [f"mm2spec-{__version__}.tar.gz"]
    # With the spark extra: this module runs the Spark job (test_package_core.py installs no extra).
    return wheel.install(work, wheels[0], "[spark]", INSTALL_TIMEOUT)


def run(venv: Path, cwd: Path, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess:
    """A command of the installed package, in ``cwd``, with nothing pointing at the checkout."""
    return wheel.run(venv, cwd, *args, timeout=timeout)


def test_installed_package_loads_from_the_venv_not_the_checkout(venv, tmp_path):
    probe = ("import json, mm2spec, mm2spec.resources as r; print(json.dumps([mm2spec.__file__, "
             "str(r.schema_path('dr-spec.schema.json')), str(r.spark_job_script()), str(r.versions_file())]))")
    done = run(venv, tmp_path, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    for path in map(Path, json.loads(done.stdout)):
        assert path.is_file() and path.is_relative_to(venv), path
    assert run(venv, tmp_path, "mm2spec", "--version").stdout.strip() == f"mm2spec {__version__}"


def test_validate_and_render_the_example_from_another_directory(venv, tmp_path):
    shutil.copy(ROOT / "examples" / "dr-spec.example.yaml", tmp_path / "payments.yaml")
    done = run(venv, tmp_path, "mm2spec", "validate", "payments.yaml")
    assert done.returncode == 0 and "valid (base, dev, staging, prod)" in done.stdout, done.stderr
    done = run(venv, tmp_path, "mm2spec", "render", "payments.yaml", "--env", "prod", "--out", "out")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "spark-mirror.json").read_text())["environment"] == "prod"

    # Errors from the installed schema point at the file, line and field, without a traceback.
    (tmp_path / "bad.yaml").write_text((tmp_path / "payments.yaml").read_text().replace("tasksMax: 30", "tasksMax: 0"))
    bad = run(venv, tmp_path, "mm2spec", "validate", "bad.yaml")
    assert bad.returncode == 1 and "bad.yaml:" in bad.stderr and "/tasksMax" in bad.stderr
    assert "Traceback" not in bad.stderr


def _spec(kafka_pair, tmp_path: Path, topic: str) -> Path:
    spec = spec_for(kafka_pair, [topic], name="it-package")
    spec["spark"] |= {"master": "local[1]", "checkpointLocation": str(tmp_path / "checkpoints")}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_plan_and_mirror_against_real_clusters(venv, tmp_path, kafka_pair, unique_name):
    topic = unique_name("pkg")
    KafkaAdmin(Cluster("primary", (kafka_pair.primary.bootstrap,))).create_topic(topic, 1, -1, {})
    spec = _spec(kafka_pair, tmp_path, topic)

    done = run(venv, tmp_path, "mm2spec", "plan", spec.name, "--format", "json", "--detailed-exitcode")
    assert done.returncode == 2, done.stderr  # changes: the target topic is missing on dr
    plan = json.loads(done.stdout)
    assert topic in json.dumps(plan)

    # The Spark job shipped in the wheel runs (the connector jars come from $MM2SPEC_CACHE).
    state = tmp_path / "job"
    started = run(venv, tmp_path, "mm2spec", "mirror", spec.name, "--detach", "--state-dir", str(state),
                  "--wait", str(MIRROR_START_TIMEOUT), timeout=MIRROR_START_TIMEOUT + CLI_TIMEOUT)
    try:
        assert started.returncode == 0, started.stderr + tail(state / "driver.log", 60)
        status = run(venv, tmp_path, "mm2spec", "mirror", spec.name, "--status", "--state-dir", str(state))
        assert status.returncode == 0 and json.loads(status.stdout)["running"] is True, status.stdout
        pid = json.loads((state / "driver.pid").read_text())["pid"]
        driver = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert any(arg.endswith("mirror_job.py") and Path(arg).is_relative_to(venv) for arg in driver), driver
    finally:
        stopped = run(venv, tmp_path, "mm2spec", "mirror", spec.name, "--stop", "--state-dir", str(state))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
