"""Mirroring throughput and latency, Spark against MirrorMaker 2, on the dev clusters. Prints tables.

    .venv/bin/python benchmarks/mirror_throughput.py            # the full run (~50 min on an idle 2-core machine)
    .venv/bin/python benchmarks/mirror_throughput.py --rounds 1 --window 30 --sizes 100B   # a quick look
    .venv/bin/python benchmarks/mirror_throughput.py --standalone-workers 2 --engines spark-alo \
        --rounds 1 --sizes 100B --latency-seconds 0        # the job on a spark:// cluster (scale-out check)

What is measured, and why it is fair:

* **Same data**: per record size (100 B, 1 KB: a 10-byte key + value) one source topic on
  ``primary`` (6 partitions) is filled once with a backlog larger than any engine mirrors in one
  run; every run mirrors it from the start into its own target topic on ``dr``
  (DefaultReplicationPolicy with a per-run source alias), deleted afterwards.
* **Steady state**: each run starts its engine, waits for the first records, lets it warm up
  (``--warmup`` s), then fits records/s by least squares to the target's end offsets sampled every
  100 ms over a window of ``--window`` s (>= 30 s and, for Spark, >= 10 micro-batches: the window
  is extended until it holds 10). A run whose window would reach the backlog's end is flagged.
* **Rounds**: ``--rounds`` (>= 5 for a report) with the engine order rotated each round; tables
  show medians with the spread (min-max) and the Spark/MM2 ratio of each round's pair (the two
  ran minutes apart, so machine load shifts them alike): spark-alo against mm2 (at-least-once),
  spark-eos against mm2-eos (MM2 on a Connect worker with ``exactly.once.source.support=enabled``).
  Also runnable with ``--engines``: the job in Spark's Real-time Mode (``spark.mode: realtime``),
  ``spark-rt`` at-least-once (against mm2) and ``spark-rt-eos`` exactly-once (against mm2-eos).
* **Exactly-once counted committed**: for the eos engines the end offsets are the last stable
  offsets (ListOffsets with read_committed); transaction markers take one offset per partition
  per transaction (well under 0.1% here).
* **CPU**: CPU-seconds of the engine's processes from /proc over the window (Spark: the driver's
  process group -- Python driver, JVM, Python workers -- and on a standalone cluster also its
  master, workers and their executors; MM2: the Connect worker JVM), so records per CPU-second
  compare too. Brokers are not counted for either.
* **Scale-out** (``--standalone-workers N``): Spark runs on a ``spark://`` standalone cluster of N
  workers started for the benchmark (each 1 core of the machine's 2 or more, one executor each,
  the driver in client mode) instead of ``local[2]``; each Spark run reports the executors that
  ran its tasks and how many each completed (from the workers' executor logs).
* **Equal settings**: both engines get the same JVM heap (``--heap``: Spark's driver.memory, the
  Connect worker's -Xmx), the same parallelism (local[2] against tasks.max=2) and the same client
  settings (producer linger.ms/batch.size, consumer max.poll.records/max.partition.fetch.bytes:
  the Spark job's defaults, given to MM2 as overrides); Spark runs otherwise with its rendered
  defaults (trigger interval, max.offsets.per.trigger).
* **Latency**: per size, each engine mirrors a fresh topic that a rate-limited writer fills at
  half of MM2's median max rate (or ``--latency-rate``), 20 s of warm-up then
  ``--latency-seconds`` counted. No record is read back: the writer (a process of its own) keeps
  when it handed each partition's records to its producer, and the target's end offsets (its
  last stable offset for exactly-once) are sampled every 20 ms; as every engine copies a
  partition in order into the same partition, a record's latency is when its offset became
  readable on the target minus its timestamp, to within one sample. p50/p99 over the counted
  records; records not on the target when the drain ends count as slowest. The writer's reached
  rate is printed: on a small machine it and the source broker take cores the engines need
  (at 175,000 records/s of 100 B: 0.5 core for the writer, 0.8 for the source broker).

The load average is printed with every run: the machine is shared, so trust ratios over absolute
figures. Not a test: the numbers depend on the machine. ``--json FILE`` keeps every run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.dev import process  # noqa: E402
from mm2spec.dev.config import connect_worker_properties  # noqa: E402
from mm2spec.dev.connect import ConnectWorker  # noqa: E402
from mm2spec.dev.spark import StandaloneCluster, start_standalone_cluster  # noqa: E402
from mm2spec.runtime import deployment as mirror  # noqa: E402

SIZES = {"100B": 100, "1KB": 1024}
#: Backlog per size: more than the fastest engine mirrors in start + warm-up + window on an idle
#: 2-core machine (up to 523,000 records/s at 100 B there: 5,000,000 ran out within 10 s, and
#: 20,000,000 cut one window short; at 1 KB, batches of 1,000,000 records take ~9 s and 7,800,000
#: ran out before the tenth).
BACKLOG = {"100B": 30_000_000, "1KB": 12_000_000}
PARTITIONS = 6
ENGINES = ("spark-alo", "mm2", "spark-eos", "mm2-eos")
#: Also runnable (--engines): the job in Spark's Real-time Mode (spark.mode: realtime), spark-rt
#: at-least-once and spark-rt-eos exactly-once.
REALTIME_ENGINES = ("spark-rt", "spark-rt-eos")
EXACTLY_ONCE_ENGINES = ("spark-eos", "spark-rt-eos", "mm2-eos")
PEERS = {"spark-alo": "mm2", "spark-eos": "mm2-eos", "spark-rt": "mm2", "spark-rt-eos": "mm2-eos"}
TABLE_ENGINES = ("spark-alo", "spark-rt", "mm2", "spark-eos", "spark-rt-eos", "mm2-eos")
SAMPLE_EVERY_S = 0.1
MIN_WINDOW_S = 30.0
MIN_BATCHES = 10
#: An engine must deliver its first record within this (Spark's start-up on a busy 2-core machine).
FIRST_RECORD_TIMEOUT_S = 300.0
#: The same client settings for both engines: the Spark job's defaults (spark/README.md).
PRODUCER_SETTINGS = {"linger.ms": "5", "batch.size": "262144"}
CONSUMER_SETTINGS = {"max.poll.records": "10000", "max.partition.fetch.bytes": "4194304"}
KAFKA_CALL_TIMEOUT_S = 30.0
#: After the latency producer stops, wait this long for its last records to arrive.
LATENCY_DRAIN_S = 20.0
#: The latency producer runs this long at the rate before its records count: a Spark job's first
#: batches after start-up take seconds (JIT, clients created), which is start-up, not steady state.
LATENCY_WARMUP_S = 20.0
#: The latency run samples the target's end offsets this often: a latency is exact to about this.
LATENCY_SAMPLE_S = 0.02
#: The latency writer hands records to its producer in slices this far apart (their timestamps).
WRITER_SLICE_S = 0.005
#: After the writer stops, the target counts as drained once it holds every record and its end
#: offsets stood still this long (exactly-once: the last transaction's markers are written).
LATENCY_SETTLE_S = 1.0
CONNECT_READY_TIMEOUT_S = 180.0
#: Cores of a standalone cluster, split over its workers (at least one each): those of local[2].
STANDALONE_CORES = 2
#: Each standalone executor's heap: Spark's minimum (450m) with a margin. The tasks stream the
#: records they copy and hold none, so two executors need no more than local[2]'s one JVM does.
STANDALONE_EXECUTOR_MEMORY = "512m"
#: Three JVMs (master, workers) starting on two shared cores, before the first Spark run.
STANDALONE_START_TIMEOUT_S = 300.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> float:
    return os.getloadavg()[0]


# ------------------------------------------------------------------------------------ Kafka


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, -1)]).values():
        future.result(KAFKA_CALL_TIMEOUT_S)


def delete_topics(bootstrap: str, prefix: str) -> None:
    """Frees the disk a run's target took (a full run writes tens of GB otherwise)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=KAFKA_CALL_TIMEOUT_S).topics if t.startswith(prefix)]
    for future in (admin.delete_topics(names).values() if names else []):
        try:
            future.result(KAFKA_CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a leftover topic costs disk, not correctness
            log(f"deleting a topic under {prefix}: {exc}")


def fill(bootstrap: str, topic: str, count: int, size: int) -> None:
    """The backlog: ``count`` records of ``size`` bytes (10-byte key + value), round-robin."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1048576,
                         "queue.buffering.max.messages": 1000000, "compression.type": "none"})
    payload = os.urandom(size - 10)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=b"%010d" % i, value=payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)


class EndOffsets:
    """Sum of a topic's end offsets: the high watermark, or the last stable offset (read_committed)."""

    def __init__(self, bootstrap: str, topic: str, committed: bool):
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.topic = topic
        self.isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED

    def per_partition(self) -> list[int]:
        """Each partition's end offset (raises when the topic or a leader is missing)."""
        request = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        futures = self.admin.list_offsets(request, isolation_level=self.isolation, request_timeout=10)
        return [futures[TopicPartition(self.topic, p)].result(10).offset for p in range(PARTITIONS)]

    def total(self) -> int:
        try:
            return sum(self.per_partition())
        except Exception:  # noqa: BLE001 - not created yet, or no leader yet: nothing mirrored yet
            return 0


# ------------------------------------------------------------------------------------ CPU


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(process_groups: set[int]) -> float:
    """User + system CPU of every live process in ``process_groups`` (and their reaped children)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in process_groups:  # field 5 of stat: pgrp
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / CLOCK_TICKS


# ------------------------------------------------------------------------------------ engines


@dataclass
class Run:
    size: str
    engine: str
    round: int
    records_per_s: float = 0.0
    mb_per_s: float = 0.0
    cpu_s_per_s: float = 0.0
    records_per_cpu_s: float = 0.0
    window_s: float = 0.0
    batches: int | None = None
    exhausted: bool = False
    load: list = field(default_factory=list)
    p50_ms: float | None = None
    p99_ms: float | None = None
    latency_rate: float | None = None
    latency_produced_per_s: float | None = None
    """The rate the writer reached on the source over the counted seconds."""
    latency_records: int | None = None
    latency_missing: int | None = None
    """Counted records not readable on the target when the drain ended (they count as slowest)."""
    latency_worst_per_second: list | None = None
    """Per counted second of writing: the slowest record's latency (ms)."""
    profile: dict | None = None
    """Spark: the last steady-state batch's phases (Spark's durationMs, the job's split of the
    write) and the writer's producer metrics, from the status file at the end of the window."""
    master: str | None = None
    """Spark: where the job ran (``local[2]``, ``spark://...``)."""
    executors: list | None = None
    """Spark on a standalone cluster: per executor of the run, its worker and completed tasks."""


def standalone_cores_per_worker(workers: int) -> int:
    return max(1, STANDALONE_CORES // workers)


class SparkEngine:
    """The Spark job on ``master``, or on ``cluster`` (a standalone cluster) with one executor per
    worker."""

    def __init__(self, name: str, workdir: Path, heap: str, master: str, cluster: StandaloneCluster | None = None,
                 extra: dict | None = None, flow_extra: dict | None = None):
        self.name, self.workdir, self.heap, self.cluster = name, workdir, heap, cluster
        self.extra, self.flow_extra = extra or {}, flow_extra or {}
        if name in REALTIME_ENGINES:
            # Spark's Real-time Mode (spark.mode: realtime): a task slot per task.
            self.extra = {"mode": "realtime", **self.extra}
        self.master = cluster.master_url if cluster else master
        self.exactly_once = name in EXACTLY_ONCE_ENGINES
        self.deployment = None
        self.apps_before: set[str] = set()

    def executor_settings(self) -> dict:
        """On a standalone cluster: one executor per worker, with all of the worker's cores."""
        if not self.cluster:
            return {}
        workers = len(self.cluster.worker_dirs)
        return {"executor.instances": workers, "executor.cores": standalone_cores_per_worker(workers),
                "executor.memory": STANDALONE_EXECUTOR_MEMORY}

    def start(self, primary: str, dr: str, alias: str, topics: str) -> None:
        job = {
            "apiVersion": "mm2spec/v1", "name": f"bench-{alias}", "environment": "bench",
            "spark": {"master": self.master, "driver.memory": self.heap, **self.executor_settings(),
                      "checkpoint.location": str(self.workdir / alias / "checkpoints"), **self.extra},
            "flows": [{
                "name": f"{alias}-to-dr", "source.cluster.alias": alias, "target.cluster.alias": "dr",
                "source.cluster.bootstrap.servers": primary, "target.cluster.bootstrap.servers": dr,
                "topics": topics, "groups": "none",
                "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
                "offset-syncs.topic.location": "target",
                "emit.checkpoints.enabled": "false", "sync.group.offsets.enabled": "false",
                "exactly.once.source.support": "enabled" if self.exactly_once else "disabled",
                # MM2's tasks.max here (Mm2Engine): the mirror source runs that many tasks a batch.
                "tasks.max": "2",
                **self.flow_extra,
            }],
        }
        if self.cluster:
            self.apps_before = {run.app for run in self.cluster.executors()}
        self.deployment = mirror.start(job, state_dir=self.workdir / alias / "state", wait_running=600)

    def process_groups(self) -> set[int]:
        return {self.deployment.pid, *(self.cluster.process_groups() if self.cluster else ())}

    def executors(self) -> list | None:
        """The executors of this run's application (after stop(): their logs are complete)."""
        if not self.cluster:
            return None
        return [asdict(run) for run in self.cluster.executors() if run.app not in self.apps_before]

    def batches(self) -> int | None:
        flows = mirror.status(self.deployment).flows or {}
        return sum(int(f.get("batches") or 0) for f in flows.values())

    def profile(self) -> dict | None:
        flows = mirror.status(self.deployment).flows or {}
        keys = ("lastBatchId", "batchDurationMs", "batchPhasesMs", "lastBatchMs", "producerMetrics", "errors", "restarts",
                "lastError")
        return next(({k: f.get(k) for k in keys} for f in flows.values()), None)

    def stop(self) -> None:
        if self.deployment:
            mirror.stop(self.deployment)


class Mm2Engine:
    """MirrorSourceConnector, tasks.max=2 (``tasks_max``), on a Connect worker of its own (started per run, as the
    Spark job is; exactly-once needs the worker-level setting)."""

    master = None  # no Spark

    def __init__(self, name: str, workdir: Path, heap: str, dr_spec, tasks_max: int = 2):
        self.name, self.workdir, self.heap, self.dr_spec = name, workdir, heap, dr_spec
        self.tasks_max = tasks_max
        self.exactly_once = name in EXACTLY_ONCE_ENGINES
        self.proc = None

    def start(self, primary: str, dr: str, alias: str, topics: str) -> None:
        [port] = process.pick_free_ports(1)
        root = self.workdir / alias
        root.mkdir(parents=True, exist_ok=True)
        config = root / "worker.properties"
        worker_props = connect_worker_properties(self.dr_spec, rest_port=port, group_id=f"bench-{alias}")
        if self.exactly_once:
            worker_props += "\nexactly.once.source.support=enabled\n"
        config.write_text(worker_props)
        worker = ConnectWorker(config, root, name=f"connect-{alias}", heap=self.heap)
        self.proc = worker.start(tie_to_parent=True)
        process.wait_all_ready({self.proc: worker.ready}, timeout=CONNECT_READY_TIMEOUT_S)
        connector = {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "tasks.max": str(self.tasks_max),
            "source.cluster.alias": alias, "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": primary, "target.cluster.bootstrap.servers": dr,
            "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
            "offset-syncs.topic.location": "target", "topics": topics,
            "heartbeats.replication.enabled": "false", "sync.topic.acls.enabled": "false",
            "replication.factor": "-1", "offset-syncs.topic.replication.factor": "-1",
            "refresh.topics.interval.seconds": "1",
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            **{f"producer.override.{k}": v for k, v in PRODUCER_SETTINGS.items()},
            **{f"consumer.{k}": v for k, v in CONSUMER_SETTINGS.items()},
        }
        if self.exactly_once:
            # MirrorSourceConnector supports exactly-once only when it reads the source read_committed
            # (as the Spark job's exactly-once flows do).
            connector.update({"exactly.once.support": "required", "consumer.isolation.level": "read_committed"})
        request = urllib.request.Request(f"{worker.url}/connectors/{alias}/config", method="PUT",
                                         data=json.dumps(connector).encode(), headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=KAFKA_CALL_TIMEOUT_S * 2).read()
        except urllib.error.HTTPError as refused:
            raise RuntimeError(f"{self.name}: Connect refused the connector: {refused.read().decode()[:2000]}") from None

    def process_groups(self) -> set[int]:
        return {self.proc.pid}

    def batches(self) -> int | None:
        return None

    def profile(self) -> dict | None:
        return None

    def executors(self) -> list | None:
        return None

    def stop(self) -> None:
        if self.proc:
            process.stop(self.proc)


# ------------------------------------------------------------------------------------ throughput


@dataclass
class Sample:
    t: float
    total: int
    cpu: float
    batches: int | None


def sample_until(engine, ends: EndOffsets, done) -> list[Sample]:
    """Samples every 100 ms until ``done(samples)`` says the window is complete."""
    samples: list[Sample] = []
    next_at = time.monotonic()
    batches, batches_at = engine.batches(), time.monotonic()
    while not samples or not done(samples):
        now = time.monotonic()
        if now - batches_at >= 1.0:  # the status file changes once per second
            batches, batches_at = engine.batches(), now
        samples.append(Sample(now, ends.total(), cpu_seconds(engine.process_groups()), batches))
        next_at += SAMPLE_EVERY_S
        time.sleep(max(0.0, next_at - time.monotonic()))
    return samples


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0


def measure_throughput(engine, primary: str, dr: str, size: str, backlog: int, alias: str, args) -> Run:
    topic = f"bench-{size.lower()}"
    target = f"{alias}.{topic}"
    run = Run(size, engine.name, 0, load=[round(load_average(), 1)])
    engine.start(primary, dr, alias, topic)
    try:
        ends = EndOffsets(dr, target, committed=engine.exactly_once)
        deadline = time.monotonic() + FIRST_RECORD_TIMEOUT_S
        while ends.total() == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{engine.name}: no record on {target} within {FIRST_RECORD_TIMEOUT_S:.0f}s")
            time.sleep(SAMPLE_EVERY_S)
        began = time.monotonic()
        start_at = began + args.warmup

        def done(samples: list[Sample]) -> bool:
            last = samples[-1]
            if last.total >= backlog * 0.98:
                return True
            if last.t < start_at + args.window:
                return False
            first = next(s for s in samples if s.t >= start_at)
            enough_batches = (last.batches is None or first.batches is None
                              or last.batches - first.batches >= MIN_BATCHES)
            return enough_batches or last.t > start_at + 3 * args.window

        samples = [s for s in sample_until(engine, ends, done) if s.t >= start_at]
        run.profile = engine.profile()
    finally:
        engine.stop()
        delete_topics(dr, f"{alias}.")
    run.master, run.executors = engine.master, engine.executors()
    if not samples:
        raise RuntimeError(f"{engine.name}: the backlog of {backlog:,} records ran out within the warm-up "
                           f"({args.warmup:.0f} s): give a larger --backlog-scale or a shorter --warmup")
    run.exhausted = samples[-1].total >= backlog * 0.98
    window = [s for s in samples if s.total < backlog * 0.98] or samples
    run.window_s = window[-1].t - window[0].t
    run.records_per_s = slope([(s.t, s.total) for s in window])
    run.mb_per_s = run.records_per_s * SIZES[size] / 1e6
    run.cpu_s_per_s = (window[-1].cpu - window[0].cpu) / run.window_s if run.window_s else 0.0
    run.records_per_cpu_s = run.records_per_s / run.cpu_s_per_s if run.cpu_s_per_s else 0.0
    if window[0].batches is not None and window[-1].batches is not None:
        run.batches = window[-1].batches - window[0].batches
    run.load.append(round(load_average(), 1))
    return run


# ------------------------------------------------------------------------------------ latency


def measure_latency(engine, primary: str, dr: str, size: str, alias: str, rate: float, seconds: float) -> Latency:
    """Replication latency of records written at ``rate``/s while the engine mirrors (see ``_offset_timelines``)."""
    source = f"lat-{alias}"
    target = f"{alias}.{source}"
    create_topic(primary, source)
    warm = Producer({"bootstrap.servers": primary})
    for p in range(PARTITIONS):
        warm.produce(source, key=b"warm", value=b"x", partition=p)
    warm.flush(KAFKA_CALL_TIMEOUT_S)
    engine.start(primary, dr, alias, source)
    try:
        ends = EndOffsets(dr, target, committed=engine.exactly_once)
        deadline = time.monotonic() + FIRST_RECORD_TIMEOUT_S
        while ends.total() < PARTITIONS:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{engine.name}: warm-up records did not reach {target}")
            time.sleep(SAMPLE_EVERY_S)
        return _offset_timelines(primary, dr, source, target, size, rate, seconds, engine.exactly_once)
    finally:
        engine.stop()
        delete_topics(dr, f"{alias}.")


def _write_at_rate(bootstrap: str, topic: str, size: int, rate: float, stop, report) -> None:
    """The rate-limited writer, in its own process so that it never waits for the sampler's GIL:
    ``rate`` records/s of ``size`` bytes round-robin over the partitions, a slice every
    ``WRITER_SLICE_S``, with the engines' producer settings. Sends back its timeline: per slice,
    the time the slice's records were handed to the producer (their timestamp, to the
    millisecond) and the records sent to each partition so far."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "none",
                         "linger.ms": PRODUCER_SETTINGS["linger.ms"], "batch.size": PRODUCER_SETTINGS["batch.size"],
                         "queue.buffering.max.messages": 1000000})
    payload, key = os.urandom(size - 10), b"0123456789"
    template = [{"key": key, "value": payload} for _ in range(int(rate * WRITER_SLICE_S * 4 / PARTITIONS) + 1)]
    counts, timeline = [0] * PARTITIONS, []
    began, sent = time.monotonic(), 0
    while not stop.is_set():
        now = time.monotonic()
        due = min(int((now - began) * rate) - sent, len(template) * PARTITIONS)
        if due < max(1.0, rate * WRITER_SLICE_S):
            producer.poll(max(0.0, began + sent / rate + WRITER_SLICE_S - now))
            continue
        for p in range(PARTITIONS):
            messages = template[:due // PARTITIONS + (p < due % PARTITIONS)]
            while messages:
                producer.produce_batch(topic, messages, partition=p)
                failed = [m for m in messages if m.pop("_error", None) is not None]
                counts[p] += len(messages) - len(failed)
                messages = failed
                if messages:  # the source broker takes less than the rate: wait, as a client would
                    producer.poll(0.01)
        timeline.append((now, list(counts)))
        sent += due
        producer.poll(0)
    producer.flush(60)
    report.send(timeline)


@dataclass
class Latency:
    """Replication latencies over the counted records: a histogram (ms -> records)."""
    histogram: dict
    records: int
    produced_per_s: float
    missing: int
    worst_per_second: list = field(default_factory=list)
    """Per counted second of writing: the slowest record's latency (ms), to see a stall's shape."""


def _offset_timelines(primary, dr, source, target, size, rate, seconds, committed) -> Latency:
    """Latency without reading a record back: the writer keeps when it handed each partition's
    records to its producer, and the target's end offsets (its last stable offset for
    exactly-once) are sampled every ``LATENCY_SAMPLE_S``. Each engine copies a partition in
    order into the same partition, offsets 1:1 from 0 (a transaction's marker takes an offset:
    those are spread evenly over the target's offsets), so a record's latency is the time its
    offset became readable on the target minus its timestamp, to within one sampling interval."""
    before = EndOffsets(primary, source, committed=False).per_partition()
    target_ends = EndOffsets(dr, target, committed=committed).per_partition

    spawn = multiprocessing.get_context("spawn")
    stop, (receive, report) = spawn.Event(), spawn.Pipe(duplex=False)
    writer = spawn.Process(target=_write_at_rate, args=(primary, source, SIZES[size], rate, stop, report), daemon=True)
    began = time.monotonic()
    writer.start()
    counted_from, counted_to = began + LATENCY_WARMUP_S, began + LATENCY_WARMUP_S + seconds
    visible: list[tuple[float, list[int]]] = []
    timeline = drain_until = settled_at = None
    while True:
        asked = time.monotonic()
        visible.append((asked, target_ends()))
        now = time.monotonic()
        visible[-1] = ((asked + now) / 2, visible[-1][1])
        if timeline is None and now >= counted_to:
            stop.set()
            timeline = receive.recv() if receive.poll(90) else []
            drain_until = time.monotonic() + LATENCY_DRAIN_S
        elif timeline is not None:
            # Every record written is readable on the target (a transaction's marker takes an
            # offset too, so also wait until the target stands still), or the drain's time is up.
            written = [b + c for b, c in zip(before, timeline[-1][1])] if timeline else before
            moved = visible[-1][1] != visible[-2][1]
            settled_at = None if moved else (settled_at or now)
            caught_up = all(v >= w for v, w in zip(visible[-1][1], written))
            if (caught_up and settled_at and now - settled_at >= LATENCY_SETTLE_S) or now > drain_until:
                break
        time.sleep(max(0.0, LATENCY_SAMPLE_S - (time.monotonic() - asked)))
    writer.join(10)
    if writer.is_alive():
        writer.kill()
    if not timeline:
        raise RuntimeError(f"the latency writer to {source} sent no timeline (exit code {writer.exitcode}; "
                           "its traceback, if any, is above)")
    created = [(t, [b + c for b, c in zip(before, counts)]) for t, counts in timeline]
    return latencies_from([(began, before)] + created, visible, counted_from, counted_to)


def latencies_from(created, visible, counted_from: float, counted_to: float) -> Latency:
    """``created``: (time, per-partition end offset) as records were written, ``visible``: (time,
    per-partition end offset) as sampled on the target. Counts the records created between
    ``counted_from`` and ``counted_to``, each with the time it became readable on the target."""
    histogram: dict[int, int] = {}
    worst: dict[int, int] = {}
    records = missing = 0
    first = next(i for i, s in enumerate(created) if s[0] >= counted_from)
    last = max(i for i, s in enumerate(created) if s[0] <= counted_to)
    for p in range(PARTITIONS):
        # Transaction markers take target offsets: spread the extra ones evenly over the run.
        final_source, final_target = created[-1][1][p], visible[-1][1][p]
        scale = final_source / final_target if final_target > final_source else 1.0
        tgt = [(t, int(e[p] * scale)) for t, e in visible]
        j = 0
        for i in range(first, last + 1):
            offset, upto_created = created[i - 1][1][p], created[i][1][p]
            while offset < upto_created:  # offsets [offset, upto_created) were created at created[i][0]
                while j < len(tgt) and tgt[j][1] <= offset:
                    j += 1
                if j == len(tgt):
                    missing += upto_created - offset
                    break
                upto = min(upto_created, tgt[j][1])
                ms = max(0, round((tgt[j][0] - created[i][0]) * 1000))
                histogram[ms] = histogram.get(ms, 0) + (upto - offset)
                second = int(created[i][0] - counted_from)
                worst[second] = max(worst.get(second, 0), ms)
                records += upto - offset
                offset = upto
    span = created[last][0] - created[first - 1][0]
    produced = sum(created[last][1]) - sum(created[first - 1][1])
    return Latency(histogram, records, produced / span if span > 0 else 0.0, missing,
                   [worst.get(s, None) for s in range(max(worst, default=-1) + 1)])


def pct(latency: Latency, q: float) -> float | None:
    """The q-quantile in ms; records never seen on the target count as slower than any seen."""
    total = latency.records + latency.missing
    if not total:
        return None
    rank, seen = q * total, 0
    for ms in sorted(latency.histogram):
        seen += latency.histogram[ms]
        if seen >= rank:
            return float(ms)
    return float("inf")


# ------------------------------------------------------------------------------------ report


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def ratios(runs: list[Run], size: str, engine: str) -> list[float]:
    """Per round: this engine's records/s over its peer's in the same round."""
    peer = PEERS.get(engine)
    by_round = {(r.engine, r.round): r for r in runs if r.size == size}
    return [by_round[(engine, n)].records_per_s / by_round[(peer, n)].records_per_s
            for (e, n) in by_round if e == engine and (peer, n) in by_round and by_round[(peer, n)].records_per_s]


def fmt(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "-"


def print_tables(runs: list[Run], latency: list[Run]) -> None:
    header = (f"{'size':<5} {'engine':<10} {'records/s median (min-max)':>28} {'MB/s':>6} {'rec/CPU-s':>10} "
              f"{'CPU-s/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'vs peer median (min-max)':>26} {'rounds':>6}")
    print(header)
    print("-" * len(header))
    for size in SIZES:
        for engine in TABLE_ENGINES:
            mine = [r for r in runs if r.size == size and r.engine == engine]
            if not mine:
                continue
            rate = [r.records_per_s for r in mine]
            lat = next((r for r in latency if r.size == size and r.engine == engine), None)
            peer = ratios(runs, size, engine)
            vs = (f"{statistics.median(peer):.2f}x ({min(peer):.2f}-{max(peer):.2f})" if peer else "-")
            print(f"{size:<5} {engine:<10} {spread(rate):>28} {statistics.median(r.mb_per_s for r in mine):>6.1f} "
                  f"{statistics.median(r.records_per_cpu_s for r in mine):>10,.0f} "
                  f"{statistics.median(r.cpu_s_per_s for r in mine):>7.2f} {fmt(lat and lat.p50_ms):>7} "
                  f"{fmt(lat and lat.p99_ms):>7} {vs:>26} {len(mine):>6}")
    if latency:
        print()
        lat_header = (f"{'size':<5} {'engine':<10} {'rate asked':>10} {'reached':>10} {'p50 ms':>7} {'p99 ms':>7} "
                      f"{'records':>11} {'missing':>8}")
        print(lat_header + "   (latency: the target's end offsets sampled every "
              f"{LATENCY_SAMPLE_S * 1000:.0f} ms)")
        print("-" * len(lat_header))
        for r in latency:
            print(f"{r.size:<5} {r.engine:<10} {fmt(r.latency_rate):>10} {fmt(r.latency_produced_per_s):>10} "
                  f"{fmt(r.p50_ms):>7} {fmt(r.p99_ms):>7} {fmt(r.latency_records):>11} {fmt(r.latency_missing):>8}")
    for r in runs:
        if r.profile and r.round == max(x.round for x in runs):
            print(f"profile {r.size} {r.engine} (last batch of the window): {json.dumps(r.profile, sort_keys=True)}")
    for r in runs:
        if r.master:
            print(f"{r.size} {r.engine} round {r.round} ran on {r.master}: {describe_executors(r.executors)}")
    flagged = [f"{r.size} {r.engine} round {r.round}" for r in runs if r.exhausted]
    if flagged:
        print("backlog reached before the window ended (window cut there): " + "; ".join(flagged))


def describe_executors(executors: list | None) -> str:
    if executors is None:
        return "the tasks ran in the driver's JVM"
    parts = [f"worker {e['worker']} executor {e['executor']} {e['tasks']:,} tasks" for e in executors]
    return f"{len(executors)} executors on {len({e['worker'] for e in executors})} workers: " + ", ".join(parts)


# ------------------------------------------------------------------------------------ main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=float, default=MIN_WINDOW_S, help="seconds of steady state fitted")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds after the first record before the window")
    parser.add_argument("--backlog-scale", type=float, default=1.0, help="scale the backlog (e.g. 0.2 for short windows)")
    parser.add_argument("--heap", default="1g", help="JVM heap of both engines")
    parser.add_argument("--master", default="local[2]", help="Spark master (e.g. a spark:// standalone cluster)")
    parser.add_argument("--standalone-workers", type=int, default=0, metavar="N",
                        help="run Spark on a standalone cluster of N workers started here (instead of --master)")
    parser.add_argument("--latency-seconds", type=float, default=30.0, help="0: no latency runs")
    parser.add_argument("--latency-rate", type=float, help="records/s of the latency runs (default: half of MM2's)")
    parser.add_argument("--spark-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark job setting instead of its default, e.g. max.offsets.per.trigger=100000")
    parser.add_argument("--flow-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark flow setting, e.g. consumer.fetch.max.wait.ms=10")
    parser.add_argument("--workdir")
    parser.add_argument("--json", help="write every run to this file")
    args = parser.parse_args()
    if args.standalone_workers < 0:
        parser.error("--standalone-workers must be 0 (no cluster) or more")
    if args.standalone_workers and args.master != parser.get_default("master"):
        parser.error("give --master or --standalone-workers, not both")
    for flag, example in (("spark_set", "max.offsets.per.trigger=100000"), ("flow_set", "consumer.fetch.max.wait.ms=10")):
        items = getattr(args, flag)
        if any("=" not in item for item in items):
            parser.error(f"--{flag.replace('_', '-')} takes KEY=VALUE, e.g. {example}")
        setattr(args, flag, dict(item.split("=", 1) for item in items))
    unknown = set(args.engines.split(",")) - set(TABLE_ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {', '.join(TABLE_ENGINES)}")
    return args


def start_cluster(workdir: Path, workers: int) -> StandaloneCluster:
    cores = standalone_cores_per_worker(workers)
    log(f"starting a Spark standalone cluster: {workers} workers, {cores} cores and "
        f"{STANDALONE_EXECUTOR_MEMORY} each; load average {load_average():.1f}")
    cluster = start_standalone_cluster(workdir / "spark-standalone", workers=workers, cores=cores,
                                       memory=STANDALONE_EXECUTOR_MEMORY, timeout=STANDALONE_START_TIMEOUT_S)
    log(f"Spark master {cluster.master_url}")
    return cluster


def main() -> int:
    args = parse_args()
    engines, sizes = args.engines.split(","), args.sizes.split(",")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mm2spec-bench-"))
    log(f"starting the dev clusters in {workdir}; load average {load_average():.1f}")
    stack = DevStack(workdir / "dev", ports=DevPorts.free(), tie_to_parent=True, echo=lambda line: None)
    state = stack.up(with_connect=False, timeout=300)
    primary, dr = state.primary.bootstrap, state.dr.bootstrap
    cluster = None

    def engine_of(name: str):
        if name.startswith("spark"):
            return SparkEngine(name, workdir / "runs", args.heap, args.master, cluster, args.spark_set, args.flow_set)
        return Mm2Engine(name, workdir / "runs", args.heap, state.dr)

    runs: list[Run] = []
    latency: list[Run] = []

    def save() -> None:
        """Keep every run so far in --json: a run cut short still leaves its figures."""
        if args.json:
            Path(args.json).write_text(json.dumps({"throughput": [asdict(r) for r in runs],
                                                   "latency": [asdict(r) for r in latency]}, indent=1))
    try:
        if args.standalone_workers:
            cluster = start_cluster(workdir, args.standalone_workers)
        for size in sizes:
            backlog = int(BACKLOG[size] * args.backlog_scale)
            topic = f"bench-{size.lower()}"
            if args.rounds == 0:
                backlog = 0  # latency runs only: they write their own topic
            log(f"{size}: producing a backlog of {backlog:,} records into {topic}")
            create_topic(primary, topic)
            fill(primary, topic, backlog, SIZES[size])
            for round_no in range(1, args.rounds + 1):
                shift = (round_no - 1) % len(engines)
                for name in engines[shift:] + engines[:shift]:
                    alias = f"{name.replace('-', '')}{size.lower()}r{round_no}"
                    run = measure_throughput(engine_of(name), primary, dr, size, backlog, alias, args)
                    run.round = round_no
                    runs.append(run)
                    save()
                    log(f"{size} round {round_no} {name}: {run.records_per_s:,.0f} rec/s over {run.window_s:.0f}s"
                        f" ({run.batches if run.batches is not None else '-'} batches), {run.cpu_s_per_s:.2f} CPU-s/s,"
                        f" load {run.load}{' BACKLOG REACHED' if run.exhausted else ''}")
                    if run.master:
                        log(f"  on {run.master}: {describe_executors(run.executors)}")
            if args.latency_seconds > 0:
                latency += latency_runs(engines, engine_of, primary, dr, size, runs, args)
                save()
    finally:
        if cluster:
            cluster.stop()
        stack.down()
        save()
    print_tables(runs, latency)
    return 0


def latency_runs(engines, engine_of, primary, dr, size, runs, args) -> list[Run]:
    mm2 = [r.records_per_s for r in runs if r.size == size and r.engine == "mm2"]
    rate = args.latency_rate or (statistics.median(mm2) / 2 if mm2 else None)
    if not rate:
        log(f"{size}: no MM2 rate to halve; give --latency-rate")
        return []
    out = []
    for name in engines:
        alias = f"lat{name.replace('-', '')}{size.lower()}"
        load = [round(load_average(), 1)]
        values = measure_latency(engine_of(name), primary, dr, size, alias, rate, args.latency_seconds)
        run = Run(size, name, 0, load=load + [round(load_average(), 1)], p50_ms=pct(values, 0.5),
                  p99_ms=pct(values, 0.99), latency_rate=rate, latency_produced_per_s=round(values.produced_per_s),
                  latency_records=values.records, latency_missing=values.missing,
                  latency_worst_per_second=values.worst_per_second)
        out.append(run)
        log(f"{size} latency {name} at {rate:,.0f} rec/s (writer reached {values.produced_per_s:,.0f}): "
            f"p50 {run.p50_ms} ms, p99 {run.p99_ms} ms over {values.records:,} records"
            f"{f', {values.missing:,} never arrived' if values.missing else ''}, load {run.load}")
    return out


if __name__ == "__main__":
    sys.exit(main())
