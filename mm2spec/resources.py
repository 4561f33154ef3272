"""Where mm2spec's own data files are: JSON Schemas, bundled playbooks, the Spark job.

The one place code finds them; nothing else builds a path to the checkout.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def schema_path(name: str) -> Path:
    """A JSON Schema by file name, e.g. ``dr-spec.schema.json``."""
    return _ROOT / "schemas" / name


def playbook_dir() -> Path:
    """The folder of bundled playbooks (``verify.yaml``, ``failover.yaml`` ...)."""
    return _ROOT / "playbooks"


def playbook_path(name: str) -> Path:
    """A bundled playbook by name, with or without ``.yaml``."""
    return playbook_dir() / (name if name.endswith(".yaml") else f"{name}.yaml")
