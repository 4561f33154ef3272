"""The mirror at production width: many partitions, Spark (both run modes) against MirrorMaker 2, one run.

    .venv/bin/python benchmarks/mirror_wide.py                     # 200 topics x 5 partitions (1,000)
    .venv/bin/python benchmarks/mirror_wide.py --precreate-targets # targets created first, as mm2spec's flow does
    .venv/bin/python benchmarks/mirror_wide.py --topics 10000 --partitions 1 --records 200000 \
        --live-seconds 0 --sample 1.0                              # 10,000 partitions, backlog only

Per engine, on source topics of its own with the same fresh backlog (``--shared-backlog``: one
set of topics for all, each later engine then also mirroring the earlier ones' live load), mirrored
from the start into target topics of its own (DefaultReplicationPolicy with a per-run source alias;
both deleted after the run):

1. **Backlog**: ``--records`` records of ``--size`` bytes spread round-robin over every partition;
   the time from the engine's start command until DR holds all of them (start-up included), and
   until DR holds a first one (``first s``: the start-up; the ratio line also compares the rest).
2. **Live load**: a writer process adds ``--rate`` records/s spread round-robin over every
   partition through a warm-up (written and mirrored, counted in no figure: at least 5 s and until
   the source acknowledged the rate for 5 s in a row, as a fresh writer is slow for its first seconds), then for
   ``--live-seconds``: a token bucket by the wall clock, handing the records due to its producers
   every 20 ms. librdkafka sends a produce request per partition batch, so above 1,250 records/s
   each batch lingers to keep to about 1,250 requests/s (``linger.ms`` 800 at 1,000 partitions and
   5,000 records/s: ~4 records a batch; 5-1,000), and the partitions are split over 4 producers
   (connections). It counts what the source acknowledged: per counted second, the rate reached. A
   second below 95% of ``--rate`` means the writer fell behind: the run says so loudly (``WRITER
   FELL BEHIND``, ``writer_behind`` in the JSON) and its lag and latency figures are not comparable
   with another run's. Both clusters' end offsets are sampled every ``--sample`` s. Lag in records:
   records on the source minus records on DR, mean, p99 and max over the samples of the counted
   seconds. Replication latency per counted record: when DR's end offset of its partition first
   covered it minus when the source's did (each to within one sample); mean, p50, p99, max. The
   writer's own delay (handed to its producer until on the source, the linger included) is printed
   beside it (``source p99``): it is not the mirror's.
3. **Drain**: from the source's acknowledgement of the writer's last record until DR holds every
   record (each partition as many as the writer put there).
4. **Idle**: ``--idle-seconds`` (20) with nothing written, after the drain (after the backlog when
   there is no live load): the engine's CPU-seconds per minute, the cost of a flow that only waits.
5. **Duplicates**: then, per partition, the records DR holds minus those the source holds (end
   minus start offsets: every engine here writes without transactions and so do the benchmark's
   producers, so each offset is one record; a transaction's marker would take one too), summed
   where DR holds more (``duplicates``: the target's surplus over the source) and where it holds
   fewer (``missing``). Spark's own count of failed batches and restarts is printed beside them.

**CPU**: user + system seconds of the engine's processes from /proc (mirror_throughput's
``cpu_seconds``: Spark's driver process group -- the Python driver, its JVM and Python workers;
MM2's Connect worker JVM), over the backlog (from the start command: start-up included), over the
live load and its drain, and per million records mirrored in each; brokers and the writer are not
counted for either.

**Targets**: by default each engine creates its own target topics (the Spark job in chunks, MM2 at
its topic refreshes); ``--precreate-targets`` creates them all on DR with the source's partitions
before the engine starts (mm2spec's own flow creates them with ``pulumi up`` before either engine
runs), outside every measured time. The tables say which.

Engines: ``spark`` (the job with its mirror source, ``tasks.max`` from ``--tasks``), ``spark-rt``
(the same in Spark's Real-time Mode, ``spark.mode: realtime``), ``spark-kafka``
(the job with Spark's own Kafka source: the old data path), ``mm2`` (MirrorSourceConnector on a
Connect worker of its own, ``tasks.max`` ``--tasks``); all at-least-once, all by default. Same heap,
same client settings (mirror_throughput.py's). With ``--rounds`` > 1 the engine order rotates each
round. The load average is printed with every figure; run it alone on the machine. Not a test.
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import mirror_throughput as mt  # noqa: E402 - the engines, as the 6-partition benchmark runs them
from mm2spec.dev import DevPorts, DevStack  # noqa: E402

ENGINES = ("spark", "spark-rt", "spark-kafka", "mm2")
"""spark: the mirror source in micro-batches; spark-rt: the same in Spark's Real-time Mode
(spark.mode: realtime); spark-kafka: Spark's own Kafka source; mm2: MirrorMaker 2."""
TOPIC_PREFIX = "wide-"
KAFKA_CALL_TIMEOUT_S = 120.0
#: Topics per CreateTopics request (the broker refuses too many partitions in one).
CREATE_CHUNK = 500
#: An engine must have mirrored the backlog within this.
BACKLOG_TIMEOUT_S = 3600.0
DRAIN_TIMEOUT_S = 900.0
#: The live writer hands the records due to its producers this often (a token bucket by the wall clock).
WRITER_SLICE_S = 0.02
#: librdkafka sends one produce request per partition batch (never several partitions in one, as the
#: Java producer does): spread one record at a time over 1,000 partitions, 5,000 records/s were 5,000
#: requests/s on one connection, which the source broker served one after the other and, on a busy
#: 2-core machine, seconds late (the writer's p99 delay was 11-19 s). So the writer sends at most
#: about this many requests a second: above that rate, each partition's batch lingers
#: (``writer_linger_ms``) ...
WRITER_REQUESTS_PER_S = 1250
WRITER_LINGER_MS_RANGE = (5, 1000)
#: ... and the partitions are split over this many producers, each its own connection, served in parallel.
WRITER_PRODUCERS = 4
#: The writer writes at least this long before its records count (and its rate is judged), and
#: until the source has acknowledged the asked rate in each of the last ``WRITER_WARMUP_HELD_S``
#: windows: a fresh producer on many fresh source partitions is acknowledged slowly at first and
#: then in a burst, whatever the engine (benchmarks/README.md), a load the asked rate does not
#: describe. The warm-up's records are mirrored like the others; no figure counts them.
WRITER_WARMUP_S = 5.0
WRITER_WARMUP_HELD_S = 5
#: A writer that has not held its rate by then starts counting anyway (and is judged behind).
WRITER_WARMUP_MAX_S = 120.0
#: The writer's rate is judged per window this long (at 5,000 records/s a slice's records are 2% of it).
WRITER_WINDOW_S = 1.0
#: A window in which the source acknowledged less than this share of the asked rate: the writer fell behind.
WRITER_HELD_SHARE = 0.95
#: The writer process starts (spawned: a fresh interpreter) and learns every partition's leader in this.
WRITER_READY_TIMEOUT_S = 120.0
#: After its last record, the writer waits this long for the source to acknowledge every record.
WRITER_FLUSH_TIMEOUT_S = 300.0


def log(message: str) -> None:
    mt.log(message)


@dataclass
class WideRun:
    engine: str
    round: int
    partitions: int
    backlog_records: int
    targets: str = "by the engine"
    """``pre-created`` (``--precreate-targets``: by the benchmark, before the engine started) or
    ``by the engine``."""
    backlog_s: float | None = None
    first_record_s: float | None = None
    """From the start command until DR held a first record: the engine's start-up (to within a sample)."""
    live_rate: float = 0.0
    """The rate asked of the live writer (records/s)."""
    live_records: int | None = None
    """Records the writer wrote, its warm-up included."""
    writer_linger_ms: int | None = None
    writer_warmup_s: float | None = None
    """How long the writer wrote before its records counted (see ``warmed_up``)."""
    """The writer's linger.ms (``writer_linger_ms``): records reach the source up to this after they are due."""
    writer_rate_per_s: float | None = None
    """The rate the source acknowledged over the counted seconds."""
    writer_slowest_window_per_s: float | None = None
    writer_windows: list | None = None
    """Records/s the source acknowledged in each counted second (after the writer's warm-up)."""
    writer_windows_behind: int | None = None
    """Seconds below 95% of ``live_rate``."""
    writer_behind: bool | None = None
    """True: the writer did not hold the asked rate; the lag and latency figures are not comparable."""
    lag_mean_records: float | None = None
    lag_p99_records: float | None = None
    lag_max_records: float | None = None
    latency_mean_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_max_ms: float | None = None
    source_delay_p99_ms: float | None = None
    """The writer's delay, handed to its producer until on the source (not the mirror's)."""
    drain_s: float | None = None
    cpu_backlog_s: float | None = None
    cpu_start_s: float | None = None
    """CPU-seconds until DR held a first record (the engine's start-up)."""
    cpu_copy_per_million: float | None = None
    """CPU-seconds of the backlog after the start-up, per million records of the backlog."""
    """CPU-seconds of the engine's processes from its start command until DR held the backlog."""
    cpu_backlog_per_million: float | None = None
    cpu_live_s: float | None = None
    """CPU-seconds of the engine's processes from the writer's first record until DR held its last."""
    cpu_live_per_million: float | None = None
    idle_seconds: float | None = None
    idle_cpu_s_per_min: float | None = None
    """CPU-seconds per minute of the engine's processes with nothing written (after the drain)."""
    source_records: int | None = None
    target_records: int | None = None
    duplicates: int | None = None
    """Records DR holds beyond the source's, summed over the partitions where it holds more."""
    missing: int | None = None
    """Records DR lacks, summed over the partitions where it holds fewer than the source."""
    spark_errors: int | None = None
    """Spark: failed batches (queries) the job counted; a failed batch is replayed at-least-once."""
    spark_restarts: int | None = None
    load: list = field(default_factory=list)
    batches: int | None = None
    profile: dict | None = None
    lag_timeline: list | None = None
    """Per sample of the counted seconds: [seconds from the first counted one, lag in records,
    partitions more than a second of their writes behind] (where a stall sits, and how wide)."""
    live_phases_ms: dict | None = None
    """Spark: per phase of a batch (Spark's durationMs and the job's split of the write), the median
    and the maximum over the batches seen during the live load (status file, once per sample)."""


# ------------------------------------------------------------------------------------ Kafka


class Partitions:
    """Every (topic, partition) of the source, in the writer's round-robin order."""

    def __init__(self, topics: int, partitions: int, prefix: str = TOPIC_PREFIX):
        self.prefix = prefix
        self.names = [f"{prefix}{t:05d}" for t in range(topics)]
        self.partitions = partitions
        self.all = [(name, p) for p in range(partitions) for name in self.names]

    def __len__(self) -> int:
        return len(self.all)


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), CREATE_CHUNK):
        chunk = [NewTopic(n, partitions, -1) for n in names[i:i + CREATE_CHUNK]]
        for future in admin.create_topics(chunk, operation_timeout=KAFKA_CALL_TIMEOUT_S).values():
            future.result(KAFKA_CALL_TIMEOUT_S)
    deadline = time.monotonic() + KAFKA_CALL_TIMEOUT_S
    while time.monotonic() < deadline:  # the broker serves every partition's leader
        topics = admin.list_topics(timeout=KAFKA_CALL_TIMEOUT_S).topics
        if all(n in topics and len(topics[n].partitions) == partitions
               and all(p.leader >= 0 for p in topics[n].partitions.values()) for n in names):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the {len(names)} topics on {bootstrap} ({names[0]}, ...) did not get leaders within "
                       f"{KAFKA_CALL_TIMEOUT_S:.0f} s")


def delete_prefix(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=KAFKA_CALL_TIMEOUT_S).topics if t.startswith(prefix)]
    for i in range(0, len(names), CREATE_CHUNK):
        for future in admin.delete_topics(names[i:i + CREATE_CHUNK], operation_timeout=KAFKA_CALL_TIMEOUT_S).values():
            try:
                future.result(KAFKA_CALL_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a leftover topic costs disk, not correctness
                log(f"deleting {prefix}*: {exc}")


class EndOffsets:
    """The end offsets of many partitions in one ListOffsets round; missing ones count as 0."""

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]]):
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.partitions = partitions

    def read(self, earliest: bool = False) -> list[int]:
        """The end offsets, or with ``earliest`` the start offsets."""
        spec = OffsetSpec.earliest() if earliest else OffsetSpec.latest()
        request = {TopicPartition(t, p): spec for t, p in self.partitions}
        try:
            futures = self.admin.list_offsets(request, request_timeout=30)
        except Exception:  # noqa: BLE001 - topics not created yet: nothing mirrored yet
            return [0] * len(self.partitions)
        out = []
        missing = False
        for t, p in self.partitions:
            try:
                out.append(futures[TopicPartition(t, p)].result(30).offset)
            except Exception:  # noqa: BLE001 - this target topic does not exist yet
                out.append(0)
                missing = True
        if missing:
            # A client that asked before the topics existed keeps failing for 10,000 of them after
            # they do: the next read starts from fresh metadata.
            self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return out


def record_counts(bootstrap: str, partitions: list[tuple[str, int]]) -> list[int]:
    """Records per partition: end minus start offset. Exact for partitions written without
    transactions (every engine here, and the benchmark's producers); a transaction's commit marker
    takes an offset too, so an exactly-once target would be counted by reading it read_committed."""
    offsets = EndOffsets(bootstrap, partitions)
    starts = offsets.read(earliest=True)
    return [end - start for start, end in zip(starts, offsets.read())]


def surplus(source: list[int], target: list[int]) -> tuple[int, int]:
    """(duplicates, missing) from per-partition record counts: what DR holds beyond the source,
    summed where it holds more, and what it lacks, summed where it holds fewer (apart, so a lost
    record cannot hide a duplicate in the total)."""
    return (sum(max(0, t - s) for s, t in zip(source, target)),
            sum(max(0, s - t) for s, t in zip(source, target)))


def fill(bootstrap: str, parts: Partitions, count: int, size: int) -> None:
    # No delivery timeout: at 10,000 partitions the fill takes minutes and librdkafka's default 300 s
    # dropped records (the backlog then never completed); main() counts what the source holds.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1048576,
                         "queue.buffering.max.messages": 1000000, "message.timeout.ms": 0})
    payload = b"x" * (size - 10)
    for i in range(count):
        topic, partition = parts.all[i % len(parts)]
        while True:
            try:
                producer.produce(topic, key=b"%010d" % i, value=payload, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)


def writer_linger_ms(width: int, rate: float) -> int:
    """The writer's ``linger.ms``: at most ``WRITER_REQUESTS_PER_S`` produce requests a second, a
    partition's batch leaving at most every ``width / WRITER_REQUESTS_PER_S`` s, within
    ``WRITER_LINGER_MS_RANGE`` (1,000 partitions at 5,000 records/s: 800 ms, about 4 records a
    batch). At or below that rate each record may go on its own: no linger (the shortest)."""
    low, high = WRITER_LINGER_MS_RANGE
    if rate <= WRITER_REQUESTS_PER_S:
        return low
    return int(min(high, max(low, 1000 * width / WRITER_REQUESTS_PER_S)))


def live_writer(bootstrap: str, topics: int, partitions: int, prefix: str, start_index: int, rate: float,
                seconds: float, size: int, linger_ms: int, out) -> None:
    """A process of its own (spawned): writes ``rate`` records/s round-robin through its warm-up
    (``WRITER_WARMUP_S``) then ``seconds``, a token bucket by the wall clock (every ``WRITER_SLICE_S``
    it hands its producers every record due by then, whatever the previous slice took); partition
    ``k`` always through producer ``k % WRITER_PRODUCERS``, so each partition's records stay in
    order. Sends ``("ready", t0)`` once its producers know every partition's leader (the clock
    starts there), ``("counting", t1)`` when the warm-up ends (the counted seconds start there),
    then ``(written, handed, acked)``: (time, records handed to the producers so far) after each
    slice, and (time, records the source acknowledged so far) as the acknowledgements came in."""
    parts = Partitions(topics, partitions, prefix)
    acknowledged = [0]

    def delivered(error, _message) -> None:
        if error is None:
            acknowledged[0] += 1

    # No delivery timeout: a record the source is slow to take is late, never dropped (a dropped one
    # would stand for ever as lag).
    producers = [Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "batch.size": 1048576,
                           "queue.buffering.max.messages": 1000000, "message.timeout.ms": 0, "on_delivery": delivered})
                 for _ in range(WRITER_PRODUCERS)]
    for producer in producers:
        producer.list_topics(timeout=KAFKA_CALL_TIMEOUT_S)
    payload = b"y" * (size - 10)
    total = None  # known once the warm-up ends: the records due by the end of the counted seconds
    written = 0
    began, began_at = time.monotonic(), time.time()
    handed, acked = [(began_at, 0)], [(began_at, 0)]

    def serve(until: float) -> None:
        """Serve the acknowledgements until ``until`` (monotonic), keeping when they came."""
        while True:
            for producer in producers:
                producer.poll(0)
            if acknowledged[0] != acked[-1][1]:
                acked.append((time.time(), acknowledged[0]))
            left = until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.005))

    out.send(("ready", began_at))
    next_slice = began
    while total is None or written < total:
        if total is None:
            warmed = warmed_up(acked, began_at, time.time(), rate)
            if warmed is not None:
                out.send(("counting", warmed))
                total = int(rate * (warmed - began_at + seconds))
        due = int(rate * (time.monotonic() - began))
        if total is not None:
            due = min(total, due)
        while written < due:
            i = start_index + written
            k = i % len(parts)
            topic, partition = parts.all[k]
            try:
                producers[k % WRITER_PRODUCERS].produce(topic, key=b"%010d" % i, value=payload, partition=partition)
            except BufferError:  # the queue is full: the source takes less than the rate
                serve(time.monotonic() + 0.01)
                continue
            written += 1
        handed.append((time.time(), written))
        next_slice = max(next_slice + WRITER_SLICE_S, time.monotonic())
        serve(next_slice)
    deadline = time.monotonic() + WRITER_FLUSH_TIMEOUT_S
    while acknowledged[0] < written and time.monotonic() < deadline:
        serve(time.monotonic() + 0.05)
    out.send((written, handed, acked))


def warmed_up(acked: list[tuple[float, int]], began: float, now: float, rate: float) -> float | None:
    """When the writer's warm-up ends (the counted seconds start), or None while it goes on: at least
    ``WRITER_WARMUP_S`` after ``began``, once each of the last ``WRITER_WARMUP_HELD_S`` whole windows
    before ``now`` held ``WRITER_HELD_SHARE`` of ``rate`` (or ``WRITER_WARMUP_MAX_S`` after ``began``)."""
    if now - began >= WRITER_WARMUP_MAX_S:
        return now
    if now - began < max(WRITER_WARMUP_S, WRITER_WARMUP_HELD_S * WRITER_WINDOW_S):
        return None
    held_since = now - WRITER_WARMUP_HELD_S * WRITER_WINDOW_S
    windows = writer_windows(acked, held_since, WRITER_WARMUP_HELD_S * WRITER_WINDOW_S)
    return now if all(w >= WRITER_HELD_SHARE * rate for w in windows) else None


def writer_windows(acked: list[tuple[float, int]], start: float, seconds: float,
                   window: float = WRITER_WINDOW_S) -> list[float]:
    """Records/s the source acknowledged in each whole ``window`` of ``seconds`` from ``start``:
    ``acked`` holds (time, records acknowledged so far), non-decreasing."""
    before = counted_before(acked)
    return [(before(start + (k + 1) * window) - before(start + k * window)) / window
            for k in range(int(seconds / window + 1e-9))]


def counted_before(timeline: list[tuple[float, int]]):
    """``t`` -> the count of (time, count so far) ``timeline`` just before ``t`` (windows are half-open)."""
    times = [t for t, _ in timeline]

    def before(t: float) -> int:
        i = bisect.bisect_left(times, t) - 1
        return timeline[i][1] if i >= 0 else 0

    return before


def judge_writer(run: WideRun, acked: list[tuple[float, int]], counted_from: float, seconds: float) -> None:
    """The rate the writer reached over the ``seconds`` counted from ``counted_from``, per window and
    over all, and whether it held the asked rate. ``counted_from`` is at least a linger after the
    writer's start: a record is acknowledged up to a linger after it was handed, so the first
    linger holds fewer acknowledgements by design, not by falling behind."""
    windows = writer_windows(acked, counted_from, seconds)
    run.writer_windows = [round(w, 1) for w in windows]
    before = counted_before(acked)
    run.writer_rate_per_s = round((before(counted_from + seconds) - before(counted_from)) / seconds, 1) \
        if seconds > 0 else None
    if windows:
        run.writer_slowest_window_per_s = round(min(windows), 1)
        run.writer_windows_behind = sum(1 for w in windows if w < WRITER_HELD_SHARE * run.live_rate)
        run.writer_behind = run.writer_windows_behind > 0


def writer_warning(run: WideRun) -> str:
    return (f"WRITER FELL BEHIND in {run.engine} round {run.round}: {run.writer_windows_behind} of "
            f"{len(run.writer_windows or [])} {WRITER_WINDOW_S:g}-second windows below {WRITER_HELD_SHARE:.0%} of "
            f"{run.live_rate:,.0f} records/s (slowest {run.writer_slowest_window_per_s:,.0f}/s, over all "
            f"{run.writer_rate_per_s:,.0f}/s): its lag and latency figures are not comparable with another run's")


# ------------------------------------------------------------------------------------ one run


def wait_for(total: int, target: EndOffsets, timeout: float, sample: float,
             first: list | None = None, at_first=lambda: None) -> float | None:
    """When (monotonic) the target holds ``total`` records, None after ``timeout``; ``first`` gets
    when it first held any (each to within one ``sample``) and what ``at_first()`` said then."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        held = sum(target.read())
        if held and first is not None and not first:
            first.extend((time.monotonic(), at_first()))
        if held >= total:
            return time.monotonic()
        time.sleep(sample)
    return None


def engine_cpu(engine) -> float:
    """CPU-seconds (user + system) of the engine's processes so far, from /proc."""
    return mt.cpu_seconds(engine.process_groups())


def per_million(cpu_s: float, records: int) -> float | None:
    return round(cpu_s / records * 1e6, 2) if records else None


def measure(engine, engine_name: str, round_no: int, primary: str, dr: str, parts: Partitions, args,
            alias: str, backlog_before: int) -> WideRun:
    run = WideRun(engine_name, round_no, len(parts), backlog_before, live_rate=args.rate,
                  targets="pre-created" if args.precreate_targets else "by the engine",
                  load=[round(mt.load_average(), 1)])
    target_partitions = [(f"{alias}.{t}", p) for t, p in parts.all]
    target = EndOffsets(dr, target_partitions)
    if args.precreate_targets:
        log(f"{engine_name} round {round_no}: creating the {len(parts.names):,} target topics on DR first")
        create_topics(dr, [f"{alias}.{name}" for name in parts.names], args.partitions)
    total = backlog_before
    began = time.monotonic()
    engine.start(primary, dr, alias, f"{parts.prefix}.*")
    first: list = []
    done = wait_for(total, target, BACKLOG_TIMEOUT_S, args.sample, first, lambda: engine_cpu(engine))
    cpu = engine_cpu(engine)
    run.backlog_s = round(done - began, 1) if done else None
    run.first_record_s = round(first[0] - began, 1) if first else None
    run.cpu_start_s = round(first[1], 1) if first else None
    if first and done:
        run.cpu_copy_per_million = per_million(cpu - first[1], total)
    run.cpu_backlog_s = round(cpu, 1)
    run.cpu_backlog_per_million = per_million(cpu, total) if done else None
    run.load.append(round(mt.load_average(), 1))
    log(f"{engine_name} round {round_no}: backlog of {total:,} on DR in "
        f"{run.backlog_s if run.backlog_s is not None else 'NEVER'} s (the first record after {run.first_record_s} s), "
        f"{cpu:.1f} CPU-s, load {run.load[-1]}")
    if done is not None and args.live_seconds > 0:
        live(run, engine, primary, parts, target, args, total)
    if done is not None and args.idle_seconds > 0:
        before = engine_cpu(engine)
        time.sleep(args.idle_seconds)
        run.idle_seconds = args.idle_seconds
        run.idle_cpu_s_per_min = round((engine_cpu(engine) - before) / args.idle_seconds * 60, 2)
    source_counts, target_counts = record_counts(primary, parts.all), record_counts(dr, target_partitions)
    run.source_records, run.target_records = sum(source_counts), sum(target_counts)
    run.duplicates, run.missing = surplus(source_counts, target_counts)
    run.batches = engine.batches()
    run.profile = engine.profile()
    if run.profile:
        run.spark_errors, run.spark_restarts = run.profile.get("errors"), run.profile.get("restarts")
    return run


def live(run: WideRun, engine, primary: str, parts: Partitions, target: EndOffsets, args, total: int) -> None:
    """The live load, its drain and their figures (see the module's docstring)."""
    source = EndOffsets(primary, parts.all)
    base = target.read()
    source_base = source.read()
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no librdkafka threads forked
    receive, send = spawn.Pipe(duplex=False)
    run.writer_linger_ms = writer_linger_ms(len(parts), args.rate)
    writer = spawn.Process(target=live_writer, daemon=True,
                           args=(primary, args.topics, args.partitions, parts.prefix, total, args.rate,
                                 args.live_seconds, args.size, run.writer_linger_ms, send))
    writer.start()
    send.close()  # the writer holds the only sending end: its exit ends recv() with EOFError
    if not receive.poll(WRITER_READY_TIMEOUT_S):
        writer.kill()
        raise RuntimeError(f"the live writer was not ready within {WRITER_READY_TIMEOUT_S:.0f} s")
    _, writer_began = receive.recv()
    counted_from = None  # the writer says when its warm-up ends
    cpu_before = engine_cpu(engine)
    samples: list[tuple[float, list[int], float, list[int]]] = []
    phases: dict[int, dict] = {}

    def sample() -> list[int]:
        """Both clusters' end offsets (and Spark's batch phases) into ``samples``; DR's are returned."""
        profile = engine.profile()
        if profile and profile.get("lastBatchId") is not None:
            phases[profile["lastBatchId"]] = {**(profile.get("batchPhasesMs") or {}), **(profile.get("lastBatchMs") or {})}
        at_source, ends_source = time.time(), source.read()
        at_target, ends_target = time.time(), target.read()
        samples.append((at_source, ends_source, at_target, ends_target))
        return ends_target

    while True:
        if receive.poll():
            try:
                message = receive.recv()
            except EOFError:
                raise RuntimeError(f"the live writer exited (code {writer.exitcode}) without its timeline; "
                                   "its traceback, if any, is above") from None
            if message[0] != "counting":
                written, handed, acked = message
                break
            counted_from = message[1]
            log(f"live load counted from here: the writer held {args.rate:,.0f} records/s after a warm-up of "
                f"{counted_from - writer_began:.1f} s")
        elif not writer.is_alive():
            raise RuntimeError(f"the live writer exited (code {writer.exitcode}) without its timeline; "
                               "its traceback, if any, is above")
        asked = time.time()
        sample()
        time.sleep(max(0.0, args.sample - (time.time() - asked)))
    run.writer_warmup_s = round(counted_from - writer_began, 1)
    writer.join(30)
    expected = live_per_partition(total, written, len(parts))
    stopped = time.time()
    drained_at = None
    while time.time() - stopped < DRAIN_TIMEOUT_S:
        asked = time.time()
        ends_target = sample()
        if all(end - b >= n for end, b, n in zip(ends_target, base, expected)):
            drained_at = asked
            break
        time.sleep(max(0.0, args.sample - (time.time() - asked)))
    cpu = engine_cpu(engine) - cpu_before
    run.live_records = written
    run.drain_s = round(max(0.0, drained_at - acked[-1][0]), 2) if drained_at else None
    run.cpu_live_s = round(cpu, 1)
    run.cpu_live_per_million = per_million(cpu, written) if drained_at else None
    run.load.append(round(mt.load_average(), 1))
    judge_writer(run, acked, counted_from, args.live_seconds)
    if run.writer_behind:
        log("!!! " + writer_warning(run))
    figures(run, handed, samples, source_base, base, len(parts), total, counted_from)
    if phases:
        keys = sorted({k for p in phases.values() for k in p})
        run.live_phases_ms = {k: {"median": statistics.median(p.get(k, 0) for p in phases.values()),
                                  "max": max(p.get(k, 0) for p in phases.values())} for k in keys}
        run.live_phases_ms["batchesSeen"] = len(phases)


def live_per_partition(start: int, written: int, width: int) -> list[int]:
    """How many of the writer's records ``start`` .. ``start + written - 1`` went to each partition
    (record ``i`` goes to partition ``i % width``)."""
    return [(start + written - 1 - k) // width - (start - 1 - k) // width for k in range(width)]


def lag_figures(run: WideRun, lags: list[int]) -> None:
    """Mean, p99 and max of the lag samples (records)."""
    if lags:
        ordered = sorted(lags)
        run.lag_mean_records = round(statistics.fmean(ordered), 1)
        run.lag_p99_records = float(quantile(ordered, 0.99))
        run.lag_max_records = float(ordered[-1])


def figures(run: WideRun, timeline, samples, source_base: list[int], base: list[int], width: int, start: int,
            counted_from: float) -> None:
    """Lag (records on the source minus records on DR, per sample while writing from ``counted_from``)
    and the replication latency of each record handed to the producer from then (the writer puts its
    record ``start + n`` on partition ``(start + n) % width``: it is on a cluster from the first sample
    where that partition's end there passed its place)."""
    written_at = [t for t, _ in timeline]
    counts = [n for _, n in timeline]
    counted = [(t, src, dst) for t, src, _, dst in samples if counted_from <= t <= written_at[-1]]
    lag_figures(run, [max(0, (sum(src) - sum(source_base)) - (sum(dst) - sum(base))) for _, src, dst in counted])
    second_of_writes = max(1.0, run.live_rate / width)
    run.lag_timeline = [
        [round(t - counted_from, 2), max(0, (sum(src) - sum(source_base)) - (sum(dst) - sum(base))),
         sum(1 for k in range(width) if (src[k] - source_base[k]) - (dst[k] - base[k]) > second_of_writes)]
        for t, src, dst in counted]
    source_times = [t for t, _, _, _ in samples]
    target_times = [t for _, _, t, _ in samples]
    source_columns = [[src[k] - source_base[k] for _, src, _, _ in samples] for k in range(width)]  # non-decreasing
    target_columns = [[dst[k] - base[k] for _, _, _, dst in samples] for k in range(width)]
    stride = max(1, counts[-1] // 50_000)  # every record up to 50,000, a regular sample beyond
    latencies, source_delays = [], []
    previous = 0
    for t_written, n in timeline:
        first = -(-previous // stride) * stride
        for record in range(first, n, stride) if t_written >= counted_from else ():
            # The writer's index of this record is start + record: its partition, and its place
            # among the live records of that partition (how many of start .. index-1 went there).
            index = start + record
            k = index % width
            seq = (index - 1 - k) // width - (start - 1 - k) // width
            i = bisect.bisect_left(source_columns[k], seq + 1)
            j = bisect.bisect_left(target_columns[k], seq + 1)
            on_source = source_times[i] if i < len(source_times) else None
            if on_source is not None:
                source_delays.append(max(0.0, on_source - t_written) * 1000)
            if j >= len(target_times):
                latencies.append(float("inf"))
            elif on_source is not None:
                latencies.append(max(0.0, target_times[j] - on_source) * 1000)
        previous = n
    if source_delays:
        run.source_delay_p99_ms = round(quantile(sorted(source_delays), 0.99), 0)
    if latencies:
        latencies.sort()
        seen = [x for x in latencies if x != float("inf")]
        run.latency_mean_ms = round(statistics.fmean(seen), 0) if seen else None
        run.latency_p50_ms = round(quantile(latencies, 0.5), 0)
        run.latency_p99_ms = round(quantile(latencies, 0.99), 0)
        run.latency_max_ms = round(latencies[-1], 0)


def quantile(ordered: list, q: float):
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ------------------------------------------------------------------------------------ report


def fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if value == float("inf"):
        return "never"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.0f}{unit}" if abs(value) >= 100 else f"{value:,.1f}{unit}"


def ratio(mine, mm2) -> str:
    """``mine`` as a multiple of MM2's figure; against MM2's 0 (a lag of none), both figures."""
    if mine is None or mm2 is None:
        return "-"
    return f"{mine / mm2:.2f}x" if mm2 else f"{fmt(mine)} against 0"


def _copy_s(run: WideRun) -> float | None:
    """The backlog's time after the engine's start-up: from DR's first record to its last."""
    if run.backlog_s is None or run.first_record_s is None:
        return None
    return round(run.backlog_s - run.first_record_s, 1)


def print_table(runs: list[WideRun]) -> None:
    header = (f"{'engine':<12} {'round':>5} {'partitions':>10} {'targets':<13} {'backlog s':>9} {'first s':>7} {'lag mean':>9} "
              f"{'lag p99':>9} {'lag max':>9} {'lat mean ms':>11} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
              f"{'drain s':>7} {'writer/s':>8} {'slowest/s':>9} {'held':>4} {'batches':>7} {'source p99':>10}  load")
    print(header)
    print("-" * len(header))
    for r in runs:
        held = "-" if r.writer_behind is None else ("NO" if r.writer_behind else "yes")
        print(f"{r.engine:<12} {r.round:>5} {r.partitions:>10,} {r.targets:<13} {fmt(r.backlog_s):>9} "
              f"{fmt(r.first_record_s):>7} {fmt(r.lag_mean_records):>9} {fmt(r.lag_p99_records):>9} {fmt(r.lag_max_records):>9} "
              f"{fmt(r.latency_mean_ms):>11} {fmt(r.latency_p50_ms):>7} {fmt(r.latency_p99_ms):>7} "
              f"{fmt(r.latency_max_ms):>7} {fmt(r.drain_s):>7} {fmt(r.writer_rate_per_s):>8} "
              f"{fmt(r.writer_slowest_window_per_s):>9} {held:>4} {fmt(r.batches):>7} {fmt(r.source_delay_p99_ms):>10}"
              f"  {r.load}")
    print()
    cost = (f"{'engine':<12} {'round':>5} {'CPU-s backlog':>13} {'per M':>7} {'CPU-s live':>10} {'per M':>7} "
            f"{'start CPU-s':>11} {'copy per M':>10} {'idle CPU-s/min':>14} {'source records':>14} {'DR records':>11} "
            f"{'duplicates':>10} {'missing':>8} "
            f"{'errors/restarts':>15}")
    print(cost + "   (CPU: the engine's processes; per M: per million records mirrored)")
    print("-" * len(cost))
    for r in runs:
        failures = "-" if r.spark_errors is None else f"{r.spark_errors}/{r.spark_restarts}"
        print(f"{r.engine:<12} {r.round:>5} {fmt(r.cpu_backlog_s):>13} {fmt(r.cpu_backlog_per_million):>7} "
              f"{fmt(r.cpu_live_s):>10} {fmt(r.cpu_live_per_million):>7} {fmt(r.cpu_start_s):>11} "
              f"{fmt(r.cpu_copy_per_million):>10} {fmt(r.idle_cpu_s_per_min):>14} "
              f"{fmt(r.source_records):>14} {fmt(r.target_records):>11} {fmt(r.duplicates):>10} {fmt(r.missing):>8} "
              f"{failures:>15}")
    by_round: dict[int, dict[str, WideRun]] = {}
    for r in runs:
        by_round.setdefault(r.round, {})[r.engine] = r
    for round_no, engines in sorted(by_round.items()):
        mm2 = engines.get("mm2")
        for name, r in engines.items():
            if name != "mm2" and mm2:
                print(f"round {round_no}: {name} against MM2: backlog {ratio(r.backlog_s, mm2.backlog_s)} "
                      f"(after the first record {ratio(_copy_s(r), _copy_s(mm2))}), "
                      f"lag mean {ratio(r.lag_mean_records, mm2.lag_mean_records)}, "
                      f"lag max {ratio(r.lag_max_records, mm2.lag_max_records)}, "
                      f"p99 latency {fmt(r.latency_p99_ms, ' ms')} (MM2 {fmt(mm2.latency_p99_ms, ' ms')}), "
                      f"CPU per M records backlog {ratio(r.cpu_backlog_per_million, mm2.cpu_backlog_per_million)} "
                      f"(after the start-up {ratio(r.cpu_copy_per_million, mm2.cpu_copy_per_million)}) "
                      f"live {ratio(r.cpu_live_per_million, mm2.cpu_live_per_million)}, "
                      f"idle CPU {ratio(r.idle_cpu_s_per_min, mm2.idle_cpu_s_per_min)}")
    for r in runs:
        if r.profile:
            print(f"profile {r.engine} round {r.round} (last batch): {json.dumps(r.profile, sort_keys=True)}")
        if r.live_phases_ms:
            print(f"live batch phases {r.engine} round {r.round} (ms): {json.dumps(r.live_phases_ms, sort_keys=True)}")
        if r.lag_timeline:
            worst = max(r.lag_timeline, key=lambda sample: sample[1])
            print(f"lag peak {r.engine} round {r.round}: {worst[1]:,} records at {worst[0]:.1f} s of the live load, "
                  f"{worst[2]} of {r.partitions} partitions over a second of their writes behind")
    behind = [r for r in runs if r.writer_behind]
    for r in behind:
        print("!!! " + writer_warning(r))
    if not behind and any(r.writer_behind is not None for r in runs):
        print(f"the live writer held {WRITER_HELD_SHARE:.0%} of the asked rate in every {WRITER_WINDOW_S:g}-second "
              "window of every run")


# ------------------------------------------------------------------------------------ main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=5, help="per topic")
    parser.add_argument("--records", type=int, default=200_000, help="the backlog")
    parser.add_argument("--size", type=int, default=100, help="bytes per record (10-byte key + value)")
    parser.add_argument("--rate", type=float, default=5000.0, help="records/s of the live load")
    parser.add_argument("--live-seconds", type=float, default=90.0, help="0: backlog only")
    parser.add_argument("--sample", type=float, default=0.5, help="seconds between end-offset samples")
    parser.add_argument("--idle-seconds", type=float, default=20.0,
                        help="seconds with nothing written after the drain, for the idle CPU (0: none)")
    parser.add_argument("--precreate-targets", action="store_true",
                        help="create every target topic (the source's partitions) before each engine starts; "
                             "default: each engine creates its own")
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max of the Spark mirror source and of MM2")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--shared-backlog", action="store_true",
                        help="all engines mirror one set of source topics (each later engine also mirrors the earlier "
                             "ones' live load); default: each engine its own topics with the same fresh backlog")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--spark-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--flow-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workdir")
    parser.add_argument("--json", help="write every run to this file")
    args = parser.parse_args()
    for flag in ("spark_set", "flow_set"):
        items = getattr(args, flag)
        if any("=" not in item for item in items):
            parser.error(f"--{flag.replace('_', '-')} takes KEY=VALUE")
        setattr(args, flag, dict(item.split("=", 1) for item in items))
    unknown = set(args.engines.split(",")) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {', '.join(ENGINES)}")
    return args


def main() -> int:
    args = parse_args()
    engines = args.engines.split(",")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mm2spec-wide-"))
    log(f"starting the dev clusters in {workdir}; load average {mt.load_average():.1f}")
    stack = DevStack(workdir / "dev", ports=DevPorts.free(), tie_to_parent=True, echo=lambda line: None)
    state = stack.up(with_connect=False, timeout=300)
    primary, dr = state.primary.bootstrap, state.dr.bootstrap

    def engine_of(name: str):
        if name.startswith("spark"):
            spark_set = {"source": "kafka" if name == "spark-kafka" else "mirror", **args.spark_set}
            flow_set = {"tasks.max": str(args.tasks), **args.flow_set}
            return mt.SparkEngine("spark-rt" if name == "spark-rt" else "spark-alo", workdir / "runs", args.heap,
                                  args.master, None, spark_set, flow_set)
        return mt.Mm2Engine("mm2", workdir / "runs", args.heap, state.dr, tasks_max=args.tasks)

    runs: list[WideRun] = []

    def backlog(parts: Partitions) -> int:
        log(f"creating {args.topics:,} topics x {args.partitions} partitions ({parts.prefix}*) and a backlog of "
            f"{args.records:,} records")
        create_topics(primary, parts.names, args.partitions)
        fill(primary, parts, args.records, args.size)
        held = sum(EndOffsets(primary, parts.all).read())
        if held != args.records:
            log(f"the source holds {held:,} records, not {args.records:,}: the backlog is what it holds")
        return held

    log("target topics: " + ("created by the benchmark before each engine starts (--precreate-targets)"
                             if args.precreate_targets else "created by each engine itself"))
    try:
        shared = Partitions(args.topics, args.partitions) if args.shared_backlog else None
        written = backlog(shared) if shared else 0
        for round_no in range(1, args.rounds + 1):
            shift = (round_no - 1) % len(engines)
            for name in engines[shift:] + engines[:shift]:
                alias = f"{name.replace('-', '')}r{round_no}"
                # Each engine its own source topics and the same fresh backlog, unless --shared-backlog.
                parts = shared or Partitions(args.topics, args.partitions, f"{TOPIC_PREFIX}{alias}-")
                if not shared:
                    written = backlog(parts)
                engine = engine_of(name)
                try:
                    run = measure(engine, name, round_no, primary, dr, parts, args, alias, written)
                finally:
                    engine.stop()
                runs.append(run)
                if args.json:
                    Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=1))
                log(f"{name} round {round_no}: {asdict(run)}")
                delete_prefix(dr, f"{alias}.")
                if shared:
                    # The live load stays on the source: the next engine mirrors it as backlog too.
                    written = sum(EndOffsets(primary, parts.all).read())
                else:
                    delete_prefix(primary, parts.prefix)
    finally:
        stack.down()
    print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
