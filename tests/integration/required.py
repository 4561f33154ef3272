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
    """The actionlint binary scripts/install-actionlint.sh builds (at ACTIONLINT_VERSION of versions.env),
    or fail in CI / skip elsewhere, naming the install script."""
    from mm2spec.components import cache_dir, versions

    binary = cache_dir() / f"actionlint-{versions()['ACTIONLINT_VERSION']}" / "bin" / "actionlint"
    if not binary.is_file():
        missing_component(f"actionlint is not installed at {binary}; run scripts/install-actionlint.sh "
                          "(scripts/test runs it)")
    return binary
