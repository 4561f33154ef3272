"""A Spark standalone cluster (a master and one or more workers) from the pip pyspark distribution,
to run the mirroring job on ``spark://`` instead of ``local[N]`` (tests, benchmarks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mm2spec.components import Components, module_missing
from mm2spec.errors import ComponentMissing, MirrorError
from mm2spec.dev.process import pick_free_ports
from mm2spec.runtime.process import HOST, listening, wait_until

# A JVM that ignores SIGTERM this long is stuck: kill it.
STOP_GRACE_SECONDS = 20.0
#: The master's UI answers ``/json/`` from memory: a local request slower than this means the
#: master is stuck, not busy.
MASTER_STATE_TIMEOUT_SECONDS = 30.0
#: What a worker logs once the master accepted it (Spark's ``Worker``).
REGISTERED = "Successfully registered with master"
#: What an executor logs per task it completed (Spark's ``Executor``, at the INFO level of Spark's
#: default log4j config, which executors use: the pip distribution ships no ``conf/``).
TASK_FINISHED = "Finished task "


def _spark_home() -> Path:
    try:
        import pyspark
    except ImportError:
        raise module_missing("pyspark") from None
    return Path(pyspark.__file__).resolve().parent


@dataclass(frozen=True)
class ExecutorRun:
    """One executor a worker ran for an application, and how many tasks it completed."""

    worker: int
    """1-based, in start order (``worker-<n>`` in the cluster's folder)."""
    app: str
    executor: str
    tasks: int


@dataclass
class StandaloneCluster:
    """A Spark standalone master and its workers, started from the pip pyspark distribution."""

    workdir: Path
    """``master.log``, and per worker ``worker-<n>.log`` and its work dir ``worker-<n>/``."""
    master_url: str
    """``spark://127.0.0.1:<port>``: what ``spark.master`` names to run executors here."""
    master_ui: str
    """``http://127.0.0.1:<port>``: the master's web UI (``state()`` reads its ``/json/``)."""
    processes: list = field(default_factory=list)
    """The master's and the workers' ``Popen``, in start order. Each runs in a session of its own,
    so its pid is its process group, which the executors a worker launches join."""
    worker_logs: list = field(default_factory=list)
    worker_dirs: list = field(default_factory=list)
    """Each worker's ``--work-dir``: ``<app id>/<executor id>/stderr`` per executor it ran."""
    worker_launches: list = field(default_factory=list)
    """Per worker, what started it: (spark-class, its arguments, its environment), so that
    ``restart_worker`` starts it again with the same work dir and web UI port."""

    def process_groups(self) -> list[int]:
        """The process groups of the master, the workers and their executors (CPU accounting)."""
        return [process.pid for process in self.processes]

    def state(self) -> dict:
        """The master's own view: ``workers`` (id, state, cores, memory), ``activeapps``, ..."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=MASTER_STATE_TIMEOUT_SECONDS) as answer:
            return json.load(answer)

    def executors(self) -> list[ExecutorRun]:
        """Every executor the workers ran so far, from their work dirs (kept after the app ends)."""
        runs = []
        for number, work in enumerate(self.worker_dirs, 1):
            for stderr in sorted(Path(work).glob("app-*/*/stderr")):
                tasks = stderr.read_text(errors="replace").count(TASK_FINISHED)
                runs.append(ExecutorRun(number, stderr.parent.parent.name, stderr.parent.name, tasks))
        return runs

    def worker(self, number: int) -> subprocess.Popen:
        """Worker ``number`` (1-based, in start order)."""
        if not 1 <= number <= len(self.worker_dirs):
            raise ValueError(f"no worker {number}: the cluster has {len(self.worker_dirs)}")
        return self.processes[number]

    def executor_pids(self, number: int | None = None) -> list[int]:
        """The executor JVMs running now (on worker ``number``, or on any): the processes of a
        worker's process group other than the worker's own JVM."""
        numbers = [number] if number else range(1, len(self.worker_dirs) + 1)
        groups = {self.worker(n).pid for n in numbers}
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in groups:
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            # fields: state, ppid, pgrp; a zombie is already dead
            if fields[0] != "Z" and int(fields[2]) in groups and b"CoarseGrainedExecutorBackend" in command:
                found.append(int(entry))
        return sorted(found)

    def kill_worker(self, number: int) -> None:
        """SIGKILL to worker ``number``'s process group: its JVM and the executors it launched."""
        process = self.worker(number)
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()

    def restart_worker(self, number: int, timeout: float = 120.0) -> None:
        """Start worker ``number`` again (after ``kill_worker``) with the same work dir and web UI
        port; returns once the master accepted it."""
        process = self.worker(number)
        if process.poll() is None:
            raise MirrorError(f"worker {number} (pid {process.pid}) is still running")
        spark_class, args, env = self.worker_launches[number - 1]
        log = self.worker_logs[number - 1]
        # The log is appended to: count the registrations before, so the old one does not count.
        before = _registrations(log)
        self.processes[number] = _launch(spark_class, args, log, env)
        wait_until(lambda: _registrations(log) > before, timeout,
                   lambda: MirrorError(f"worker {number} did not register again within {timeout:.0f}s; see {log}"))

    def stop(self) -> None:
        """SIGTERM to every process group (workers first), SIGKILL to what is left after the grace:
        a worker that was killed or hung can leave executors behind in its group."""
        for process in reversed(self.processes):
            _signal_group(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


def _launch(spark_class: Path, args: list[str], log: Path, env: dict) -> subprocess.Popen:
    # Run through bash: the wheel may not mark spark-class executable, and site-packages is not
    # ours to chmod. spark-class execs the JVM, so the pid is the JVM's.
    with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(["bash", str(spark_class), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, stdin=subprocess.DEVNULL, start_new_session=True)


def _registrations(log: Path) -> int:
    return log.read_text(errors="replace").count(REGISTERED) if log.is_file() else 0


def _registered(log: Path) -> bool:
    return _registrations(log) > 0


def start_standalone_cluster(workdir: str | Path | None = None, *, workers: int = 1, cores: int = 2,
                             memory: str = "2g", timeout: float = 120.0) -> StandaloneCluster:
    """Start ``spark-class org.apache.spark.deploy.master.Master`` and ``workers`` times
    ``...worker.Worker`` on loopback, each worker offering ``cores`` and ``memory`` to executors;
    returns once every worker has registered with the master."""
    if workers < 1:
        raise ValueError(f"a standalone cluster needs at least one worker, got {workers}")
    Components.java()  # spark-class needs one too: say so before starting anything
    home = _spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.is_file():
        raise ComponentMissing(f"{spark_class} not found: install pyspark (scripts/setup)")
    folder = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mm2spec-spark-standalone-"))
    folder.mkdir(parents=True, exist_ok=True)
    port, ui, *worker_uis = pick_free_ports(2 + workers)
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(folder),
           "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}
    cluster = StandaloneCluster(folder, f"spark://{HOST}:{port}", f"http://{HOST}:{ui}")
    master_log = folder / "master.log"
    try:
        cluster.processes.append(_launch(spark_class, ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                                       "--port", str(port), "--webui-port", str(ui)], master_log, env))
        wait_until(lambda: listening(port), timeout,
                   lambda: MirrorError(f"the Spark master did not start within {timeout:.0f}s; see {master_log}"))
        for number, worker_ui in enumerate(worker_uis, 1):
            _start_worker(cluster, spark_class, number, worker_ui, cores, memory, env)
        for log in cluster.worker_logs:  # started together: they register while we wait for the first
            wait_until(lambda: _registered(log), timeout,
                       lambda: MirrorError(f"a Spark worker did not register within {timeout:.0f}s; see {log}"))
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_worker(cluster: StandaloneCluster, spark_class: Path, number: int, ui: int, cores: int, memory: str,
                  env: dict) -> None:
    log, work = cluster.workdir / f"worker-{number}.log", cluster.workdir / f"worker-{number}"
    cluster.worker_logs.append(log)
    cluster.worker_dirs.append(work)
    args = ["org.apache.spark.deploy.worker.Worker", cluster.master_url, "--host", HOST,
            "--cores", str(cores), "--memory", memory, "--webui-port", str(ui), "--work-dir", str(work)]
    cluster.worker_launches.append((spark_class, args, env))
    cluster.processes.append(_launch(spark_class, args, log, env))
