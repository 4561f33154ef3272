"""The Spark standalone cluster the benchmarks and tests run the job on: several workers, all
registered with the master, and nothing left running after ``stop()``. No Kafka, no job: the
mirroring job on ``spark://`` is test_spark_mirror.py's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mm2spec.dev.spark import start_standalone_cluster
from mm2spec.errors import ComponentMissing

sys.path.insert(0, str(Path(__file__).resolve().parent))

from required import missing_component

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: Three JVMs starting on two shared cores: a worker registers in well under a minute unloaded.
START_TIMEOUT = 300.0


def members(group: int) -> list[int]:
    """Live processes in a process group (an executor a worker left behind would be one)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[2]) == group and stat[0] != "Z":
            found.append(int(entry))
    return found


def test_two_workers_register_and_stop(tmp_path):
    """Each worker has its own log and work dir, the master lists both ALIVE with the cores and
    memory they were given, and stop() ends every process of the cluster."""
    try:
        cluster = start_standalone_cluster(tmp_path / "standalone", workers=2, cores=1, memory="512m",
                                           timeout=START_TIMEOUT)
    except ComponentMissing as exc:
        missing_component(exc)
        raise  # not reached: fail/skip raise
    try:
        state = cluster.state()
        alive = [w for w in state["workers"] if w["state"] == "ALIVE"]
        assert len(alive) == 2, state["workers"]
        assert {(w["cores"], w["memory"]) for w in alive} == {(1, 512)}
        assert len({w["id"] for w in alive}) == 2
        assert [log.name for log in cluster.worker_logs] == ["worker-1.log", "worker-2.log"]
        assert len(set(cluster.worker_dirs)) == 2
        assert len(cluster.process_groups()) == 3 and all(members(g) for g in cluster.process_groups())
    finally:
        cluster.stop()
    assert all(process.poll() is not None for process in cluster.processes)
    assert not any(members(g) for g in cluster.process_groups())
