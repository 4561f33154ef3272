"""Faults on a Spark standalone cluster, with the records ledger. Prints a table.

    .venv/bin/python benchmarks/cluster_faults.py [--faults executor,worker,driver]
                                                 [--modes realtime,microbatch] [--deliveries alo,eos]
                                                 [--repeat 1] [--rate 800]

The drills of ``benchmarks/fault_matrix.py`` (``tests.kit.faults``), with the job on a 2-worker
standalone cluster (``mm2spec.dev.spark``: driver here in client mode, one 1-core executor on each
worker) instead of ``local[2]``: one 4-partition topic mirrored from ``primary`` to ``dr`` through
Toxiproxy proxies while a producer writes ``--rate`` records/s to primary and a ledger reads dr.
Per fault x mode (Real-time Mode / micro-batch) x delivery, a fresh job and topic, the fault
applied ``--repeat`` times at random points once the mirror delivers:

- ``kill -9 executor``: one executor JVM killed; nothing else done (the master starts another).
- ``kill -9 worker``: a worker's process group (its JVM and executors) killed, started again 10 s
  later with the same work dir and ports.
- ``kill -9 driver``: the driver's process group killed and the job started again at once.

lost = records primary acknowledged that never reached dr; dups = records dr holds twice
(read_committed for exactly-once; ``src dups`` are the producer's own, which a faithful mirror
copies); recovery = seconds from the fault's end until dr held every record acknowledged by then;
restarts = failed queries the job restarted by itself. A case that fails prints its error instead.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mm2spec.dev.spark import start_standalone_cluster  # noqa: E402
from tests.kit.faults import FaultRun, FaultRunResult, kill_driver, kill_executor, kill_worker  # noqa: E402
from tests.kit.toxiproxy import ProxiedPair  # noqa: E402

#: Dev clusters start in seconds on an idle machine, minutes on a busy one.
CLUSTER_START_TIMEOUT_S = 300.0
FAULTS = {"executor": ("kill -9 executor", kill_executor), "worker": ("kill -9 worker", kill_worker),
          "driver": ("kill -9 driver", kill_driver)}
DELIVERIES = {"alo": False, "eos": True}

HEADER = (f"{'fault':<18} {'mode':<10} {'delivery':<14} {'n':>2} {'acked':>8} {'lost':>5} {'dups':>6} {'src dups':>8} "
          f"{'altered':>7} {'recovery s (each)':>20} {'restarts':>8} {'load':>5}")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def row(mode: str, result: FaultRunResult) -> str:
    recovery = " / ".join(f"{s:.0f}" for s in result.recovery_s) or "-"
    return (f"{result.case:<18} {mode:<10} {result.delivery:<14} {result.faults:>2} {result.acknowledged:>8,} "
            f"{result.lost:>5,} {result.duplicates:>6,} {result.source_duplicates:>8,} {result.altered:>7,} "
            f"{recovery:>20} {result.job_restarts:>8} {os.getloadavg()[0]:>5.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", default="executor,worker,driver", help="executor, worker, driver")
    parser.add_argument("--modes", default="realtime,microbatch", help="realtime, microbatch")
    parser.add_argument("--deliveries", default="alo,eos", help="alo (at-least-once), eos (exactly-once)")
    parser.add_argument("--repeat", type=int, default=1, help="faults per case")
    parser.add_argument("--rate", type=float, default=800.0, help="records/s of the live producer")
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    faults, modes, deliveries = (value.split(",") for value in (args.faults, args.modes, args.deliveries))
    work = Path(tempfile.mkdtemp(prefix="mm2spec-cluster-faults-"))
    log(f"working in {work}; load average {os.getloadavg()[0]:.1f}")
    rng = random.Random(args.seed)
    pair = ProxiedPair.on_free_ports(work / "pair", tie_to_parent=True).up(CLUSTER_START_TIMEOUT_S)
    cluster = start_standalone_cluster(work / "spark", workers=2, cores=1, memory="1g")
    print(HEADER, flush=True)
    try:
        for mode in modes:
            for delivery in deliveries:
                for fault in faults:
                    label, apply = FAULTS[fault]
                    name = f"{fault}-{mode[:2]}-{delivery}"
                    try:
                        with FaultRun(pair, work, name, exactly_once=DELIVERIES[delivery], rate=args.rate,
                                      cluster=cluster, mode=mode) as drill:
                            times = []
                            for n in range(args.repeat):
                                times.append(apply(drill, rng))
                                log(f"{name} {n + 1}/{args.repeat}: caught up {times[-1]:.1f} s after; "
                                    f"job log {drill.deployment.log_file}")
                            result = drill.finish(label, times)
                        print(row(mode, result), flush=True)
                        if result.duplicate_examples:
                            log(f"{name}: first duplicates (partition, sequence, target offset): "
                                f"{result.duplicate_examples}")
                    except Exception as failure:  # noqa: BLE001 - one failed case must not hide the others
                        log(traceback.format_exc())
                        print(f"{label:<18} {mode:<10} {delivery:<14} FAILED: {str(failure).splitlines()[0][:160]}",
                              flush=True)
                    _restore(cluster)
    finally:
        cluster.stop()
        pair.down()
    print(f"\nmachine: {os.cpu_count()} cores, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"(1 / 5 / 15 min)")
    return 0


def _restore(cluster) -> None:
    """A case that failed mid-fault may leave a worker down: the next case needs both."""
    for number in range(1, len(cluster.worker_dirs) + 1):
        if cluster.worker(number).poll() is not None:
            cluster.restart_worker(number)


if __name__ == "__main__":
    sys.exit(main())
