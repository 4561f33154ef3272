"""The mirror at production width: many partitions, Spark (both sources) against MirrorMaker 2, one run.

    .venv/bin/python benchmarks/mirror_wide.py                     # 200 topics x 5 partitions (1,000)
    .venv/bin/python benchmarks/mirror_wide.py --topics 10000 --partitions 1 --records 200000 \
        --live-seconds 0 --sample 1.0                              # 10,000 partitions, backlog only

Per engine, on source topics of its own with the same fresh backlog (``--shared-backlog``: one
set of topics for all, each later engine then also mirroring the earlier ones' live load), mirrored
from the start into target topics of its own (DefaultReplicationPolicy with a per-run source alias;
both deleted after the run):

1. **Backlog**: ``--records`` records of ``--size`` bytes spread round-robin over every partition;
   the time from the engine's start command until DR holds all of them (start-up included).
2. **Live load**: a writer process (its own producer) adds ``--rate`` records/s spread round-robin
   over every partition for ``--live-seconds``; both clusters' end offsets are sampled every
   ``--sample`` s. Lag in records: records on the source minus records on DR, mean and p99 over the
   samples. Replication latency per record: when DR's end offset of its partition first covered it
   minus when the source's did (each to within one sample); mean, p50, p99, max. The writer's own
   delay (handed to its producer until on the source) is printed beside it (``source p99``): it is
   not the mirror's.
3. **Drain**: from the writer's last record until DR holds every record.

Engines: ``spark`` (the job with its mirror source, ``tasks.max`` from ``--tasks``), ``spark-rt``
(the same in Spark's Real-time Mode, ``spark.mode: realtime``), ``spark-kafka``
(the job with Spark's own Kafka source: the old data path), ``mm2`` (MirrorSourceConnector on a
Connect worker of its own, ``tasks.max`` ``--tasks``). Same heap, same client settings
(mirror_throughput.py's). With ``--rounds`` > 1 the engine order rotates each round. The load
average is printed with every figure; run it alone on the machine. Not a test.
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


def log(message: str) -> None:
    mt.log(message)


@dataclass
class WideRun:
    engine: str
    round: int
    partitions: int
    backlog_records: int
    backlog_s: float | None = None
    live_rate: float = 0.0
    live_written_per_s: float | None = None
    lag_mean_records: float | None = None
    lag_p99_records: float | None = None
    latency_mean_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_max_ms: float | None = None
    source_delay_p99_ms: float | None = None
    """The writer's delay, handed to its producer until on the source (not the mirror's)."""
    drain_s: float | None = None
    load: list = field(default_factory=list)
    batches: int | None = None
    profile: dict | None = None
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
    raise RuntimeError(f"the {len(names)} source topics did not get leaders within {KAFKA_CALL_TIMEOUT_S:.0f} s")


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

    def read(self) -> list[int]:
        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in self.partitions}
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


def live_writer(bootstrap: str, topics: int, partitions: int, prefix: str, start_index: int, rate: float,
                seconds: float, size: int, out) -> None:
    """A process of its own: writes ``rate`` records/s round-robin, and sends back (time, records
    handed to the producer so far) every slice, then the total once every record is acknowledged."""
    parts = Partitions(topics, partitions, prefix)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1000000})
    payload = b"y" * (size - 10)
    began = time.monotonic()
    written = 0
    timeline = []
    while True:
        now = time.monotonic()
        if now - began >= seconds:
            break
        due = int(rate * (now - began))
        while written < due:
            i = start_index + written
            topic, partition = parts.all[i % len(parts)]
            try:
                producer.produce(topic, key=b"%010d" % i, value=payload, partition=partition)
            except BufferError:
                producer.poll(0.01)
                continue
            written += 1
        producer.poll(0)
        timeline.append((time.time(), written))
        time.sleep(0.005)
    producer.flush(120)
    out.send((timeline, written))


# ------------------------------------------------------------------------------------ one run


def wait_for(total: int, target: EndOffsets, timeout: float, sample: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if sum(target.read()) >= total:
            return time.monotonic()
        time.sleep(sample)
    return None


def measure(engine, engine_name: str, round_no: int, primary: str, dr: str, parts: Partitions, args,
            alias: str, backlog_before: int) -> WideRun:
    run = WideRun(engine_name, round_no, len(parts), args.records, live_rate=args.rate,
                  load=[round(mt.load_average(), 1)])
    target = EndOffsets(dr, [(f"{alias}.{t}", p) for t, p in parts.all])
    total = backlog_before
    began = time.monotonic()
    engine.start(primary, dr, alias, f"{parts.prefix}.*")
    done = wait_for(total, target, BACKLOG_TIMEOUT_S, args.sample)
    run.backlog_s = round(done - began, 1) if done else None
    run.load.append(round(mt.load_average(), 1))
    log(f"{engine_name} round {round_no}: backlog of {total:,} on DR in "
        f"{run.backlog_s if run.backlog_s is not None else 'NEVER'} s, load {run.load[-1]}")
    if done is None or args.live_seconds <= 0:
        return run
    source = EndOffsets(primary, parts.all)
    base = target.read()
    source_base = source.read()
    receive, send = multiprocessing.Pipe(duplex=False)
    writer = multiprocessing.Process(target=live_writer, daemon=True,
                                     args=(primary, args.topics, args.partitions, parts.prefix, total, args.rate,
                                           args.live_seconds, args.size, send))
    writer.start()
    samples: list[tuple[float, list[int], float, list[int]]] = []
    phases: dict[int, dict] = {}

    def sample() -> list[int]:
        profile = engine.profile()
        if profile and profile.get("lastBatchId") is not None:
            phases[profile["lastBatchId"]] = {**(profile.get("batchPhasesMs") or {}), **(profile.get("lastBatchMs") or {})}
        at_source, ends_source = time.time(), source.read()
        at_target, ends_target = time.time(), target.read()
        samples.append((at_source, ends_source, at_target, ends_target))
        return ends_target

    while writer.is_alive() and not receive.poll():
        asked = time.time()
        sample()
        time.sleep(max(0.0, args.sample - (time.time() - asked)))
    timeline, written = receive.recv()
    writer.join(30)
    stopped = time.time()
    drained_at = None
    while time.time() - stopped < DRAIN_TIMEOUT_S:
        asked = time.time()
        ends = sample()
        if sum(ends) - sum(base) >= written:
            drained_at = asked
            break
        time.sleep(max(0.0, args.sample - (time.time() - asked)))
    run.drain_s = round(drained_at - timeline[-1][0], 2) if drained_at else None
    run.load.append(round(mt.load_average(), 1))
    run.live_written_per_s = round(written / (timeline[-1][0] - timeline[0][0]), 0) if len(timeline) > 1 else None
    figures(run, timeline, samples, source_base, base, len(parts), total)
    if phases:
        keys = sorted({k for p in phases.values() for k in p})
        run.live_phases_ms = {k: {"median": statistics.median(p.get(k, 0) for p in phases.values()),
                                  "max": max(p.get(k, 0) for p in phases.values())} for k in keys}
        run.live_phases_ms["batchesSeen"] = len(phases)
    run.batches = engine.batches()
    run.profile = engine.profile()
    return run


def figures(run: WideRun, timeline, samples, source_base: list[int], base: list[int], width: int, start: int) -> None:
    """Lag (records on the source minus records on DR, per sample while writing) and each record's
    replication latency (the writer puts its record ``start + n`` on partition ``(start + n) % width``:
    it is on a cluster from the first sample where that partition's end there passed its place)."""
    written_at = [t for t, _ in timeline]
    counts = [n for _, n in timeline]
    lags = [max(0, (sum(src) - sum(source_base)) - (sum(dst) - sum(base)))
            for t, src, _, dst in samples if t <= written_at[-1]]
    if lags:
        run.lag_mean_records = round(statistics.fmean(lags), 1)
        run.lag_p99_records = float(quantile(sorted(lags), 0.99))
    source_times = [t for t, _, _, _ in samples]
    target_times = [t for _, _, t, _ in samples]
    source_columns = [[src[k] - source_base[k] for _, src, _, _ in samples] for k in range(width)]  # non-decreasing
    target_columns = [[dst[k] - base[k] for _, _, _, dst in samples] for k in range(width)]
    stride = max(1, counts[-1] // 50_000)  # every record up to 50,000, a regular sample beyond
    latencies, source_delays = [], []
    previous = 0
    for t_written, n in timeline:
        first = -(-previous // stride) * stride
        for record in range(first, n, stride):
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
    return f"{value:,.0f}{unit}" if abs(value) >= 100 else f"{value:,.1f}{unit}"


def print_table(runs: list[WideRun]) -> None:
    header = (f"{'engine':<12} {'round':>5} {'partitions':>10} {'backlog s':>9} {'lag mean':>9} {'lag p99':>9} "
              f"{'lat mean ms':>11} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'drain s':>7} {'written/s':>9} "
              f"{'batches':>7} {'source p99':>10}  load")
    print(header)
    print("-" * len(header))
    for r in runs:
        print(f"{r.engine:<12} {r.round:>5} {r.partitions:>10,} {fmt(r.backlog_s):>9} {fmt(r.lag_mean_records):>9} "
              f"{fmt(r.lag_p99_records):>9} {fmt(r.latency_mean_ms):>11} {fmt(r.latency_p50_ms):>7} "
              f"{fmt(r.latency_p99_ms):>7} {fmt(r.latency_max_ms):>7} {fmt(r.drain_s):>7} "
              f"{fmt(r.live_written_per_s):>9} {fmt(r.batches):>7} {fmt(r.source_delay_p99_ms):>10}  {r.load}")
    by_round: dict[int, dict[str, WideRun]] = {}
    for r in runs:
        by_round.setdefault(r.round, {})[r.engine] = r
    for round_no, engines in sorted(by_round.items()):
        mm2 = engines.get("mm2")
        for name, r in engines.items():
            if name != "mm2" and mm2 and r.backlog_s and mm2.backlog_s:
                print(f"round {round_no}: {name} backlog {r.backlog_s / mm2.backlog_s:.2f}x MM2's time"
                      + (f", mean lag {r.lag_mean_records:,.0f} vs {mm2.lag_mean_records:,.0f} records"
                         if r.lag_mean_records is not None and mm2.lag_mean_records is not None else ""))
    for r in runs:
        if r.profile:
            print(f"profile {r.engine} round {r.round} (last batch): {json.dumps(r.profile, sort_keys=True)}")
        if r.live_phases_ms:
            print(f"live batch phases {r.engine} round {r.round} (ms): {json.dumps(r.live_phases_ms, sort_keys=True)}")


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
