"""What an integration test does when a real component is missing."""

from __future__ import annotations

import os

import pytest


def missing_component(reason: object) -> None:
    """Fail in CI (a green run must mean the real thing ran), skip elsewhere; always says the fix."""
    if os.environ.get("CI"):
        pytest.fail(str(reason), pytrace=False)
    pytest.skip(str(reason))
