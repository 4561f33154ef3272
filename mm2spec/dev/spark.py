"""A Spark standalone cluster (master + one worker) from the pip pyspark distribution, to run the
mirroring job on ``spark://`` instead of ``local[N]`` (tests, benchmarks)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mm2spec.errors import ComponentMissing, MirrorError
from mm2spec.dev.process import pick_free_ports
from mm2spec.runtime.process import HOST, listening, wait_until

# A JVM that ignores SIGTERM this long is stuck: kill it.
STOP_GRACE_SECONDS = 20.0


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneCluster:
    """A Spark standalone master and one worker, started from the pip pyspark distribution."""

    workdir: Path
    """Logs of both and the worker's work dir."""
    master_url: str
    """``spark://127.0.0.1:<port>``: what ``spark.master`` names to run executors here."""
    processes: list = field(default_factory=list)
    """The master's and the worker's ``Popen``, in start order."""

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _launch(spark_class: Path, args: list[str], log: Path, env: dict) -> subprocess.Popen:
    # Run through bash: the wheel may not mark spark-class executable, and site-packages is not
    # ours to chmod.
    with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(["bash", str(spark_class), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, stdin=subprocess.DEVNULL)


def start_standalone_cluster(workdir: str | Path | None = None, *, cores: int = 2, memory: str = "2g",
                             timeout: float = 120.0) -> StandaloneCluster:
    """Start ``spark-class org.apache.spark.deploy.master.Master`` and one ``...worker.Worker`` on
    loopback; returns once the worker has registered with the master."""
    home = _spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.is_file():
        raise ComponentMissing(f"{spark_class} not found: install pyspark (scripts/setup)")
    folder = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mm2spec-spark-standalone-"))
    folder.mkdir(parents=True, exist_ok=True)
    port, ui, worker_ui = pick_free_ports(3)
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(folder),
           "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}
    url = f"spark://{HOST}:{port}"
    cluster = StandaloneCluster(folder, url)
    master_log, worker_log = folder / "master.log", folder / "worker.log"
    cluster.processes.append(_launch(spark_class, ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                                   "--port", str(port), "--webui-port", str(ui)], master_log, env))
    try:
        wait_until(lambda: listening(port), timeout,
                   lambda: MirrorError(f"the Spark master did not start within {timeout:.0f}s; see {master_log}"))
        cluster.processes.append(_launch(
            spark_class, ["org.apache.spark.deploy.worker.Worker", url, "--host", HOST, "--cores", str(cores),
                          "--memory", memory, "--webui-port", str(worker_ui), "--work-dir", str(folder / "work")],
            worker_log, env))
        wait_until(lambda: "Successfully registered with master" in worker_log.read_text(errors="replace"), timeout,
                   lambda: MirrorError(f"the Spark worker did not start within {timeout:.0f}s; see {worker_log}"))
    except BaseException:
        cluster.stop()
        raise
    return cluster
