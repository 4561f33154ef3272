"""The cheaper rows of the fault matrix (``benchmarks/fault_matrix.py`` runs them all, more often):
the Spark mirror, under a live producer, loses nothing when its driver is killed, when either
broker restarts or when its link to either cluster is cut; with exactly-once a read_committed
consumer of the target sees no record twice.

Each test runs one :class:`~tests.kit.faults.FaultRun` on the ``proxied_kafka_pair`` fixture and
judges only what the target holds against what the source acknowledged.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest

from tests.kit.faults import FaultRun, cut_link, kill_driver, restart_broker
from mm2spec.runtime import deployment as mirror

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_spark_mirror import spark_ready  # noqa: F401 - the fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

#: Records/s of the live producer: enough that every fault lands mid-stream, little enough for a
#: shared 2-core machine.
RATE = 1000.0
KILLS = 2
#: A network outage long enough for the clients' sessions and requests to time out and retry;
#: ``benchmarks/fault_matrix.py`` cuts for 30 s.
CUT_SECONDS = 10.0
#: Fixed, so a failure can be replayed with the same kill points.
SEED = 14


def assert_nothing_lost(result) -> None:
    assert result.acknowledged > 0, "the producer wrote nothing: the drill proves nothing"
    assert result.lost == 0, f"{result.lost} acknowledged records never reached the target: {result}"
    assert result.altered == 0, f"{result.altered} records changed on the way: {result}"
    assert result.unique == result.acknowledged, result


def test_exactly_once_rides_out_kills_restarts_and_cuts(proxied_kafka_pair, spark_ready, tmp_path):  # noqa: F811 - pytest fixture
    """One job run, every fault in turn: the driver killed twice, each broker restarted, the link
    to each cluster cut. Nothing lost, nothing read twice with read_committed, and the
    target catches up after every fault."""
    rng = random.Random(SEED)
    with FaultRun(proxied_kafka_pair, tmp_path, "faults-eos", exactly_once=True, rate=RATE) as drill:
        recovery = {f"kill -9 driver #{n}": kill_driver(drill, rng) for n in range(1, KILLS + 1)}
        for cluster in ("primary", "dr"):
            recovery[f"{cluster} broker restart"] = restart_broker(drill, cluster)
        for cluster in ("primary", "dr"):
            recovery[f"{CUT_SECONDS:.0f} s cut mirror<->{cluster}"] = cut_link(drill, cluster, CUT_SECONDS)
        result = drill.finish("all faults", list(recovery.values()))
    print("\n" + "\n".join(f"{case}: caught up {seconds:.1f} s after" for case, seconds in recovery.items()))
    print(result)
    assert_nothing_lost(result)
    # exactly what the source holds: records its producer wrote twice (a retry across a broker
    # restart) are two records there, and a faithful mirror copies both
    assert result.duplicates == result.source_duplicates, (
        f"the target holds {result.duplicates} records twice (read_committed), the source {result.source_duplicates}; "
        f"the first (partition, sequence, target offset): {result.duplicate_examples}")
    assert result.faults == KILLS + 4


def test_at_least_once_driver_kills_lose_nothing(proxied_kafka_pair, spark_ready, tmp_path):  # noqa: F811 - pytest fixture
    """Replayed micro-batches may write records again (counted), but none goes missing."""
    rng = random.Random(SEED)
    with FaultRun(proxied_kafka_pair, tmp_path, "kills-alo", exactly_once=False, rate=RATE) as drill:
        result = drill.finish("kill -9 driver", [kill_driver(drill, rng) for _ in range(KILLS)])
    print(f"\n{result}")
    assert_nothing_lost(result)
    assert result.faults == KILLS


#: The stop's grace in the test: well under the deployment's default (60 s) and the 60 s a stop
#: took on a dead source before the mirror source (Spark's own waits on an uninterruptible Kafka call).
STOP_GRACE_S = 45.0


def test_a_stop_while_the_source_is_down_ends_cleanly(proxied_kafka_pair, spark_ready, tmp_path):  # noqa: F811 - pytest fixture
    """The link to the source cut mid-stream, the job runs into it, then is stopped: it stops by
    itself within the grace (the mirror source's Kafka calls give way to the stop), so it is not
    killed; started again after the link heals, it loses nothing."""
    with FaultRun(proxied_kafka_pair, tmp_path, "stop-dead-source", exactly_once=False, rate=RATE) as drill:
        drill.progress()
        drill.pair.cut("primary")
        try:
            time.sleep(CUT_SECONDS)  # the outage itself: the job's calls to the source now hang
            began = time.monotonic()
            assert mirror.stop(drill.deployment, timeout=STOP_GRACE_S), "the job was not running when stopped"
            took = time.monotonic() - began
            status = json.loads(drill.deployment.status_file.read_text())
        finally:
            drill.pair.heal("primary")
        print(f"\nstop with the source down took {took:.1f} s; status {status.get('state')}")
        assert "forcedStop" not in status, f"the job had to be killed: {status.get('forcedStop')}"
        assert status["state"] == "stopped"
        drill.start_job()
        result = drill.finish("stop while the source is down", [drill.recovery()])
    assert_nothing_lost(result)
