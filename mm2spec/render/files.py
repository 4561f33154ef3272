"""Every file ``mm2spec render`` writes, and the one function that writes them to disk."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from mm2spec.render.connect import connectors, mm2_properties, worker_properties
from mm2spec.render.properties import properties_text
from mm2spec.render.resources import resources, resources_text
from mm2spec.render.spark import spark_job_config
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
    return files


def write_files(files: dict[str, str], out_dir: str | Path) -> list[Path]:
    """Write files atomically (temp file + rename), so a failed render never leaves half a file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in sorted(files.items()):
        path = out / name
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(path)
    return written
