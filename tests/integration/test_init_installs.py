"""A team's first day, from a release: ``scripts/release`` builds and checks the wheel (no build
warning, ``twine check``, a clean install that runs ``--version``, ``validate`` and ``render``), and
``mm2spec init --package <that wheel>`` writes a repository that installs and runs it:
``requirements.txt`` installs into the program's ``.venv``, the pre-commit hook runs on the files
pre-commit would give it, and the CI workflow's own shell steps that need no cloud (install,
validate, the drift check's ``mm2spec plan`` against the dev clusters) pass on a fresh copy.

Nothing is downloaded: the new virtualenvs see this checkout's installed dependencies (not mm2spec
itself) through a ``.pth`` file, where a team's pip would fetch them from the index, and pip runs with
``PIP_NO_INDEX``. ``mm2spec`` comes only from the wheel (the test checks where it loads from).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from mm2spec import __version__
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.render.workflow import WORKFLOW_FILE
from mm2spec.spec.model import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
#: scripts/release: a build (~15 s), twine check, a clean install with dependencies from the index
#: (pip's cache after scripts/setup), three CLI calls; ten minutes cover a loaded machine.
RELEASE_TIMEOUT = 600
STEP_TIMEOUT = 300
PIP = [sys.executable, "-m", "pip"]
#: What a team's pip would fetch from the index: every installed distribution of this checkout's
#: virtualenv but mm2spec (its editable install) and the virtualenv's own tools.
NOT_A_DEPENDENCY = re.compile(r"(mm2spec|__editable__|pip|setuptools|_distutils_hack|pkg_resources)([-_.].*)?$|.*\.pth$")


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = STEP_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _dependencies(folder: Path) -> Path:
    """A folder of links to the installed dependencies (the stand-in for the package index)."""
    folder.mkdir()
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_relative_to(ROOT / ".venv")))
    for entry in site.iterdir():
        if not NOT_A_DEPENDENCY.match(entry.name) and entry.name != "__pycache__":
            (folder / entry.name).symlink_to(entry)
    return folder


def _venv(where: Path, dependencies: Path) -> Path:
    """An empty virtualenv at ``where`` that finds ``dependencies`` as installed; without a pip of its
    own (ensurepip takes seconds): ``PIP`` installs into it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=STEP_TIMEOUT)
    site = where / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "zz-dependencies.pth").write_text(f"{dependencies}\n")
    return where


def test_a_repository_from_init_package_installs_the_released_wheel_and_runs(kafka_pair, tmp_path):
    release = _run([str(ROOT / "scripts" / "release"), str(tmp_path / "dist")], ROOT, _environment(PIP_NO_INDEX="0"),
                   RELEASE_TIMEOUT)
    assert release.returncode == 0, release.stdout + release.stderr
    wheel = tmp_path / "dist" / f"mm2spec-{__version__}-py3-none-any.whl"
    assert wheel.is_file() and (tmp_path / "dist" / f"mm2spec-{__version__}.tar.gz").is_file()

    run_id = uuid.uuid4().hex[:6]
    src, dst, topic, name = f"src{run_id}", f"dst{run_id}", f"orders-{run_id}", f"installs-{run_id}"
    KafkaAdmin(Cluster(src, (kafka_pair.primary.bootstrap,))).create_topic(topic, 1, -1, {})
    repo = tmp_path / "repo"
    init = _run([str(ROOT / ".venv" / "bin" / "mm2spec"), "init", str(repo), "--name", name, "--package", str(wheel),
                 "--source", f"{src}={kafka_pair.primary.bootstrap}", "--target", f"{dst}={kafka_pair.dr.bootstrap}",
                 "--topic", topic, "--environments", "dev,prod"], tmp_path, _environment())
    assert init.returncode == 0, init.stderr
    spec = f"{name}.dr.yaml"
    dependencies = _dependencies(tmp_path / "index")
    # A fresh checkout for CI before anything is installed in the repository (no .venv in it).
    checkout = tmp_path / "ci-checkout"
    shutil.copytree(repo, checkout)

    # Set up, as the repository's README says: requirements.txt into the program's .venv.
    venv = _venv(repo / ".venv", dependencies)
    installed = _run([*PIP, "--python", str(venv / "bin" / "python"), "install", "--quiet", "-r", "requirements.txt"],
                     repo, _environment())
    assert installed.returncode == 0, installed.stderr
    where = _run([str(venv / "bin" / "python"), "-c", "import mm2spec; print(mm2spec.__file__)"], tmp_path, _environment())
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    assert (venv / "bin" / "pulumi-resource-mm2spec").is_file()

    # The pre-commit hook, as pre-commit runs it: its entry with the staged files its pattern selects.
    shutil.copy(repo / spec, repo / "second.dr.yaml")
    hook = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"][0]
    staged = [spec, "second.dr.yaml", "Pulumi.dev.yaml"]
    selected = [path for path in staged if re.search(hook["files"], path)]
    assert selected == [spec, "second.dr.yaml"]
    checked = _run([*shlex.split(hook["entry"]), *selected], repo, _environment())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert spec in checked.stdout and "second.dr.yaml" in checked.stdout, checked.stdout

    # CI: the workflow's own steps, with its env, in bash -e as Actions runs `run:` (PATH gains what a
    # step adds to GITHUB_PATH). The runner's pip would fetch the dependencies; here they are linked in
    # (the install step's `python -m venv .venv` keeps the link and adds a pip).
    workflow = yaml.safe_load((checkout / WORKFLOW_FILE).read_text())
    jobs = workflow["jobs"]
    steps = {step["name"]: step["run"] for job in (jobs["review"], jobs["drift"]) for step in job["steps"] if "run" in step}
    _venv(checkout / ".venv", dependencies)
    github_path = tmp_path / "github-path"
    github_path.write_text("")
    env = _environment(**{k: v for k, v in workflow["env"].items() if "${{" not in str(v)},
                       ENVIRONMENT="dev", GITHUB_PATH=str(github_path))
    results = {}
    for step in ("Install mm2spec (the Pulumi program's virtualenv)", "Validate", "Drift from the spec (mm2spec plan)"):
        env["PATH"] = os.pathsep.join([*reversed(github_path.read_text().split()), os.environ["PATH"]])
        results[step] = _run(["bash", "-e", "-c", steps[step]], checkout, env)
    install, validate, plan = results.values()
    assert install.returncode == 0, install.stderr
    assert validate.returncode == 0 and f"{spec}: valid (dev)" in validate.stdout, validate.stdout + validate.stderr
    # The target topic is not there yet: the drift check fails the run, naming it.
    assert plan.returncode == 2 and topic in plan.stdout, plan.stdout + plan.stderr
    assert "Traceback" not in plan.stderr
