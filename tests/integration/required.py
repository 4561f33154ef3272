"""What an integration test does when a real component is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def missing_component(reason: object) -> None:
    """Fail in CI (a green run must mean the real thing ran), skip elsewhere; always says the fix."""
    if os.environ.get("CI"):
        pytest.fail(str(reason), pytrace=False)
    pytest.skip(str(reason))


def actionlint() -> Path:
    """The actionlint binary scripts/setup builds (``components().actionlint``), or fail in CI / skip
    elsewhere, naming the fix."""
    from mm2spec.components import components
    from mm2spec.errors import ComponentMissing

    try:
        return components().actionlint
    except ComponentMissing as exc:
        missing_component(exc)
        raise  # missing_component always raises (pytest's fail or skip)
