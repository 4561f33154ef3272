"""Every file ``mm2spec render`` writes, and the one function that writes them to disk."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

from mm2spec.render.connect import connectors, mm2_properties, worker_properties
from mm2spec.render.kubernetes import kubernetes_files
from mm2spec.render.properties import properties_text
from mm2spec.render.resources import resources, resources_text
from mm2spec.errors import OutputUnwritable
from mm2spec.render.spark import spark_job_config
from mm2spec.spec.document import printable
from mm2spec.spec.model import DesiredState


def render_files(state: DesiredState) -> dict[str, str]:
    """File name -> content for everything ``mm2spec render`` writes."""
    env = state.environment or "base"
    header = (f"Rendered by mm2spec from {Path(state.source_file).name} (environment: {env}). Do not edit:\n"
              "change the DR spec and render again. Secrets are read from the environment (${env:NAME}).")
    files = {
        "connect-distributed.properties": properties_text(worker_properties(state), header),
        "mm2.properties": properties_text(mm2_properties(state), header),
        "spark-mirror.json": json.dumps(spark_job_config(state), indent=2) + "\n",
        "resources.json": json.dumps(resources(state), indent=2) + "\n",
        "resources.txt": resources_text(state),
    }
    for connector in connectors(state):
        files[f"{connector['name']}.json"] = json.dumps(connector, indent=2) + "\n"
    files.update(kubernetes_files(state))
    return files


FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,250}")
"""What a rendered file may be called: names come from the spec (mirror names), so anything that could
climb out of the folder, hide, or break a file system's rules (length, odd characters) is refused."""


def write_files(files: dict[str, str], out_dir: str | Path, private: Iterable[str] = ()) -> list[Path]:
    """Write ``files`` into the folder ``out_dir`` (created if missing), all or nothing.

    Every file is written into a staging folder inside ``out_dir`` first and only then renamed into
    place, so a failed render leaves no file behind (and a folder it created is removed again).
    Files are created with the usual permissions (umask), those named in ``private`` as 0600: only
    a file that holds a secret needs hiding. Problems are ``OutputUnwritable``, never a traceback."""
    out = Path(out_dir)
    _check_writable(files, out)
    created = _make_folders(out)
    staging = None
    try:
        staging = Path(tempfile.mkdtemp(dir=out, prefix=".mm2spec-render-"))
        for name, content in files.items():
            _write_new(staging / name, content, 0o600 if name in private else 0o666)
        for name in sorted(files):
            os.replace(staging / name, out / name)
    except OSError as exc:
        for folder in reversed(created):
            shutil.rmtree(folder, ignore_errors=True)
        raise OutputUnwritable(f"cannot write into {printable(str(out))}: {exc.strerror or exc}; nothing was written") \
            from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return [out / name for name in sorted(files)]


def _check_writable(files: dict[str, str], out: Path) -> None:
    for name in files:
        if not FILE_NAME.fullmatch(name):
            raise OutputUnwritable(f'cannot write a file named "{printable(name)[:80]}": '
                                   "use letters, digits, '.', '_' and '-' in names that reach file names")
    if out.exists() and not out.is_dir():
        raise OutputUnwritable(f"--out {printable(str(out))} is not a folder: give a folder (it is created if missing)")
    for name in files:
        if (out / name).is_dir():
            raise OutputUnwritable(f"{printable(str(out / name))} is a folder: move it away to render there")


def _make_folders(out: Path) -> list[Path]:
    """Create ``out`` and missing parents; the folders created, outermost first."""
    missing = [folder for folder in (out, *out.parents) if not folder.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputUnwritable(f"cannot create {printable(str(out))}: {exc.strerror or exc}") from None
    return missing


def _write_new(path: Path, content: str, mode: int) -> None:
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w", encoding="utf-8") as handle:
        handle.write(content)
