"""Start, stop and inspect the Spark mirroring job (``spark/mirror_job.py``) as a background process:
what ``mm2spec mirror`` and the Pulumi Spark deployment resource call.

The driver always runs on this machine (client deploy mode: Python apps on a standalone cluster
cannot run in cluster mode); ``spark.master`` picks where executors run. A started job keeps its
files in a state folder (default ``.mm2spec/spark/<job name>``): ``job.json`` (the config it
runs; ``${env:NAME}`` placeholders, never resolved secrets), ``driver.pid``, ``driver.log`` and
``status.json`` (the figures the job's StreamingQueryListener publishes).

``paused-flows.json`` (:func:`pause_flows`, :func:`resume_flows`) names flows whose queries the
running job keeps stopped: its control loop reads it every turn and at start, so one flow (one
direction of an active-active pair, one source of a fan-in) stops while the others mirror on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mm2spec.errors import MirrorError
from mm2spec.runtime.job import config_hash, effective_master, job_command, job_name, load_job
from mm2spec.runtime.process import POLL_SECONDS, pid_alive, reap

DEFAULT_STATE_ROOT = Path(".mm2spec") / "spark"

# SIGTERM lets the job stop its queries and flush its offset syncs and checkpoints; a batch in
# flight on a loaded machine can take tens of seconds, so wait a minute before SIGKILL.
STOP_GRACE_SECONDS = 60.0
CONTROL_FILE = "paused-flows.json"
"""In the state folder: ``{"paused": [flow names]}``; the job's ``--control-file``."""

# A driver exits within a second of its last batch; look often so a stop returns promptly.
STOP_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class MirrorDeployment:
    """A job started by :func:`start`; plain data, safe to keep in Pulumi state."""

    name: str
    """The job's name (``name`` of the job config)."""
    state_dir: str
    """The folder with job.json, driver.pid, driver.log and status.json."""
    pid: int
    """The driver process (a Python process; the Spark JVM is its child and exits with it)."""
    master: str
    """Where executors run: local[N] or spark://host:port."""
    config_hash: str
    """Hash of the job config it runs; a different config means a restart."""

    @property
    def log_file(self) -> Path:
        return Path(self.state_dir) / "driver.log"

    @property
    def status_file(self) -> Path:
        return Path(self.state_dir) / "status.json"


@dataclass(frozen=True)
class MirrorStatus:
    """What :func:`status` found."""

    running: bool
    """The driver process is alive."""
    pid: int | None
    """The driver's pid from ``driver.pid`` (None when the job never started here)."""
    state: str
    """running | starting | restarting | stopping | stopped | failed | absent (from the status file, or absent)."""
    flows: dict = field(default_factory=dict)
    """Per flow: state (``running``, ``paused``, ...), delivery, records/s, bytes/s, replication latency,
    per-topic figures, errors, ..."""
    updated_at: float | None = None
    """When the job last wrote its status file (seconds since the epoch)."""


def state_dir_of(name: str, state_dir: str | Path | None) -> Path:
    """The job's state folder: the one given, or ``.mm2spec/spark/<name>`` under the working directory."""
    return Path(state_dir) if state_dir else (DEFAULT_STATE_ROOT / name).resolve()


def _folder(deployment: MirrorDeployment | str | Path) -> Path:
    return Path(deployment.state_dir if isinstance(deployment, MirrorDeployment) else deployment)


def _read_pid(state_dir: Path) -> dict | None:
    try:
        return json.loads((state_dir / "driver.pid").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _record_start(folder: Path, pid: int, digest: str, master: str) -> None:
    (folder / "driver.pid").write_text(json.dumps({"pid": pid, "config_hash": digest, "master": master,
                                                   "started": time.time()}))


def _prepare(data: dict, folder: Path, master: str | None, max_restarts: int | None) -> list[str]:
    """Write the config the job will run and return its command line."""
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / "job.json"
    config_file.write_text(json.dumps(data, indent=2) + "\n")
    command = job_command(config_file, folder / "status.json", master=master, max_restarts=max_restarts)
    return [*command, "--control-file", str(folder / CONTROL_FILE)]


def start(job: Mapping[str, Any] | str | Path, *, state_dir: str | Path | None = None,
          master: str | None = None, env: Mapping[str, str] | None = None,
          max_restarts: int | None = None, wait_running: float | None = None) -> MirrorDeployment:
    """Start the job in the background (idempotent: the same config already running is kept; a
    different one is stopped and replaced). ``env`` adds variables, e.g. the ``${env:...}``
    secrets. ``wait_running`` seconds: wait until its first query runs (MirrorError if it dies)."""
    data = load_job(job)
    name = job_name(data)
    folder = state_dir_of(name, state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    digest = config_hash(data, master)
    current = _read_pid(folder)
    if current and pid_alive(current.get("pid")):
        if current.get("config_hash") == digest:
            return MirrorDeployment(name, str(folder), current["pid"], current.get("master", ""), digest)
        stop(folder)
    (folder / "status.json").unlink(missing_ok=True)
    command = _prepare(data, folder, master, max_restarts)
    with open(folder / "driver.log", "ab") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **(env or {})}, start_new_session=True, cwd=os.getcwd())
    runs_on = effective_master(data, master)
    _record_start(folder, process.pid, digest, runs_on)
    deployment = MirrorDeployment(name, str(folder), process.pid, runs_on, digest)
    if wait_running:
        wait_until_running(deployment, wait_running, process)
    return deployment


def wait_until_running(deployment: MirrorDeployment, timeout: float, process: subprocess.Popen | None = None) -> MirrorStatus:
    """Wait until the job and every flow report ``running``; MirrorError if it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = status(deployment.state_dir)
        if not current.running or (process is not None and process.poll() is not None):
            raise MirrorError(f"the mirroring job exited; see {deployment.log_file}")
        flows = current.flows.values()
        # A paused flow stays paused at a start (paused-flows.json): it counts as started.
        if current.state == "running" and flows and all(f.get("state") in ("running", "paused") for f in flows):
            return current
        time.sleep(POLL_SECONDS)
    raise MirrorError(f"the mirroring job did not start within {timeout:.0f}s; see {deployment.log_file}")


def paused_flows(deployment: MirrorDeployment | str | Path) -> set[str]:
    """The flows the control file keeps paused (none when there is no file)."""
    try:
        data = json.loads((_folder(deployment) / CONTROL_FILE).read_text())
    except FileNotFoundError:
        return set()
    except (OSError, json.JSONDecodeError) as exc:
        raise MirrorError(f"{_folder(deployment) / CONTROL_FILE}: unreadable ({exc}); delete it to resume every "
                          "flow, or write {\"paused\": [FLOW, ...]}") from None
    return {str(name) for name in (data.get("paused") or [])} if isinstance(data, dict) else set()


def _write_paused(folder: Path, names: set[str]) -> None:
    """Written whole then renamed: the job never reads half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CONTROL_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"paused": sorted(names)}) + "\n")
    os.replace(tmp, path)


def pause_flows(deployment: MirrorDeployment | str | Path, names) -> set[str]:
    """Pause these flows (the running job stops their queries within a turn of its control loop; a job
    started later keeps them paused). Returns every paused flow."""
    folder = _folder(deployment)
    paused = paused_flows(folder) | set(names)
    _write_paused(folder, paused)
    return paused


def resume_flows(deployment: MirrorDeployment | str | Path, names) -> set[str]:
    """Resume these flows (each query starts again from its checkpoint, or from the start-offsets
    file a failback left). Returns the flows still paused."""
    folder = _folder(deployment)
    paused = paused_flows(folder)
    if paused & set(names):
        paused -= set(names)
        _write_paused(folder, paused)
    return paused


def wait_flows(deployment: MirrorDeployment | str | Path, names, state: str, timeout: float) -> MirrorStatus:
    """Wait until the running job's status file shows each of ``names`` in ``state`` (``paused``,
    ``running``); MirrorError if the job exits or ``timeout`` seconds pass."""
    folder = _folder(deployment)
    deadline = time.monotonic() + timeout
    while True:
        current = status(folder)
        if not current.running:
            raise MirrorError(f"the mirroring job exited; see {folder / 'driver.log'}")
        waiting = sorted(n for n in names if (current.flows.get(n) or {}).get("state") != state)
        if not waiting:
            return current
        if time.monotonic() >= deadline:
            raise MirrorError(f"the Spark job did not show {', '.join(waiting)} {state} within {timeout:.0f}s; "
                              f"see {folder / 'driver.log'}")
        time.sleep(POLL_SECONDS)


def stop(deployment: MirrorDeployment | str | Path, timeout: float = STOP_GRACE_SECONDS) -> bool:
    """Stop the job: SIGTERM (queries stop, internal records flushed), SIGKILL after ``timeout``.
    Returns True if a running job was stopped, False if none was running."""
    folder = _folder(deployment)
    current = _read_pid(folder)
    pid = current.get("pid") if current else None
    if not pid_alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        reap(pid)
        time.sleep(STOP_POLL_SECONDS)
    if pid_alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)  # the job's own session: driver and its Spark JVM
        except (ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        reap(pid)
        _record_forced_stop(folder, timeout)
    return True


def _record_forced_stop(folder: Path, grace: float) -> None:
    """After a SIGKILL the job could not record its stop: record it here, marked as forced.

    The stop was asked for and the job is gone; its checkpoints hold its progress either way (a
    stop in the middle of a batch replays that batch at the next start). Left as "running", the
    status would read as a crash."""
    path = folder / "status.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        data = {}
    if data.get("state") == "failed":
        return  # the job recorded a failure of its own before it was killed: keep it
    data.update(state="stopped", forcedStop=f"killed after {grace:.0f} s without a clean stop", updatedAt=time.time())
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def status(deployment: MirrorDeployment | str | Path) -> MirrorStatus:
    """Whether the job runs, and the figures of its last status file."""
    folder = _folder(deployment)
    current = _read_pid(folder)
    pid = current.get("pid") if current else None
    running = pid_alive(pid)
    try:
        data = json.loads((folder / "status.json").read_text())
    except (OSError, json.JSONDecodeError):
        data = {}
    state = data.get("state") or ("starting" if running else "absent")
    if not running and state == "stopping":
        state = "stopped"  # killed while it stopped, as asked: its checkpoints hold its progress
    elif not running and state in ("running", "starting", "restarting"):
        state = "failed"  # the process is gone without recording a clean stop
    return MirrorStatus(running=running, pid=pid, state=state, flows=data.get("flows") or {},
                        updated_at=data.get("updatedAt"))


def deployed_job(name: str, state_dir: str | Path | None = None) -> dict | None:
    """The config of the job running under ``name`` (its ``job.json``), or None when none runs.

    ``mm2spec plan`` compares it with the rendered config to show the Spark deployment's drift.
    """
    folder = state_dir_of(name, state_dir)
    if not status(folder).running:
        return None
    try:
        return json.loads((folder / "job.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def run_foreground(job: Mapping[str, Any], *, state_dir: str | Path | None = None, master: str | None = None,
                   max_restarts: int | None = None) -> int:
    """Run the job attached to this terminal until it ends or Ctrl-C/SIGTERM (forwarded)."""
    data = dict(job)
    folder = state_dir_of(job_name(data), state_dir)
    command = _prepare(data, folder, master, max_restarts)
    process = subprocess.Popen(command, start_new_session=True, stdin=subprocess.DEVNULL)
    _record_start(folder, process.pid, config_hash(data, master), effective_master(data, master))

    def forward(signum, _frame):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return process.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
