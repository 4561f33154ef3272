"""Soak: the Spark mirror at half of its measured maximum rate for 30 minutes. Prints a table.

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--rate RECORDS_PER_S] [--samples soak.json]

On its own dev clusters (free ports) and a Spark standalone cluster (master, one worker, so the
executor is a process of its own):

1. Maximum rate: a backlog of ``--measure-records`` is mirrored; records / (last arrival - first
   arrival) on dr. Skipped when ``--rate`` gives the soak rate directly.
2. Soak: a producer writes half of that rate (idempotent, acks=all, keys = partition:sequence,
   values derived from the keys) while a consumer group on primary consumes and commits every
   second (the job checkpoints it and syncs its offsets to dr) and a ledger reads dr.
   Every 10 s: lag (acknowledged records not yet on dr), RSS from /proc of the driver (its
   Python process and everything under it: the driver JVM, Python workers) and of the executor
   (the executor JVM under the worker and its Python workers).
3. End: the producer stops, the ledger catches up: lost, duplicated and altered records; the
   group's offset on dr against primary's.

Flatness: mean RSS over the first 5 minutes after a 2-minute warm-up against the last 5, and the
least-squares slope (MB/h) after the warm-up. Not a test: the figures depend on the machine and
on what else runs on it (the load average is printed with each row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from tests.kit.ledger import Ledger, SequencedProducer, ledger_job  # noqa: E402
from mm2spec.dev.spark import start_standalone_cluster  # noqa: E402
from mm2spec.runtime import deployment as mirror  # noqa: E402

PARTITIONS = 6
VALUE_SIZE = 200
SAMPLE_EVERY_S = 10.0
WARM_UP_S = 120.0
WINDOW_S = 300.0
#: A JVM start on a busy 2-core machine: the job's first batch can take minutes.
JOB_START_TIMEOUT_S = 600.0
#: After the producer stops, the mirror drains what is left of the lag.
DRAIN_TIMEOUT_S = 900.0
GROUP = "soak-app"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, -1)]).values():
        future.result(60)


def end_total(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-watch"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error:
            return 0
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions)
    except Exception:  # noqa: BLE001 - a topic the job created a moment ago has no leader yet: nothing yet
        return 0
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------- memory


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(parent, []).append(int(entry))
    return tree


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree_rss_mb(root: int, tree: dict[int, list[int]], *, include_root: bool = True) -> float:
    """RSS of ``root`` and all its descendants, in MB."""
    total, stack = (_rss_mb(root) if include_root else 0.0), list(tree.get(root, []))
    while stack:
        pid = stack.pop()
        total += _rss_mb(pid)
        stack.extend(tree.get(pid, []))
    return total


# ------------------------------------------------------------------------------------- phases


def measure_max_rate(primary: str, dr: str, master: str, work: Path, records: int) -> float:
    """Records/s the job mirrors a backlog at, first arrival to last."""
    topic = "soak-max"
    create_topic(primary, topic)
    log(f"writing a backlog of {records:,} records to {topic}")
    producer = SequencedProducer({"bootstrap.servers": primary}, topic, PARTITIONS, value_size=VALUE_SIZE,
                                 limit=records).start()
    producer.wait()
    job = ledger_job("soak-max", primary, dr, topic, str(work / "max-checkpoints"), master=master)
    deployment = mirror.start(job, state_dir=work / "max-state", wait_running=JOB_START_TIMEOUT_S)
    try:
        first = None
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            arrived = end_total(dr, topic)
            if arrived and first is None:
                first = time.monotonic()
            if arrived >= records:
                elapsed = time.monotonic() - first
                log(f"backlog mirrored in {elapsed:.1f}s")
                return records / max(elapsed, 1e-3)
            time.sleep(0.2)
        raise TimeoutError(f"the backlog was not mirrored within {DRAIN_TIMEOUT_S:.0f}s; see {deployment.log_file}")
    finally:
        mirror.stop(deployment)


class CommittingGroup:
    """A consumer of ``topic`` on primary in group ``soak-app``, committing every second."""

    def __init__(self, primary: str, topic: str):
        self.consumer = Consumer({"bootstrap.servers": primary, "group.id": GROUP, "enable.auto.commit": True,
                                  "auto.commit.interval.ms": 1000, "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic])
        self.consumed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumed += sum(1 for m in self.consumer.consume(1000, timeout=0.5) if not m.error())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


def committed(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return sum(tp.offset for tp in got if tp.offset >= 0)
    finally:
        consumer.close()


def soak(primary: str, dr: str, cluster, work: Path, rate: float, minutes: float) -> tuple[list[dict], dict]:
    topic = "soak-live"
    create_topic(primary, topic)
    job = ledger_job("soak", primary, dr, topic, str(work / "soak-checkpoints"), groups=GROUP,
                     master=cluster.master_url)
    # The job first, so the soak starts without a backlog built up during its start.
    deployment = mirror.start(job, state_dir=work / "soak-state", wait_running=JOB_START_TIMEOUT_S)
    producer = SequencedProducer({"bootstrap.servers": primary}, topic, PARTITIONS, rate=rate,
                                 value_size=VALUE_SIZE).start()
    group = CommittingGroup(primary, topic)
    worker_pid = cluster.processes[1].pid
    ledger = Ledger({"bootstrap.servers": dr}, topic, PARTITIONS, value_size=VALUE_SIZE)
    samples: list[dict] = []
    try:
        while not end_total(dr, topic):
            time.sleep(1)
        began = time.monotonic()
        log(f"soaking {minutes:g} min at {rate:,.0f} records/s")
        while time.monotonic() - began < minutes * 60:
            ledger.read(SAMPLE_EVERY_S)
            if not mirror.status(deployment).running:
                raise RuntimeError(f"the job died during the soak; see {deployment.log_file}")
            tree = _children()
            sample = {"t": round(time.monotonic() - began), "acknowledged": producer.acknowledged,
                      "lag": ledger.missing(producer), "duplicates": ledger.duplicates,
                      "driver_mb": round(tree_rss_mb(deployment.pid, tree)),
                      # under the worker JVM: its executor JVMs and their Python workers
                      "executor_mb": round(tree_rss_mb(worker_pid, tree, include_root=False)),
                      "group_consumed": group.consumed, "load": os.getloadavg()[0]}
            samples.append(sample)
            if len(samples) % 6 == 1:
                row(sample)
        producer.stop()
        log("producer stopped; draining")
        final = ledger.catch_up(producer, DRAIN_TIMEOUT_S, alive=lambda: mirror.status(deployment).running)
        group.stop()
        time.sleep(5)  # the job's group sync runs every second; let one pass after the last commit
        end = {"acknowledged": producer.acknowledged, "failed_sends": producer.failed, "unique": final.unique,
               "lost": final.lost, "duplicates": final.duplicates, "corrupt": final.corrupt,
               "group_committed_primary": committed(primary, topic), "group_committed_dr": committed(dr, topic)}
        return samples, end
    finally:
        ledger.close()
        mirror.stop(deployment)


# ------------------------------------------------------------------------------------- report


HEADER = f"{'t s':>6} {'acked':>12} {'lag':>9} {'dups':>7} {'driver MB':>10} {'executor MB':>12} {'load':>6}"


def row(sample: dict) -> None:
    print(f"{sample['t']:>6} {sample['acknowledged']:>12,} {sample['lag']:>9,} {sample['duplicates']:>7,} "
          f"{sample['driver_mb']:>10,} {sample['executor_mb']:>12,} {sample['load']:>6.1f}", flush=True)


def slope_mb_per_hour(samples: list[dict], key: str) -> float:
    points = [(s["t"], s[key]) for s in samples if s["t"] >= WARM_UP_S]
    if len(points) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points) or 1.0
    return num / den * 3600


def window_mean(samples: list[dict], key: str, start: float, end: float) -> float | None:
    values = [s[key] for s in samples if start <= s["t"] < end]
    return statistics.fmean(values) if values else None


def summary(samples: list[dict], end: dict, max_rate: float | None, rate: float) -> None:
    last = samples[-1]["t"] if samples else 0
    print()
    if max_rate:
        print(f"maximum rate (backlog):         {max_rate:>12,.0f} records/s")
    print(f"soak rate:                      {rate:>12,.0f} records/s, {last / 60:.1f} min, {VALUE_SIZE} B values")
    lags = [s["lag"] for s in samples if s["t"] >= WARM_UP_S] or [s["lag"] for s in samples]
    if lags:
        print(f"lag after warm-up (records):    max {max(lags):,}, median {statistics.median(lags):,.0f}, "
              f"last {samples[-1]['lag']:,}")
    for key, label in (("driver_mb", "driver RSS"), ("executor_mb", "executor RSS")):
        first = window_mean(samples, key, WARM_UP_S, WARM_UP_S + WINDOW_S)
        final = window_mean(samples, key, last - WINDOW_S, last + 1)
        if first is not None and final is not None:
            print(f"{label + ' (MB):':<32}first 5 min {first:,.0f}, last 5 min {final:,.0f}, "
                  f"slope {slope_mb_per_hour(samples, key):+,.0f} MB/h")
    print(f"records acknowledged on primary:{end['acknowledged']:>12,} (failed sends {end['failed_sends']})")
    print(f"on dr: unique {end['unique']:,}, lost {end['lost']:,}, duplicates {end['duplicates']:,}, "
          f"altered {end['corrupt']:,}")
    print(f"group {GROUP}: committed on primary {end['group_committed_primary']:,}, synced to dr "
          f"{end['group_committed_dr']:,}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, help="soak at this rate instead of half the measured maximum")
    parser.add_argument("--measure-records", type=int, default=600_000)
    parser.add_argument("--samples", type=Path, help="write every sample as JSON here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mm2spec-soak-"))
    stack = DevStack(work / "dev", ports=DevPorts.free(), tie_to_parent=True, echo=log)
    state = stack.up(with_connect=False, timeout=300)
    cluster = start_standalone_cluster(work / "spark", cores=2, memory="2g")
    primary, dr = state.primary.bootstrap, state.dr.bootstrap
    try:
        max_rate = None if args.rate else measure_max_rate(primary, dr, cluster.master_url, work, args.measure_records)
        rate = args.rate or max_rate / 2
        print(HEADER, flush=True)
        samples, end = soak(primary, dr, cluster, work, rate, args.minutes)
        if args.samples:
            args.samples.write_text(json.dumps({"rate": rate, "max_rate": max_rate, "samples": samples, "end": end}))
        summary(samples, end, max_rate, rate)
    finally:
        cluster.stop()
        stack.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
