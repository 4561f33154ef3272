"""Running the Spark mirroring job (``spark/mirror_job.py``): the ``mirror`` command, the
start/stop/status functions the Pulumi Spark deployment resource calls, and a Spark standalone
cluster (master + worker from the pip pyspark distribution) to run it on.

The driver always runs on this machine (client deploy mode: Python apps on a standalone cluster
cannot run in cluster mode); ``spark.master`` picks where executors run. A started job keeps its
files in a state folder (default ``.mm2spec/spark/<job name>``): ``job.json`` (the config it
runs; ``${env:NAME}`` placeholders, never resolved secrets), ``driver.pid``, ``driver.log`` and
``status.json`` (the figures the job's StreamingQueryListener publishes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mm2spec.components import PROJECT_ROOT, ComponentMissing, components
from mm2spec.errors import Mm2specError

JOB_SCRIPT = PROJECT_ROOT / "spark" / "mirror_job.py"
DEFAULT_STATE_ROOT = Path(".mm2spec") / "spark"


class MirrorError(Mm2specError):
    """The mirroring job could not be started, stopped or inspected."""


# ---------------------------------------------------------------------------------- the job


def job_command(config_file: Path, status_file: Path, *, master: str | None = None,
                max_restarts: int | None = None, python: str | None = None) -> list[str]:
    """The command line that runs the job in the foreground."""
    jars = [str(p) for p in components().spark_kafka_jars]  # ComponentMissing names the fix
    command = [python or sys.executable, "-u", str(JOB_SCRIPT), "--config", str(config_file),
               "--status-file", str(status_file), "--jars", ",".join(jars)]
    if master:
        command += ["--master", master]
    if max_restarts is not None:
        command += ["--max-restarts", str(max_restarts)]
    return command


def _load_job(job: Mapping[str, Any] | str | Path) -> dict:
    if isinstance(job, Mapping):
        return dict(job)
    try:
        return json.loads(Path(job).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MirrorError(f"{job}: cannot read the Spark job config: {exc}") from None


def render_job(spec: str | Path, env: str | None) -> dict:
    """The Spark job config of a DR spec for one environment (what ``render`` writes)."""
    from mm2spec.compile import load_desired_state
    from mm2spec.render import spark_job_config

    return spark_job_config(load_desired_state(spec, env))


def _config_hash(job: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]


# ------------------------------------------------------------------- deployment: start/stop/status


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

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MirrorStatus:
    """What :func:`status` found."""

    running: bool
    """The driver process is alive."""
    pid: int | None
    state: str
    """running | starting | restarting | stopped | failed | absent (from the status file, or absent)."""
    flows: dict = field(default_factory=dict)
    """Per flow: delivery, records/s, bytes/s, replication latency, per-topic figures, errors, ..."""
    updated_at: float | None = None


def _state_dir(name: str, state_dir: str | Path | None) -> Path:
    return Path(state_dir) if state_dir else (DEFAULT_STATE_ROOT / name).resolve()


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def _read_pid(state_dir: Path) -> dict | None:
    try:
        return json.loads((state_dir / "driver.pid").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def start(job: Mapping[str, Any] | str | Path, *, state_dir: str | Path | None = None,
          master: str | None = None, env: Mapping[str, str] | None = None,
          max_restarts: int | None = None, wait_running: float | None = None) -> MirrorDeployment:
    """Start the job in the background (idempotent: the same config already running is kept; a
    different one is stopped and replaced). ``env`` adds variables, e.g. the ``${env:...}``
    secrets. ``wait_running`` seconds: wait until its first query runs (MirrorError if it dies)."""
    data = _load_job(job)
    name = str(data.get("name") or "mirror")
    folder = _state_dir(name, state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    digest = _config_hash({**data, "_master": master})
    current = _read_pid(folder)
    if current and _alive(current.get("pid")):
        if current.get("config_hash") == digest:
            return MirrorDeployment(name, str(folder), current["pid"], current.get("master", ""), digest)
        stop(folder)
    config_file = folder / "job.json"
    config_file.write_text(json.dumps(data, indent=2) + "\n")
    status_file = folder / "status.json"
    status_file.unlink(missing_ok=True)
    command = job_command(config_file, status_file, master=master, max_restarts=max_restarts)
    with open(folder / "driver.log", "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **(env or {})}, start_new_session=True, cwd=os.getcwd())
    effective_master = master or str((data.get("spark") or {}).get("master", "local[2]"))
    (folder / "driver.pid").write_text(json.dumps({"pid": process.pid, "config_hash": digest,
                                                   "master": effective_master, "started": time.time()}))
    deployment = MirrorDeployment(name, str(folder), process.pid, effective_master, digest)
    if wait_running:
        wait_until_running(deployment, wait_running, process)
    return deployment


def wait_until_running(deployment: MirrorDeployment, timeout: float, process: subprocess.Popen | None = None) -> MirrorStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = status(deployment.state_dir)
        if not current.running or (process is not None and process.poll() is not None):
            raise MirrorError(f"the mirroring job exited; see {deployment.log_file}")
        flows = current.flows.values()
        if current.state == "running" and flows and all(f.get("state") == "running" for f in flows):
            return current
        time.sleep(0.5)
    raise MirrorError(f"the mirroring job did not start within {timeout:.0f}s; see {deployment.log_file}")


def stop(deployment: MirrorDeployment | str | Path, timeout: float = 60.0) -> bool:
    """Stop the job: SIGTERM (queries stop, internal records flushed), SIGKILL after ``timeout``.
    Returns True if a running job was stopped, False if none was running."""
    folder = Path(deployment.state_dir if isinstance(deployment, MirrorDeployment) else deployment)
    current = _read_pid(folder)
    pid = current.get("pid") if current else None
    if not _alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        _reap(pid)
        time.sleep(0.2)
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)  # the job's own session: driver and its Spark JVM
        except (ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def status(deployment: MirrorDeployment | str | Path) -> MirrorStatus:
    """Whether the job runs, and the figures of its last status file."""
    folder = Path(deployment.state_dir if isinstance(deployment, MirrorDeployment) else deployment)
    current = _read_pid(folder)
    pid = current.get("pid") if current else None
    running = _alive(pid)
    try:
        data = json.loads((folder / "status.json").read_text())
    except (OSError, json.JSONDecodeError):
        data = {}
    state = data.get("state") or ("starting" if running else "absent")
    if not running and state in ("running", "starting", "restarting"):
        state = "failed"  # the process is gone without recording a clean stop
    return MirrorStatus(running=running, pid=pid, state=state, flows=data.get("flows") or {},
                        updated_at=data.get("updatedAt"))


def deployed_job(name: str, state_dir: str | Path | None = None) -> dict | None:
    """The config of the job running under ``name`` (its ``job.json``), or None when none runs.

    ``mm2spec plan`` compares it with the rendered config to show the Spark deployment's drift.
    """
    folder = _state_dir(name, state_dir)
    if not status(folder).running:
        return None
    try:
        return json.loads((folder / "job.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


# ------------------------------------------------------------------- Spark standalone cluster


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StandaloneCluster:
    """A Spark standalone master and one worker, started from the pip pyspark distribution."""

    workdir: Path
    master_url: str
    processes: list = field(default_factory=list)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_standalone_cluster(workdir: str | Path | None = None, *, cores: int = 2, memory: str = "2g",
                             timeout: float = 120.0) -> StandaloneCluster:
    """Start ``spark-class org.apache.spark.deploy.master.Master`` and one ``...worker.Worker`` on
    loopback; returns once the worker has registered with the master."""
    home = _spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.is_file():
        raise ComponentMissing(f"{spark_class} not found: install pyspark (scripts/setup)")
    os.chmod(spark_class, os.stat(spark_class).st_mode | 0o111)
    folder = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mm2spec-spark-standalone-"))
    folder.mkdir(parents=True, exist_ok=True)
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(folder),
           "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}
    url = f"spark://127.0.0.1:{port}"
    cluster = StandaloneCluster(folder, url)
    master_log = open(folder / "master.log", "ab")
    cluster.processes.append(subprocess.Popen(
        [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)], stdout=master_log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL))
    try:
        _wait_for(lambda: _port_open(port), timeout, "the Spark master", folder / "master.log")
        worker_log = open(folder / "worker.log", "ab")
        cluster.processes.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
             "--work-dir", str(folder / "work")],
            stdout=worker_log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL))
        _wait_for(lambda: "Successfully registered with master" in (folder / "worker.log").read_text(errors="replace"),
                  timeout, "the Spark worker", folder / "worker.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(check, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise MirrorError(f"{what} did not start within {timeout:.0f}s; see {log}")


# ------------------------------------------------------------------------------ the command


def run_foreground(job: Mapping[str, Any], *, state_dir: str | Path | None = None, master: str | None = None,
                   max_restarts: int | None = None) -> int:
    """Run the job attached to this terminal until it ends or Ctrl-C/SIGTERM (forwarded)."""
    name = str(job.get("name") or "mirror")
    folder = _state_dir(name, state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / "job.json"
    config_file.write_text(json.dumps(dict(job), indent=2) + "\n")
    command = job_command(config_file, folder / "status.json", master=master, max_restarts=max_restarts)
    process = subprocess.Popen(command, start_new_session=True, stdin=subprocess.DEVNULL)
    (folder / "driver.pid").write_text(json.dumps({"pid": process.pid, "config_hash": _config_hash(dict(job)),
                                                   "master": master or "", "started": time.time()}))

    def forward(signum, _frame):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return process.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def cmd_mirror(args: argparse.Namespace) -> int:
    if args.job_config:
        job = _load_job(args.job_config)
    elif args.spec:
        job = render_job(args.spec, args.env)
    else:
        raise MirrorError("give a DR spec (mm2spec mirror SPEC --env ENV) or --job-config FILE")
    name = str(job.get("name") or "mirror")
    folder = _state_dir(name, args.state_dir)
    if args.status:
        current = status(folder)
        print(json.dumps(asdict(current), indent=2))
        return 0 if current.running else 1
    if args.stop:
        stopped = stop(folder)
        print(f"stopped {name}" if stopped else f"{name} is not running")
        return 0
    try:
        if args.detach:
            deployment = start(job, state_dir=folder, master=args.master, wait_running=args.wait)
            print(f"started {name} (pid {deployment.pid}); log {deployment.log_file}; status {deployment.status_file}")
            return 0
        flows = ", ".join(f"{f.get('name')} ({f.get('exactly.once.source.support') == 'enabled' and 'exactly-once' or 'at-least-once'})"
                          for f in job.get("flows") or [])
        print(f"mirroring {name}: {flows}; master {args.master or (job.get('spark') or {}).get('master')}; "
              f"status file {folder / 'status.json'} (Ctrl-C stops)", flush=True)
        return run_foreground(job, state_dir=folder, master=args.master)
    except ComponentMissing as exc:
        raise MirrorError(str(exc)) from None


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``mm2spec mirror``."""
    p = subparsers.add_parser("mirror", help="run the Spark mirroring job (engine: spark) in the foreground",
                              description="Render the spec's Spark job config and run it: progress lines per "
                                          "micro-batch, figures in <state dir>/status.json.")
    p.add_argument("spec", nargs="?", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment to run (default: the base spec)")
    p.add_argument("--job-config", help="run this rendered spark-mirror.json instead of rendering SPEC")
    p.add_argument("--master", help="override spark.master, e.g. spark://127.0.0.1:7077 or local[2]")
    p.add_argument("--state-dir", help="folder for job.json, driver.log, status.json (default .mm2spec/spark/<name>)")
    p.add_argument("--detach", action="store_true", help="start in the background and return")
    p.add_argument("--wait", type=float, default=None, help="with --detach: wait this many seconds until it runs")
    p.add_argument("--stop", action="store_true", help="stop a job started with --detach")
    p.add_argument("--status", action="store_true", help="print the job's status (exit 1 if not running)")
    p.set_defaults(func=cmd_mirror)
    return p
