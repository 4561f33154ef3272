"""The Spark mirroring job as a command: which script, which jars, which config, and the hash that
says whether a running job runs the same config."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Mapping

from mm2spec.components import components, require_module
from mm2spec.errors import MirrorError
from mm2spec.resources import spark_job_script


def job_command(config_file: Path, status_file: Path, *, master: str | None = None,
                max_restarts: int | None = None, python: str | None = None) -> list[str]:
    """The command line that runs the job in the foreground."""
    if python is None:
        require_module("pyspark")  # the job runs on this interpreter: say which extra, not a driver-log traceback
    jars = [str(p) for p in components().spark_kafka_jars]  # ComponentMissing names the fix
    command = [python or sys.executable, "-u", str(spark_job_script()), "--config", str(config_file),
               "--status-file", str(status_file), "--jars", ",".join(jars)]
    if master:
        command += ["--master", master]
    if max_restarts is not None:
        command += ["--max-restarts", str(max_restarts)]
    return command


def load_job(job: Mapping[str, Any] | str | Path) -> dict:
    """A job config given as data or as the path of a rendered ``spark-mirror.json``."""
    if isinstance(job, Mapping):
        return dict(job)
    try:
        return json.loads(Path(job).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MirrorError(f"{job}: cannot read the Spark job config: {exc}") from None


def render_job(spec: str | Path, env: str | None) -> dict:
    """The Spark job config of a DR spec for one environment (what ``render`` writes)."""
    from mm2spec.render import spark_job_config
    from mm2spec.spec.load import load_desired_state

    return spark_job_config(load_desired_state(spec, env))


# The job's own default when its config names no master (spark/mm2spark/config.py, SparkSettings).
JOB_DEFAULT_MASTER = "local[2]"


def effective_master(job: Mapping[str, Any], master: str | None) -> str:
    """Where the job's executors run: the override, else its config's ``spark.master``."""
    return master or str((job.get("spark") or {}).get("master", JOB_DEFAULT_MASTER))


def job_name(job: Mapping[str, Any]) -> str:
    return str(job.get("name") or "mirror")


def config_hash(job: Mapping[str, Any], master: str | None) -> str:
    """What a running job runs: its config and the master override. Background and foreground
    starts record the same hash, so neither restarts a job the other started with the same config."""
    return hashlib.sha256(json.dumps({**job, "_master": master}, sort_keys=True).encode()).hexdigest()[:16]
