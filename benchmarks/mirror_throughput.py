"""Mirroring throughput and latency, engine by engine, on the dev clusters. Prints a table.

    .venv/bin/python benchmarks/mirror_throughput.py [--quick] [--engines spark-alo,spark-eos,mm2,perf]

Same data for every engine: each data set is produced once into a source topic on ``primary``
(1,000,000 records of 100 B and 200,000 of 1 KB, 6 partitions); every engine then mirrors that
backlog into its own target topic on ``dr`` (DefaultReplicationPolicy with an engine-specific
source alias, so the targets never collide):

* spark-alo   the Spark job, at-least-once (Spark's Kafka sink), local[2]
* spark-eos   the Spark job, exactly-once (transactional writer), local[2]
* mm2         MirrorSourceConnector on a real Kafka Connect worker (tasks.max=2)
* perf        kafka-producer-perf-test (writing dr) and kafka-consumer-perf-test (reading
              primary): what the clusters take without any mirror, the ceiling

Throughput: records mirrored / time from the first record arriving on dr to the last (engine
start-up excluded). Latency: afterwards, with the engine caught up, a producer writes 20 s at a
fixed rate into a second topic of the same flow (``lat-<alias>``, so no engine mirrors another's
latency records) and a consumer on dr measures receive time minus source timestamp (timestamps
are preserved by every engine); p50 and p99 over those records. The Spark job runs with the
rendered defaults (trigger 1 second, max.offsets.per.trigger 1,000,000). Not a test: numbers depend on the
machine, and on everything else running on it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mm2spec.runtime import deployment as mirror  # noqa: E402
from mm2spec.components import components  # noqa: E402
from mm2spec.dev import DevPorts, DevStack  # noqa: E402

DATASETS = [("100B", 1_000_000, 100), ("1KB", 200_000, 1024)]
PARTITIONS = 6
LATENCY_RATE = 5000  # records/s during the latency phase
LATENCY_SECONDS = 20


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, -1)]).values():
        future.result(60)


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
    producer.flush(300)


def end_total(consumer: Consumer, topic: str) -> int:
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error:
            return 0
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions)
    except KafkaException:  # a topic created a moment ago: no leader yet
        return 0


def measure_backlog(dr: str, topic: str, expected: int, timeout: float = 1800) -> tuple[float, float]:
    """(seconds from first to last record on dr, records seen) by polling end offsets."""
    consumer = Consumer({"bootstrap.servers": dr, "group.id": "bench-watch"})
    first = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            total = end_total(consumer, topic)
            now = time.monotonic()
            if total > 0 and first is None:
                first = now
            if total >= expected:
                return now - first, total
            time.sleep(0.1)
        raise TimeoutError(f"{topic}: only {end_total(consumer, topic)} of {expected} records after {timeout:.0f}s")
    finally:
        consumer.close()


def warm_up(primary: str, dr: str, source: str, target: str, timeout: float = 180) -> None:
    """A few records through the latency topic first: engines create target topics lazily."""
    producer = Producer({"bootstrap.servers": primary})
    for i in range(PARTITIONS * 10):
        producer.produce(source, key=b"warm-%d" % i, value=b"x", partition=i % PARTITIONS)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": dr, "group.id": "bench-watch"})
    deadline = time.monotonic() + timeout
    try:
        while end_total(consumer, target) < PARTITIONS * 10:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{target}: warm-up records did not arrive within {timeout:.0f}s")
            time.sleep(0.2)
    finally:
        consumer.close()


def measure_latency(primary: str, dr: str, source: str, target: str, size: int, isolation: str) -> list[float]:
    """End-to-end latencies (ms) of records written at a fixed rate while the mirror runs."""
    consumer = Consumer({"bootstrap.servers": dr, "group.id": f"bench-lat-{time.time_ns()}", "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.wait.max.ms": 10})
    metadata = consumer.list_topics(target, timeout=10).topics[target]
    consumer.assign([TopicPartition(target, p, consumer.get_watermark_offsets(TopicPartition(target, p))[1])
                     for p in metadata.partitions])
    marker = b"lat-"
    latencies: list[float] = []
    done = threading.Event()

    def write():
        producer = Producer({"bootstrap.servers": primary, "linger.ms": 0})
        payload = os.urandom(max(0, size - 14))
        began = time.monotonic()
        i = 0
        while time.monotonic() - began < LATENCY_SECONDS:
            producer.produce(source, key=marker + b"%010d" % i, value=payload, partition=i % PARTITIONS)
            i += 1
            if i % 50 == 0:
                producer.poll(0)
                ahead = i / LATENCY_RATE - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
        producer.flush(60)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    quiet_since = None
    while True:
        for msg in consumer.consume(1000, timeout=0.2):
            if not msg.error() and (msg.key() or b"").startswith(marker):
                latencies.append(time.time() * 1000 - msg.timestamp()[1])
        if done.is_set():
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 15:
                break
    writer.join()
    consumer.close()
    return latencies


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ------------------------------------------------------------------------------------ engines


def spark_job(name: str, alias: str, primary: str, dr: str, topic: str, workdir: Path, exactly_once: bool) -> dict:
    return {
        "apiVersion": "mm2spec/v1", "name": name, "environment": "bench",
        "spark": {"master": "local[2]", "trigger.interval": "1 second", "max.offsets.per.trigger": 1000000,
                  "checkpoint.location": str(workdir / name / "checkpoints")},
        "flows": [{
            "name": f"{alias}-to-dr", "source.cluster.alias": alias, "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": primary, "target.cluster.bootstrap.servers": dr,
            "topics": f"{topic},lat-{alias}", "groups": "none",
            "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
            "offset-syncs.topic.location": "target", "offset.lag.max": "100",
            "emit.checkpoints.enabled": "false", "sync.group.offsets.enabled": "false",
            "exactly.once.source.support": "enabled" if exactly_once else "disabled",
            "producer.override.linger.ms": "5", "producer.override.batch.size": "262144",
        }],
    }


class SparkEngine:
    def __init__(self, exactly_once: bool):
        self.exactly_once = exactly_once
        self.name = "spark-eos" if exactly_once else "spark-alo"
        self.isolation = "read_committed" if exactly_once else "read_uncommitted"
        self.deployment = None

    def start(self, primary, dr, topic, alias, workdir: Path):
        job = spark_job(f"bench-{alias}", alias, primary, dr, topic, workdir, self.exactly_once)
        self.deployment = mirror.start(job, state_dir=workdir / job["name"] / "state", wait_running=600)

    def stop(self):
        if self.deployment:
            mirror.stop(self.deployment)


class Mm2Engine:
    name = "mm2"
    isolation = "read_uncommitted"

    def __init__(self, connect_url: str):
        self.url = connect_url
        self.connector = None

    def start(self, primary, dr, topic, alias, workdir: Path):
        self.connector = f"{alias}-to-dr-MirrorSourceConnector"
        config = {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "tasks.max": "2",
            "source.cluster.alias": alias, "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": primary, "target.cluster.bootstrap.servers": dr,
            "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
            "offset-syncs.topic.location": "target", "topics": f"{topic},lat-{alias}",
            "heartbeats.replication.enabled": "false",
            "replication.factor": "-1", "offset-syncs.topic.replication.factor": "-1", "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "1", "offset.lag.max": "100",
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "producer.override.linger.ms": "5", "producer.override.batch.size": "262144",
        }
        request = urllib.request.Request(f"{self.url}/connectors/{self.connector}/config", method="PUT",
                                         data=json.dumps(config).encode(), headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=60).read()

    def stop(self):
        if self.connector:
            request = urllib.request.Request(f"{self.url}/connectors/{self.connector}", method="DELETE")
            try:
                urllib.request.urlopen(request, timeout=60).read()
            except Exception as exc:
                log(f"deleting {self.connector}: {exc}")


def perf_ceiling(primary: str, dr: str, topic: str, count: int, size: int, libs: Path, java: str) -> dict:
    """kafka-producer-perf-test into dr, kafka-consumer-perf-test out of primary."""
    target = f"perf.{topic}"
    create_topic(dr, target)
    cp = f"{libs}/*"
    out = subprocess.run([java, "-Xmx1g", "-cp", cp, "org.apache.kafka.tools.ProducerPerformance", "--topic", target,
                          "--num-records", str(count), "--record-size", str(size), "--throughput", "-1",
                          "--producer-props", f"bootstrap.servers={dr}", "linger.ms=5", "batch.size=262144", "acks=all"],
                         capture_output=True, text=True, timeout=1800).stdout
    summary = [line for line in out.splitlines() if "records sent" in line][-1]
    # "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, p50 ms 50th, p95, p99 ms 99th, ..."
    parts = [p.strip() for p in summary.split(",")]
    produced = {"records_per_s": float(parts[1].split()[0]), "mb_per_s": float(parts[1].split("(")[1].split()[0]),
                "p50": float(parts[4].split()[0]), "p99": float(parts[6].split()[0])}
    consumer_rate = None
    run = subprocess.run([java, "-Xmx1g", "-cp", cp, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
                          primary, "--topic", topic, "--num-records", str(count)], capture_output=True, text=True, timeout=1800)
    lines = [line for line in run.stdout.splitlines() if line and line[0].isdigit()]
    if lines:
        fields = [f.strip() for f in lines[-1].split(",")]
        consumer_rate = float(fields[9] if len(fields) > 9 else fields[5])  # fetch.nMsg.sec: without the group join
    return {"producer": produced, "consumer_records_per_s": consumer_rate}


# ------------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="spark-alo,spark-eos,mm2,perf")
    parser.add_argument("--quick", action="store_true", help="a tenth of the records (a smoke run)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    engines = args.engines.split(",")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mm2spec-bench-"))
    found = components()
    java, libs = found.java(), found.kafka_libs
    log(f"starting dev clusters and a Connect worker in {workdir}")
    stack = DevStack(workdir / "dev", ports=DevPorts.free(), tie_to_parent=True, echo=lambda line: None)
    state = stack.up(with_connect="mm2" in engines, timeout=300)
    primary, dr = state.primary.bootstrap, state.dr.bootstrap
    rows = []
    try:
        for label, count, size in DATASETS:
            if args.quick:
                count //= 10
            topic = f"bench-{label.lower()}"
            log(f"producing {count} records of {size} B into {topic}")
            create_topic(primary, topic)
            fill(primary, topic, count, size)
            mb = count * size / 1e6
            for engine_name in engines:
                if engine_name == "perf":
                    log(f"{label}: perf tools")
                    ceiling = perf_ceiling(primary, dr, topic, count, size, libs, java)
                    p = ceiling["producer"]
                    rows.append((label, "perf (producer)", p["records_per_s"], p["mb_per_s"], p["p50"], p["p99"], None))
                    c = ceiling["consumer_records_per_s"]
                    if c:
                        rows.append((label, "perf (consumer)", c, c * size / 1e6, None, None, None))
                    continue
                alias = f"{engine_name.replace('-', '')}{label.lower()}"
                engine = {"spark-alo": lambda: SparkEngine(False), "spark-eos": lambda: SparkEngine(True),
                          "mm2": lambda: Mm2Engine(state.connect_url)}[engine_name]()
                target = f"{alias}.{topic}"
                latency_topic = f"lat-{alias}"
                create_topic(primary, latency_topic)
                log(f"{label}: {engine_name} mirroring into {target}")
                try:
                    engine.start(primary, dr, topic, alias, workdir)
                    seconds, seen = measure_backlog(dr, target, count)
                    warm_up(primary, dr, latency_topic, f"{alias}.{latency_topic}")
                    latencies = measure_latency(primary, dr, latency_topic, f"{alias}.{latency_topic}", size,
                                                engine.isolation)
                    rows.append((label, engine_name, count / seconds, mb / seconds, pct(latencies, 0.5),
                                 pct(latencies, 0.99), None))
                    log(f"{label}: {engine_name} {count / seconds:,.0f} rec/s; {seen - count} extra records")
                finally:
                    engine.stop()
    finally:
        stack.down()
    print_table(rows)
    return 0


def print_table(rows) -> None:
    mm2 = {row[0]: row[2] for row in rows if row[1] == "mm2"}
    header = f"{'data':<6} {'engine':<16} {'records/s':>12} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs MM2':>7}"
    print(header)
    print("-" * len(header))
    for label, name, rate, mbs, p50, p99, _ in rows:
        ratio = f"{rate / mm2[label]:.2f}x" if mm2.get(label) else "-"
        fmt = lambda v: f"{v:,.0f}" if v is not None else "-"  # noqa: E731
        print(f"{label:<6} {name:<16} {rate:>12,.0f} {mbs:>8.1f} {fmt(p50):>8} {fmt(p99):>8} {ratio:>7}")


if __name__ == "__main__":
    sys.exit(main())
