"""The driver's side of the JVM writer (``spark/java``, ``mm2spec.spark.MirrorWriter``).

``foreachBatch`` hands each micro-batch's DataFrame to the writer through the JVM gateway: the
executors write the rows as Spark's internal rows (one producer per task for at-least-once; one
transactional producer per source partition for exactly-once, see :mod:`mm2spark.eos`), and only
one short JSON line per source partition comes back: counts, source timestamps, and the exact
upstream -> downstream offset runs of the acknowledged records (the offset syncs' input). No row
ever becomes a Python object, and no end offsets are asked of the target before or after.

The writer jar is built by ``scripts/install-spark.sh`` against pyspark's own jars; the job checks
at start that it is there and was built for the running Spark version (never falling back to a
slower path).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from mm2spark.config import MirrorFlowConfig
from mm2spark.eos import EosWriterSettings
from mm2spark.offsets import Run
from mm2spark.topics import offset_syncs_topic
from mm2spec.errors import ComponentMissing
from mm2spec.mm2 import policy as mm2_policy

WRITER_JAR = "mm2spec-spark-writer.jar"
INSTALL_HINT = "run scripts/install-spark.sh (or scripts/setup)"

#: The writer's producer settings unless a flow's producer.override.* sets them. acks=all with
#: idempotence keeps each partition's records in order without duplicates from retries (the
#: delivery callbacks then give exact offset runs). linger.ms 5 and batch.size 256 KiB instead of
#: the Kafka 3.9 client's 0 ms and 16 KiB: a task sends its whole range at once, so full large
#: batches cost no latency (each task flushes at its end); spark/README.md ("Profile") shows the
#: records per request they give.
PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5", "batch.size": "262144",
                     "compression.type": "none"}
#: Producer settings the writer sets itself: its serializers, and the transactional.id of the
#: exactly-once protocol; interceptors could rewrite records behind the offset syncs' back.
PRODUCER_FORBIDDEN = frozenset({"key.serializer", "value.serializer", "interceptor.classes", "transactional.id"})


def check_writer(spark, jars: list[str]) -> None:
    """The writer jar is on spark.jars and was compiled for this Spark; ComponentMissing otherwise."""
    if not any(jar.rsplit("/", 1)[-1] == WRITER_JAR for jar in jars):
        raise ComponentMissing(f"the mm2spec writer jar ({WRITER_JAR}) is missing from spark.jars; {INSTALL_HINT}")
    from py4j.protocol import Py4JError

    try:
        built_for = spark.sparkContext._jvm.mm2spec.spark.MirrorWriter.builtFor()
    except Py4JError:
        raise ComponentMissing(f"the mm2spec writer (mm2spec.spark.MirrorWriter) cannot be loaded from "
                               f"{WRITER_JAR}; {INSTALL_HINT}") from None
    if built_for != spark.version:
        raise ComponentMissing(f"{WRITER_JAR} was built for Spark {built_for} but this job runs Spark "
                               f"{spark.version}; {INSTALL_HINT}")


@dataclass
class PartitionWritten:
    """What the writer did for one source partition in one batch."""

    topic: str
    partition: int
    records: int
    bytes: int
    skipped: int
    timestamp_min: int | None
    """Smallest source timestamp (ms) of the records written, for the latency figure."""
    timestamp_sum: int
    runs: list[Run]
    latency_sum_ms: int = 0
    latency_max_ms: int | None = None
    """Replication latency measured at each acknowledgement (summed; the largest)."""


@dataclass
class BatchWritten:
    """One batch's writer results: per source partition, plus each task's producer metrics."""

    partitions: list[PartitionWritten] = field(default_factory=list)
    tasks: list[dict] = field(default_factory=list)

    @property
    def runs(self) -> list[Run]:
        return [run for p in self.partitions for run in p.runs]

    @property
    def skipped(self) -> int:
        return sum(p.skipped for p in self.partitions)

    @classmethod
    def parse(cls, lines) -> "BatchWritten":
        out = cls()
        for line in lines:
            item = json.loads(line)
            if item["kind"] == "task":
                out.tasks.append(item)
                continue
            topic, partition = item["topic"], item["partition"]
            out.partitions.append(PartitionWritten(
                topic, partition, item["records"], item["bytes"], item["skipped"], item["timestampMin"],
                item["timestampSum"], [Run(topic, partition, u, d, n) for u, d, n in item["runs"]],
                item.get("latencySumMs", 0), item.get("latencyMaxMs")))
        return out


def writer_settings(job_name: str, flow: MirrorFlowConfig, realtime: bool = False) -> dict[str, str]:
    """The flat settings of ``mm2spec.spark.WriterSettings`` (they hold the target's credentials:
    passed to the JVM in memory only, never logged). ``realtime``: the Real-time writer writes the
    offset syncs itself, so it also gets their topic, its cluster and offset.lag.max."""
    # The policy's name for a topic is the prefix plus the source name (identity: no prefix).
    prefix = mm2_policy.target_topic(flow.source_alias, "", identity=flow.identity, separator=flow.replication_policy_separator)
    settings = {"mode": "at-least-once", "target.prefix": prefix}
    settings.update({f"connection.{k}": v for k, v in flow.target.java_properties().items()})
    producer = {**PRODUCER_DEFAULTS, "client.id": f"mm2spark-{flow.name}"}
    producer.update({k: v for k, v in flow.producer_overrides if k not in PRODUCER_FORBIDDEN})
    settings.update({f"producer.{k}": str(v) for k, v in producer.items()})
    if flow.exactly_once:
        settings.update(EosWriterSettings(job_name, flow.name, flow.producer_overrides).writer_settings())
    if realtime:
        role, topic = offset_syncs_topic(flow)
        syncs_cluster = flow.target if role == "target" else flow.source
        settings.update({"syncs.topic": topic, "offset.lag.max": str(flow.offset_lag_max)})
        settings.update({f"syncs.connection.{k}": v for k, v in syncs_cluster.java_properties().items()})
    return settings


class FlowWriter:
    """Writes one flow's micro-batches through the JVM writer."""

    def __init__(self, spark, job_name: str, flow: MirrorFlowConfig, realtime: bool = False):
        self._writer = spark.sparkContext._jvm.mm2spec.spark.MirrorWriter
        # A Java map made once: a dict is converted entry by entry (a gateway call each) on every call.
        self._settings = spark.sparkContext._jvm.java.util.HashMap()
        for key, value in writer_settings(job_name, flow, realtime).items():
            self._settings.put(key, value)

    @property
    def settings(self):
        """The writer's settings as the JVM holds them (``WriterSettings``); never printed: they hold secrets."""
        return self._settings

    def realtime(self, spark, query_name: str):
        """The JVM ``RealTimeWriter`` for a Real-time query (``foreach``): its tasks write as the rows
        arrive and leave their result lines in an accumulator, :meth:`RealTimeResults.take` reads them."""
        jvm = spark.sparkContext._jvm
        return jvm.mm2spec.spark.RealTimeWriter.create(spark.sparkContext._jsc.sc(), self._settings, query_name)

    def write(self, batch_df, new_topics: Iterable[str] = ()) -> BatchWritten:
        """Writes the batch; the JVM returns every JSON line in one string (one gateway call).
        ``new_topics``: target topics the writers have not written since the job started, whose
        metadata each task's producer learns in bulk first (one round trip per new topic otherwise)."""
        out = self._writer.write(batch_df._jdf, self._settings, "\n".join(sorted(new_topics)))
        return BatchWritten.parse(line for line in out.split("\n") if line)


class RealTimeResults:
    """What a Real-time query's tasks wrote, taken from the writer's accumulator on the driver as the
    tasks end (each at its batch's end): the same lines as a micro-batch's, so the same offset syncs
    and figures follow."""

    def __init__(self, jwriter):
        self._results = jwriter.results()

    def take(self) -> BatchWritten:
        out = self._results.drain()
        return BatchWritten.parse(line for line in out.split("\n") if line)
