"""Where mm2spec's own data files are: JSON Schemas, bundled playbooks, the Spark job, the pinned
component versions.

The one place code finds them, always through ``importlib.resources``: in a wheel they are package
data (``mm2spec/schemas``, ``mm2spec/playbooks``, ``mm2spec/spark``, ``mm2spec/versions``); in the
checkout's editable install setup.py maps the same package names onto ``schemas/``, ``playbooks/``,
``spark/`` and ``scripts/``. Nothing else builds a path to the checkout.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def _folder(package: str) -> Path:
    """The folder of an installed data package (a real folder: wheels install unzipped)."""
    return Path(str(files(package)))


def schema_path(name: str) -> Path:
    """A JSON Schema by file name, e.g. ``dr-spec.schema.json``."""
    return _folder("mm2spec.schemas") / name


def playbook_dir() -> Path:
    """The folder of bundled playbooks (``verify.yaml``, ``failover.yaml`` ...)."""
    return _folder("mm2spec.playbooks")


def playbook_path(name: str) -> Path:
    """A bundled playbook by name, with or without ``.yaml``."""
    return playbook_dir() / (name if name.endswith(".yaml") else f"{name}.yaml")


def spark_job_dir() -> Path:
    """The Spark mirroring job's folder: ``mirror_job.py``, the ``mm2spark`` package, its Java sources."""
    return _folder("mm2spec.spark")


def spark_job_script() -> Path:
    """The Spark mirroring job's entry point, run as a script by ``spark-submit`` or ``python``."""
    return spark_job_dir() / "mirror_job.py"


def versions_file() -> Path:
    """``versions.env``: the component versions the install scripts and ``mm2spec.components`` share."""
    return _folder("mm2spec.versions") / "versions.env"
