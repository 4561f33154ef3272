"""The cheapest row of ``benchmarks/cluster_faults.py``: on a 2-worker Spark standalone cluster, in
Real-time Mode with exactly-once, an executor killed -9 under a live producer. The job carries on
by itself (the master starts another executor; no restart by hand), nothing acknowledged is lost
and a read_committed consumer of the target sees no record twice.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from mm2spec.dev.spark import start_standalone_cluster
from tests.kit.faults import FaultRun, kill_executor

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_faults import assert_nothing_lost
from test_spark_mirror import spark_ready  # noqa: F401 - the fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

#: Records/s of the live producer: the kill lands mid-stream, on a shared 2-core machine.
RATE = 500.0
#: Fixed, so a failure can be replayed with the same kill point.
SEED = 39


def test_exactly_once_realtime_rides_out_an_executor_kill(proxied_kafka_pair, spark_ready, tmp_path):  # noqa: F811 - pytest fixture
    cluster = start_standalone_cluster(tmp_path / "spark", workers=2, cores=1, memory="1g")
    try:
        with FaultRun(proxied_kafka_pair, tmp_path, "exec-kill-rt-eos", exactly_once=True, rate=RATE,
                      cluster=cluster, mode="realtime") as drill:
            before = set(cluster.executor_pids())
            recovery = kill_executor(drill, random.Random(SEED))
            result = drill.finish("kill -9 executor", [recovery])
        # The master replaced the killed executor: the job ran on a new one, not on what was left.
        replaced = {run.executor for run in cluster.executors()}
    finally:
        cluster.stop()
    print(f"\ncaught up {recovery:.1f} s after the kill; {result}")
    assert len(before) == 2, f"expected one executor on each worker, found pids {sorted(before)}"
    assert len(replaced) >= 3, f"the killed executor was not replaced: executors {sorted(replaced)}"
    assert_nothing_lost(result)
    assert result.duplicates == result.source_duplicates, (
        f"the target holds {result.duplicates} records twice (read_committed), the source {result.source_duplicates}; "
        f"the first (partition, sequence, target offset): {result.duplicate_examples}")
