"""Style that a tool can check is checked by the tool: ruff, with pyproject.toml's rule set, over
every Python file of the checkout. A failure shows ruff's own report; ``.venv/bin/ruff check --fix``
fixes what is marked ``[*]``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    # The ruff of this interpreter's environment (the `dev` extra pins it), not one on PATH; no
    # cache, so the test writes nothing into the checkout.
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    if "No module named ruff" in result.stderr:
        pytest.fail("ruff is not installed: scripts/setup installs it (pip install -e '.[dev]')", pytrace=False)
    if result.returncode != 0:
        pytest.fail(result.stdout + result.stderr, pytrace=False)
