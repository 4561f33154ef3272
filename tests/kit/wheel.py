"""mm2spec as a user installs it: the freshly built wheel (and sdist) in a fresh virtualenv outside
the checkout, and its commands run with nothing pointing back at the checkout (the package tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(dist: Path, timeout: float) -> tuple[list[Path], list[Path]]:
    """``python -m build`` of the checkout into ``dist``: (wheels, sdists), as PyPI users get them
    (no build/ folder is left in the checkout)."""
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=timeout)
    return sorted(dist.glob("mm2spec-*.whl")), sorted(dist.glob("mm2spec-*.tar.gz"))


def install(work: Path, wheel: Path, extras: str, timeout: float) -> Path:
    """A new virtualenv ``work/venv`` with ``wheel`` installed (``extras``: "" or e.g. "[spark]")."""
    env = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=timeout)
    subprocess.run([str(env / "bin" / "pip"), "install", "--quiet", f"{wheel}{extras}"],
                   check=True, capture_output=True, timeout=timeout)
    return env


def run(venv: Path, cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """A command of the installed package, in ``cwd``, without PYTHONPATH or VIRTUAL_ENV."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
