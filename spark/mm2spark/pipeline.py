"""The streaming queries: one per flow, reading the source with Spark's Kafka source and writing
each micro-batch with ``foreachBatch`` through the JVM writer (:mod:`mm2spark.writer`):

* at-least-once (``exactly.once.source.support=disabled``): one idempotent producer per task,
  records built with their source partition and timestamp. A replayed batch is written again
  (duplicates, no loss).
* exactly-once (``enabled``): one transaction per source partition (:mod:`mm2spark.eos`).

After the data is written the driver queues MM2 offset syncs for the batch (sent in the background,
never holding up the next batch), so MM2's tools can translate consumer offsets, and records the
batch's per-topic figures from the writer's results.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mm2spark import kafka
from mm2spark.config import JobConfig, JobConfigError, MirrorFlowConfig, check_mode, trigger_seconds
from mm2spark.groups import GroupOffsetMirror, GroupOffsetThread
from mm2spark.metrics import BatchReport, MirrorMetrics, MirrorProgressListener, TopicBatch
from mm2spark.offsets import OffsetSyncEmitter, OffsetSyncStore
from mm2spark.prometheus import MetricsEndpoint, partition_batches
from mm2spark.topics import ReplicationPolicy, offset_syncs_topic, subscribe_pattern, topic_filter
from mm2spark.writer import BatchWritten, FlowWriter, RealTimeResults, check_writer
from mm2spec.errors import ComponentMissing
from mm2spec.mm2 import spark_modes
from mm2spec.mm2.spark_checkpoint import start_offsets_file

log = logging.getLogger("mm2spark.pipeline")

#: Consumer settings a flow may pass to Spark's Kafka source (Spark manages the rest itself).
SOURCE_CONSUMER_KEYS = ("isolation.level", "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms",
                        "max.partition.fetch.bytes", "max.poll.records", "receive.buffer.bytes",
                        "request.timeout.ms", "client.rack")
#: The source consumer's settings unless the flow's consumer.* sets them. Spark's Kafka source
#: reads each partition's range with poll(); at the consumer's defaults (500 records, 1 MiB per
#: partition per fetch) a 1 KB batch takes a poll and a fetch round trip per ~500-1000 records.
#: fetch.max.wait.ms: a batch only asks for records that exist (its ranges end at most at the
#: source's end), but a fetch that reaches a partition's end (the next one, sent ahead by the
#: consumer) is held by the broker for up to this long and blocks the consumer's next fetch: at the
#: default 500 ms, Spark's source took several times as long over a 1,000-partition backlog as at
#: 10 ms (spark/README.md, Profile at width). In micro-batch mode consumers poll only inside a
#: batch's tasks, so a short wait costs no idle polling.
SOURCE_CONSUMER_DEFAULTS = {"max.poll.records": "10000", "max.partition.fetch.bytes": "4194304",
                            "fetch.max.wait.ms": "10"}
#: Real-time Mode's tasks poll for ever and a fetch returns as soon as any partition has a record, so
#: the broker may hold an empty fetch for Kafka's default (MM2's): at 10 ms every slice's consumer
#: sent ~100 fetches a second to an idle source (the idle flow's CPU, spark/README.md).
SOURCE_CONSUMER_REALTIME = {"fetch.max.wait.ms": "500"}


#: mm2spec's Kafka source for mirroring (spark/java/mm2spec/spark/source, in the writer's jar).
MIRROR_SOURCE = "mm2spec.spark.source.MirrorSource"

#: The folder of a flow's checkpoint where a cluster's Real-time readers look for the driver's
#: "end the running batch" (spark/java/mm2spec/spark/source/BatchSignals.java).
REALTIME_SIGNALS = "realtime-signals"
#: How long listing and fencing the transactions an earlier run left open may take (each call).
FENCE_TIMEOUT_MS = 30_000
#: At a stop, how long a query may take to stop (``spark.sql.streaming.stopTimeout``).
QUERY_STOP_TIMEOUT_S = 15
#: At a stop, how long the queued offset syncs may take to be sent (they are re-derived after a restart).
STOP_FLUSH_TIMEOUT_S = 15.0
#: A stop still going after this long writes every Python thread's stack to the log.
STOP_STACKS_AFTER_S = 20.0
#: Spark's startingOffsets value for "the partition's beginning".
EARLIEST = -2
#: The columns the JVM writers read, in their order (mm2spec.spark.MirrorWriter.COLUMNS).
WRITER_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
#: Real-time Mode, at a stop: how long the running batch may take to end and commit its offsets.
REALTIME_END_TIMEOUT_S = 10.0


def _local_path(location: str) -> Path | None:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location).resolve()
    return None


class OffsetLog:
    """Reads the source offsets Spark recorded for a micro-batch in the query's checkpoint.

    Spark writes ``<checkpoint>/offsets/<batchId>`` (a version line, a metadata line, then one JSON
    line per source: ``{"topic": {"partition": offset}}``) before running the batch, so the batch's
    range is [previous batch's end, this batch's end).
    """

    def __init__(self, spark: SparkSession, checkpoint: str):
        self.spark = spark
        self.checkpoint = checkpoint
        self.local = _local_path(checkpoint)

    def _read(self, relative: str) -> list[str] | None:
        if self.local is not None:
            path = self.local / relative
            return path.read_text().splitlines() if path.is_file() else None
        jvm = self.spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(f"{self.checkpoint.rstrip('/')}/{relative}")
        fs = path.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return lines
        finally:
            stream.close()

    @staticmethod
    def _offsets(lines: list[str] | None) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for line in lines or []:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(data, dict) or "batchWatermarkMs" in data:
                continue  # the metadata line
            for topic, partitions in data.items():
                if isinstance(partitions, dict):
                    for partition, offset in partitions.items():
                        out[(topic, int(partition))] = int(offset)
        return out

    def end(self, batch_id: int) -> dict[tuple[str, int], int]:
        return self._offsets(self._read(f"offsets/{batch_id}"))

    def start(self, batch_id: int) -> dict[tuple[str, int], int]:
        if batch_id == 0:
            return self._offsets(self._read("sources/0/0"))
        return self._offsets(self._read(f"offsets/{batch_id - 1}"))


class FlowPipeline:
    """One flow's streaming query and everything its micro-batches do."""

    def __init__(self, spark: SparkSession, job: JobConfig, flow: MirrorFlowConfig, metrics: MirrorMetrics,
                 endpoint: MetricsEndpoint | None = None):
        self.spark = spark
        self.endpoint = endpoint
        """The job's ``/metrics``, given each batch's per-partition figures; None: not served."""
        self.job = job
        self.flow = flow
        self.metrics = metrics
        self.policy = ReplicationPolicy.of(flow)
        base = job.spark.checkpoint_location
        local = _local_path(base)
        self.checkpoint = str(local / flow.name) if local is not None else f"{base.rstrip('/')}/{flow.name}"
        self.query_name = f"mm2spark.{job.name}.{flow.name}"
        self.offset_log = OffsetLog(spark, self.checkpoint)
        self.store = OffsetSyncStore()
        self.emitter = OffsetSyncEmitter(flow.offset_lag_max)
        self.source_admin = kafka.admin(flow.source)
        self.target_admin = kafka.admin(flow.target)
        self.syncs_role, self.syncs_topic = offset_syncs_topic(flow)
        self.syncs_cluster = flow.target if self.syncs_role == "target" else flow.source
        self.syncs_producer = kafka.internal_producer(self.syncs_cluster)
        self.source_partitions: dict[str, int] = {}
        self.target_partitions: dict[str, int] = {}
        self.query = None
        self.stopping = False
        """Set by stop(): a batch that fails from then on was interrupted, not broken."""
        self.topics = topic_filter(flow)
        self.group_thread: GroupOffsetThread | None = None
        self.group_mirror = GroupOffsetMirror(flow, self.store)
        self.realtime = job.spark.mode == spark_modes.REALTIME
        self.writer = FlowWriter(spark, job.name, flow, self.realtime)
        self.written_topics: set[str] = set()
        """Target topics the writer has written since the job started (the rest are new to it)."""
        self.answering: set[tuple[str, int]] = set()
        """Target partitions whose leader answered for them (``kafka.await_leaders``): safe to send to."""
        self.realtime_results: RealTimeResults | None = None
        self.sync_tail: kafka.SyncTail | None = None
        self.admitted: dict[str, int] = {}
        """Real-time Mode: source topics (and partition counts) whose targets exist, told to the source."""
        self.next_topic_scan = 0.0
        self.batches = 0
        metrics.flow(flow.name).delivery = "exactly-once" if flow.exactly_once else "at-least-once"

    # ------------------------------------------------------------------ setup

    def prepare(self) -> None:
        """MM2's internal topics exist; offset syncs written before a restart are loaded."""
        syncs_admin = self.target_admin if self.syncs_role == "target" else self.source_admin
        kafka.ensure_internal_topic(syncs_admin, self.syncs_topic)
        syncs = kafka.load_offset_syncs(self.syncs_cluster, self.syncs_topic)
        self.store.add_all(syncs)
        if syncs:
            log.info("flow=%s loaded %d offset syncs from %s", self.flow.name, len(syncs), self.syncs_topic)

    def source_frame(self) -> DataFrame:
        """The flow's source as a stream: mm2spec's mirror source (``tasks.max`` tasks a batch, see
        spark/java/mm2spec/spark/source) or Spark's Kafka source; same columns, same checkpoint offsets."""
        if self.job.spark.source == "mirror":
            reader = (self.spark.readStream.format(MIRROR_SOURCE)
                      .option("tasks", str(self.flow.tasks_max)))
        else:
            reader = (self.spark.readStream.format("kafka")
                      .option("includeHeaders", "true")
                      # MM2 carries on past records deleted by retention before they were mirrored
                      # (the mirror source always does).
                      .option("failOnDataLoss", "false"))
        reader = (reader.option("subscribePattern", subscribe_pattern(self.flow))
                  .option("startingOffsets", self.starting_offsets()))
        if self.realtime:
            reader = reader.option("realTimeKey", self.query_name)
        consumer = {**self.flow.source.java_properties(), **SOURCE_CONSUMER_DEFAULTS,
                    **(SOURCE_CONSUMER_REALTIME if self.realtime else {})}
        if self.flow.exactly_once:
            consumer["isolation.level"] = "read_committed"
        consumer.update({k: v for k, v in self.flow.consumer_overrides if k in SOURCE_CONSUMER_KEYS})
        for key, value in consumer.items():
            reader = reader.option(f"kafka.{key}", value)
        if self.job.spark.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(self.job.spark.max_offsets_per_trigger))
        return reader.load()

    def starting_offsets(self) -> str:
        """Where a new query starts: the source's beginning (MM2's rule for a new flow), unless a
        failback left ``<checkpoint>.start-offsets.json`` beside a flow without a checkpoint (the
        forward mirror restarts at the source's end then, so nothing copied back is mirrored again).
        Spark wants every partition the subscription matches named: any other starts at the beginning."""
        local = _local_path(self.checkpoint)
        start_file = start_offsets_file(local) if local is not None else None
        if start_file is None or (local / "offsets").exists() or not start_file.exists():
            return "earliest"
        given = json.loads(start_file.read_text())
        counts = kafka.partition_counts(self.source_admin)
        start = {topic: {str(p): int(given.get(topic, {}).get(str(p), EARLIEST)) for p in range(n)}
                 for topic, n in counts.items() if self.topics(topic)}
        log.info("flow=%s starts at the positions a failback left in %s", self.flow.name, start_file)
        return json.dumps(start)

    def start(self) -> None:
        self.stopping = False
        if self.flow.exactly_once:
            self.fence_open_transactions()
        if self.realtime:
            self.start_realtime()
        else:
            self.start_microbatch()
        if self.group_thread is None and self.flow.emit_checkpoints and self.flow.groups:
            self.group_thread = GroupOffsetThread(self.group_mirror)
            self.group_thread.start()

    def fence_open_transactions(self) -> None:
        """Exactly-once, before the query starts: the transactions an earlier run left open are
        aborted at once (``Fencing`` in the writer's jar says which and why), not at their
        transaction.timeout.ms, for which read_committed consumers on DR would read nothing past them.
        A failure only leaves them to their timeout: the run goes on, with a warning."""
        from py4j.protocol import Py4JError

        fencing = self.spark.sparkContext._jvm.mm2spec.spark.Fencing
        try:
            fenced = fencing.fenceOpen(self.writer.settings, FENCE_TIMEOUT_MS)
        except Py4JError as exc:
            log.warning("flow=%s could not fence the transactions an earlier run left open (they end at their "
                        "transaction.timeout.ms): %s", self.flow.name, str(exc).strip().splitlines()[-1][:300])
            return
        if not fenced:
            log.info("flow=%s fenced no transaction: no earlier run left one open", self.flow.name)
            return
        ids = fenced.split("\n")
        log.info("flow=%s fenced %d transaction(s) an earlier run left open: %s", self.flow.name, len(ids),
                 ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else ""))

    def start_realtime(self) -> None:
        """The flow's query in Spark's Real-time Mode: the target topics of every partition it mirrors
        exist first (admitted to the source), then each task writes its slice's records as they come."""
        from pyspark.sql.streaming import StreamingQuery

        jvm = self.spark.sparkContext._jvm
        if not self.job.spark.master.startswith("local"):
            # The executors run in other JVMs: the end and cut of a batch reach them as files in the
            # flow's checkpoint location (BatchSignals), which a cluster's executors all reach.
            jvm.mm2spec.spark.source.RealTime.signalDir(self.query_name, f"{self.checkpoint}/{REALTIME_SIGNALS}")
        jvm.mm2spec.spark.source.RealTime.forget(self.query_name)
        self.admitted = {}
        self.admit_topics()
        if self.sync_tail is None:
            # The tasks write the offset syncs; the checkpoints translate with what they wrote.
            self.sync_tail = kafka.SyncTail(self.syncs_cluster, self.syncs_topic, self.store.add_all)
            self.sync_tail.start()
        jwriter = self.writer.realtime(self.spark, self.query_name)
        self.realtime_results = RealTimeResults(jwriter)
        trigger = jvm.org.apache.spark.sql.streaming.Trigger.RealTime(self.job.spark.realtime_batch_duration)
        jquery = (self.source_frame().select(*WRITER_COLUMNS)._jdf.writeStream()
                  .queryName(self.query_name)
                  .option("checkpointLocation", self.checkpoint)
                  .outputMode("update")
                  .trigger(trigger)
                  .foreach(jwriter)
                  .start())
        self.query = StreamingQuery(jquery)

    def admit_topics(self) -> None:
        """Real-time Mode: creates the targets of source topics and partitions not admitted yet and
        admits them to the source (MM2's refresh.topics); a running batch that does not read them
        ends at once, so the next one does."""
        counts = {t: n for t, n in kafka.partition_counts(self.source_admin).items() if self.topics(t)}
        new = {t: n for t, n in counts.items() if self.admitted.get(t, 0) < n}
        self.next_topic_scan = time.monotonic() + self.flow.refresh_topics_interval_s
        if not new:
            return
        self.ensure_targets({(t, p) for t, n in new.items() for p in range(n)})
        realtime = self.spark.sparkContext._jvm.mm2spec.spark.source.RealTime
        realtime.admit(self.query_name, json.dumps(new))
        if self.admitted:
            realtime.cut(self.query_name)
        log.info("flow=%s admitted %d topic(s) to the Real-time source", self.flow.name, len(new))
        self.admitted.update(new)

    def tick(self) -> None:
        """The control loop's turn (about once a second): Real-time Mode's results and topic scan."""
        if not self.realtime or self.query is None:
            return
        self.take_realtime_results()
        if time.monotonic() >= self.next_topic_scan and self.query.isActive:
            self.admit_topics()

    def take_realtime_results(self) -> None:
        """Offset syncs and figures for what the ended Real-time tasks wrote."""
        if self.realtime_results is None:
            return
        written = self.realtime_results.take()
        if written.partitions or written.tasks:
            self.batches += 1
            self.after_write(written, self.batches, {})

    def start_microbatch(self) -> None:
        self.query = (self.source_frame().writeStream
                      .queryName(self.query_name)
                      .option("checkpointLocation", self.checkpoint)
                      .trigger(processingTime=self.job.spark.trigger_interval)
                      .foreachBatch(self.process_batch)
                      .start())

    def stop(self) -> None:
        """Stop the query, then the checkpoints thread, then flush the queued offset syncs; each
        step's time is logged (a slow stop shows where it waited)."""
        steps = []
        began = time.monotonic()
        self.stopping = True
        if self.query is not None and self.query.isActive:
            if self.realtime:
                self.end_realtime_batch()
                steps.append(f"batch end {time.monotonic() - began:.1f} s")
            self.query.stop()
        if self.realtime:
            # The source's key stays ending until the next start forgets it: the stopped query's
            # tasks end asynchronously, and one that saw it cleared would write what it holds.
            self.take_realtime_results()
        steps.append(f"query {time.monotonic() - began:.1f} s")
        if self.sync_tail is not None:
            self.sync_tail.stop()
            self.sync_tail = None
        if self.group_thread is not None:
            began = time.monotonic()
            self.group_thread.stop()
            self.group_thread = None  # a thread runs once: resume() starts a new one
            self.metrics.flow(self.flow.name).checkpoints_written = self.group_mirror.counters.checkpoints_written
            steps.append(f"checkpoints {time.monotonic() - began:.1f} s")
        began = time.monotonic()
        left = self.syncs_producer.flush(STOP_FLUSH_TIMEOUT_S)
        steps.append(f"offset syncs {time.monotonic() - began:.1f} s" + (f" ({left} not sent)" if left else ""))
        log.info("flow=%s stopped: %s", self.flow.name, ", ".join(steps))

    def resume(self) -> None:
        """Start the query again after a pause, as a job restart would for this flow: from its
        checkpoint, or from the start-offsets file a failback left when it set the checkpoint aside.
        The offset syncs are read again (the failback wrote the forward start's), and a new emitter
        writes a sync at the first batch."""
        self.store = OffsetSyncStore()
        self.emitter = OffsetSyncEmitter(self.flow.offset_lag_max)
        self.group_mirror = GroupOffsetMirror(self.flow, self.store)
        self.written_topics = set()
        self.prepare()
        self.start()

    def end_realtime_batch(self) -> None:
        """Real-time Mode, before a stop: ends the running batch so its offsets are committed (a stop
        mid-batch would replay it all at the next start) and waits, bounded, until the source plans
        the next batch: Spark does that once the batch before has committed, and a batch planned
        while batches end reads nothing, so the stop that follows kills nothing written. (Waiting
        for the query's progress instead raced: it can lag a batch behind.)"""
        realtime = self.spark.sparkContext._jvm.mm2spec.spark.source.RealTime
        realtime.endBatches(self.query_name, True)
        deadline = time.monotonic() + REALTIME_END_TIMEOUT_S
        while time.monotonic() < deadline and self.query.isActive:
            if realtime.drained(self.query_name):
                return
            time.sleep(0.05)
        log.warning("flow=%s: the Real-time batch did not end within %.0f s; it runs again at the next start",
                    self.flow.name, REALTIME_END_TIMEOUT_S)

    # ------------------------------------------------------------------ per batch

    def target_topic(self, topic: str) -> str:
        return self.policy.target_topic(self.flow.source_alias, topic)

    def ensure_targets(self, partitions: set[tuple[str, int]]) -> None:
        """Target topics exist with at least the source's partitions (created like MM2 does), and the
        leader of each target partition of ``partitions`` answers for it before the writer sends there."""
        topics = {t for t, _ in partitions}
        unknown = {t for t, p in partitions if self.source_partitions.get(t, 0) <= p}
        if unknown:
            self.source_partitions.update(kafka.partition_counts(self.source_admin, unknown))
        wanted = {self.target_topic(t): self.source_partitions[t] for t in topics if t in self.source_partitions}
        missing = {t: n for t, n in wanted.items() if self.target_partitions.get(t, 0) < n}
        if missing:
            existing = kafka.partition_counts(self.target_admin, missing)
            configs = {}
            new_sources = [t for t in topics if self.target_topic(t) in missing and self.target_topic(t) not in existing]
            if self.flow.sync_topic_configs and new_sources:
                configs = {self.target_topic(t): c
                           for t, c in kafka.dynamic_topic_configs(self.source_admin, new_sources).items()}
            self.target_partitions.update(kafka.ensure_topics(self.target_admin, missing, configs, existing))
        self.await_target_leaders({(self.target_topic(t), p) for t, p in partitions if t in self.source_partitions})

    def await_target_leaders(self, targets: set[tuple[str, int]]) -> None:
        """Waits (``kafka.await_leaders``) for the leaders of target partitions the writer has not been
        told are safe yet: the ones just created, and at a start every one (created a moment ago by
        someone else, or by this job before a failed batch). A broker lists a new partition before its
        leader takes produce requests for it, and a producer sending there meanwhile can wedge it for
        delivery.timeout.ms (KAFKA-15591). Partitions known to answer cost no request."""
        new = targets - self.answering
        if not new:
            return
        began = time.monotonic()
        kafka.await_leaders(self.target_admin, new)
        self.answering |= new
        waited = time.monotonic() - began
        if waited >= 1.0:
            log.info("flow=%s the leaders of %d target partition(s) answer after %.1f s", self.flow.name, len(new), waited)

    def batch_ranges(self, batch_id: int, batch_df: DataFrame | None = None) -> dict[tuple[str, int], tuple[int, int]]:
        end = self.offset_log.end(batch_id)
        if not end and batch_df is not None:
            # The offset log could not be read (an unusual checkpoint file system): scan the batch
            # instead -- slower, but a batch is never skipped for want of its ranges.
            log.warning("flow=%s batch %d: no offsets in the checkpoint's offset log; scanning the batch",
                        self.flow.name, batch_id)
            rows = batch_df.groupBy("topic", "partition").agg(F.min("offset"), F.max("offset")).collect()
            return {(r[0], r[1]): (r[2], r[3] + 1) for r in rows}
        start = self.offset_log.start(batch_id)
        new = [tp for tp in end if tp not in start]
        if new:
            start.update(kafka.end_offsets(self.source_admin, new, earliest=True))
        return {tp: (min(start.get(tp, e), e), e) for tp, e in end.items()}

    def process_batch(self, batch_df: DataFrame, batch_id: int) -> None:
        try:
            self._process_batch(batch_df, batch_id)
        except Exception as exc:
            if self.stopping:
                # stop() interrupted the write: not an error. Nothing of the batch is committed to
                # the checkpoint, so the next start writes it again (exactly-once: its open
                # transactions are aborted when the next producer takes their ids).
                log.info("flow=%s batch %d interrupted by the stop; it runs again at the next start",
                         self.flow.name, batch_id)
            else:
                self.metrics.error(self.flow.name, f"batch {batch_id}: {exc}")
                self.metrics.write_status()
            raise

    def _process_batch(self, batch_df: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        ranges = {tp: r for tp, r in self.batch_ranges(batch_id, batch_df).items() if r[1] > r[0]}
        if not ranges:
            return
        self.ensure_targets(set(ranges))
        prepared = time.monotonic()
        targets = {self.target_topic(t) for t, _ in ranges}
        written = self.writer.write(batch_df, targets - self.written_topics)
        self.written_topics |= targets
        wrote = time.monotonic()
        self.after_write(written, batch_id, {"ranges+topics": round((prepared - began) * 1000),
                                             "write": round((wrote - prepared) * 1000)},
                         read_at=time.time() - (time.monotonic() - began))

    def after_write(self, written: BatchWritten, batch_id: int, timings: dict[str, int],
                    read_at: float | None = None) -> None:
        """The offset syncs and figures of what the writer wrote: a micro-batch whose records were
        read from ``read_at`` on, or ended Real-time tasks (``read_at`` None: each record written as
        soon as it was read)."""
        began = time.monotonic()
        renewals = sum(int(t.get("producerRenewals") or 0) for t in written.tasks)
        if renewals:
            # mm2spec.spark.GuardedSends: a target partition had no acknowledgement for seconds while its
            # leader answered; its records were written again through a fresh producer instead.
            log.warning("flow=%s batch %d: the writer replaced %d producer(s) stalled on a target partition and "
                        "wrote their unacknowledged records again (the executor log names the partitions)",
                        self.flow.name, batch_id, renewals)
        if self.realtime:
            # The Real-time tasks wrote their offset syncs themselves (mm2spec.spark.SyncWriter).
            sync_count = sum(int(t.get("offsetSyncs") or 0) for t in written.tasks)
            for task in written.tasks:
                if task.get("offsetSyncErrors"):
                    self.sync_failed(f"{task['offsetSyncErrors']} not written: {task.get('offsetSyncError')}")
        else:
            syncs = self.emitter.on_batch(written.runs)
            sync_count = len(syncs)
            if syncs:
                self.queue_offset_syncs(syncs)
        self.metrics.flow(self.flow.name).last_batch_ms = {
            **timings, "offsetSyncs": round((time.monotonic() - began) * 1000),
            "tasksMax": max((t["writeMs"] for t in written.tasks), default=0)}
        self.metrics.flow(self.flow.name).checkpoints_written = self.group_mirror.counters.checkpoints_written
        self.metrics.flow(self.flow.name).groups_synced = self.group_mirror.counters.groups_synced
        self.metrics.record_batch(BatchReport(self.flow.name, batch_id, topic_batches(written), sync_count,
                                              written.skipped, producer_profile(written)))
        if self.endpoint is not None:
            self.endpoint.partitions.record(self.flow.source_alias, self.flow.target_alias,
                                            partition_batches(written, self.target_topic), read_at=read_at)

    def queue_offset_syncs(self, syncs: list) -> None:
        """Hands the batch's offset syncs to the producer without waiting for them: librdkafka
        sends them in the background (MM2 also writes syncs asynchronously); a failed delivery is
        counted as an error, and ``stop`` flushes what is still queued."""
        replaced = self.syncs_producer.replaced
        for sync in syncs:
            kafka.produce_nowait(self.syncs_producer, self.syncs_topic, sync.record_key(), sync.record_value(),
                                 self.sync_failed)
        self.syncs_producer.poll(0)  # serves the earlier batches' delivery reports
        self.store.add_all(syncs)
        if self.syncs_producer.replaced != replaced:
            # A wedged client was replaced and the syncs it held dropped: the next batch writes a
            # sync for every partition it writes, so the topic again translates where they are.
            self.emitter = OffsetSyncEmitter(self.flow.offset_lag_max)

    def sync_failed(self, message: str) -> None:
        self.metrics.error(self.flow.name, f"writing offset syncs to {self.syncs_topic}: {message}")


def read_paused(control_file: str | None) -> set[str] | None:
    """The flows ``paused-flows.json`` names (``mm2spec.runtime.deployment.pause_flows`` writes it
    whole, then renames it); None when it cannot be read now (keep what was decided last turn)."""
    if not control_file:
        return set()
    try:
        data = json.loads(Path(control_file).read_text())
    except FileNotFoundError:
        return set()
    except (OSError, json.JSONDecodeError) as exc:
        log.warning("control file %s unreadable, flows unchanged: %s", control_file, exc)
        return None
    return {str(n) for n in (data.get("paused") or [])} if isinstance(data, dict) else None


def apply_paused(pipelines: list[FlowPipeline], paused: set[str], wanted: set[str] | None,
                 metrics: MirrorMetrics) -> set[str]:
    """Stop the queries of flows newly named in the control file (the clean stop a job stop makes:
    query, checkpoints thread, offset syncs flushed) and start those no longer named; returns the
    flows paused now. ``wanted`` None: the file could not be read, nothing changes."""
    if wanted is None:
        return paused
    for p in pipelines:
        name = p.flow.name
        if name in wanted and name not in paused:
            log.info("flow=%s pausing (control file)", name)
            try:
                p.stop()
            except Exception as exc:  # noqa: BLE001 - as at a job stop: the query is stopped first, the rest is best effort
                log.warning("flow=%s stop: %s", name, exc)
            metrics.flow(name).state = "paused"
            paused = paused | {name}
        elif name in paused and name not in wanted:
            log.info("flow=%s resuming (control file)", name)
            metrics.flow(name).state = "starting"
            try:
                p.resume()
            except Exception as exc:  # noqa: BLE001 - a cluster away: tried again next turn, the others run on
                log.error("flow=%s resume failed, trying again: %s", name, exc)
                metrics.error(name, f"resume: {exc}")
                metrics.flow(name).state = "paused"
                metrics.write_status()
                continue
            paused = paused - {name}
        else:
            continue
        metrics.write_status()
    return paused


def topic_batches(written: BatchWritten) -> dict[str, TopicBatch]:
    """The writer's per-partition results summed per source topic (the per-topic figures)."""
    topics: dict[str, TopicBatch] = {}
    for p in written.partitions:
        topics.setdefault(p.topic, TopicBatch()).add(p.records, p.bytes, p.timestamp_min, p.timestamp_sum,
                                                     p.latency_sum_ms, p.latency_max_ms)
    return topics


def producer_profile(written: BatchWritten) -> dict[str, float]:
    """The tasks' producer metrics averaged (records-per-request-avg, bufferpool-wait-ratio, ...)."""
    values: dict[str, list[float]] = {}
    for task in written.tasks:
        for name, value in (task.get("producer") or {}).items():
            if value is not None:
                values.setdefault(name, []).append(value)
    return {name: round(sum(v) / len(v), 3) for name, v in values.items()}


# ---------------------------------------------------------------------- the job


#: The parts of mm2spec executors import (MM2's rules, the error classes): stdlib only, as
#: tests/unit/test_layers.py checks. Only these: the rest of mm2spec needs third-party libraries.
SHIPPED_MM2SPEC = ("__init__.py", "errors.py", "mm2/*.py")


def package_zip(directory: Path) -> str:
    """This package and ``SHIPPED_MM2SPEC`` as a zip for SparkContext.addPyFile, so executors can import them."""
    import mm2spec

    package = Path(__file__).resolve().parent
    mm2spec_root = Path(mm2spec.__file__).resolve().parent
    files = [(path, f"mm2spark/{path.name}") for path in sorted(package.glob("*.py"))]
    for pattern in SHIPPED_MM2SPEC:
        files += [(path, f"mm2spec/{path.relative_to(mm2spec_root).as_posix()}")
                  for path in sorted(mm2spec_root.glob(pattern))]
    target = directory / "mm2spark.zip"
    with zipfile.ZipFile(target, "w") as archive:
        for path, name in files:
            archive.write(path, name)
    return str(target)


def build_session(job: JobConfig, jars: list[str]) -> SparkSession:
    conf = {
        "spark.app.name": f"mm2spec-mirror-{job.name}",
        "spark.jars": ",".join(jars),
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # A query's stop waits at most this long for its batch thread (Spark's default: forever); the
        # mirror source's Kafka calls give way to the stop at once, so this bounds the rest.
        "spark.sql.streaming.stopTimeout": f"{QUERY_STOP_TIMEOUT_S}s",
        # Spark redacts matching option values in plans, logs and the UI (JAAS configs hold passwords).
        "spark.sql.redaction.options.regex": "(?i)url|jaas|password|secret|token|keystore[.]key|private key",
        "spark.redaction.regex": "(?i)secret|password|token|jaas|keystore[.]key|private key",
    }
    master = job.spark.master
    conf["spark.master"] = master
    if job.spark.mode == spark_modes.REALTIME:
        # Spark's own floor (5 s by default) gives way to the spec's validated duration.
        seconds = spark_modes.duration_seconds(job.spark.realtime_batch_duration) or 0
        conf["spark.sql.streaming.realTimeMode.minBatchDuration"] = f"{int(seconds * 1000)}ms"
    if job.spark.driver_memory:
        # Read when pyspark launches the driver JVM (spark-submit), so local mode honours it too.
        conf["spark.driver.memory"] = str(job.spark.driver_memory)
    if job.spark.executor_memory:
        conf["spark.executor.memory"] = str(job.spark.executor_memory)
    if job.spark.executor_cores:
        conf["spark.executor.cores"] = str(job.spark.executor_cores)
    if job.spark.executor_instances:
        if master.startswith("spark://") and job.spark.executor_cores:
            conf["spark.cores.max"] = str(int(job.spark.executor_instances) * int(job.spark.executor_cores))
        elif not master.startswith("local"):
            conf["spark.executor.instances"] = str(job.spark.executor_instances)
    conf.update(dict(job.spark.conf))
    # Executors' Python workers need this interpreter's packages (confluent-kafka for the writer).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("MM2SPEC_SPARK_LOG_LEVEL", "WARN"))
    return spark


def run(job: JobConfig, jars: list[str], status_file: str | None, stop: threading.Event | None = None,
        max_restarts: int | None = None, control_file: str | None = None) -> int:
    """Run every flow until ``stop`` is set (or SIGTERM/SIGINT); restart a failed query with backoff.
    Flows that ``control_file`` names stay paused (no query) until it no longer names them."""
    stop = stop or threading.Event()
    metrics = MirrorMetrics(job.name, status_file)
    metrics.write_status()
    endpoint = None
    if job.spark.metrics_port is not None:  # before Spark starts: a port in use stops the job at once
        endpoint = MetricsEndpoint(metrics, job.spark.metrics_port, [flow.name for flow in job.flows])
        endpoint.start()
    spark = build_session(job, jars)
    try:
        check_writer(spark, jars)
        # Task slots as the session has them: local[*] is the machine's cores. A cluster's executors
        # may not have registered yet, so there the spec's executors (checked offline) decide.
        check_mode(job, spark.sparkContext.defaultParallelism if job.spark.master.startswith("local") else None)
    except (ComponentMissing, JobConfigError):
        spark.stop()
        if endpoint is not None:
            endpoint.stop()
        raise
    # After the SparkContext exists: it installs its own SIGINT handler, which this replaces so
    # that Ctrl-C and SIGTERM both stop the queries between batches and exit cleanly.
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    jvm = spark.sparkContext._jvm
    spark.sparkContext._jsc.sc().addSparkListener(jvm.mm2spec.spark.StageTasks())
    workdir = Path(tempfile.mkdtemp(prefix="mm2spark-"))
    spark.sparkContext.addPyFile(package_zip(workdir))
    pipelines = [FlowPipeline(spark, job, flow, metrics, endpoint) for flow in job.flows]
    spark.streams.addListener(MirrorProgressListener(metrics, {p.query_name: p.flow.name for p in pipelines}))
    paused = read_paused(control_file) or set()
    for p in pipelines:
        p.prepare()
        if p.flow.name in paused:
            metrics.flow(p.flow.name).state = "paused"
            log.info("flow=%s paused (control file %s): not started", p.flow.name, control_file)
            continue
        p.start()
        log.info("flow=%s mirroring %s -> %s (%s, %s) topics=%s checkpoint=%s", p.flow.name, p.flow.source_alias,
                 p.flow.target_alias, metrics.flow(p.flow.name).delivery,
                 "identity" if p.flow.identity else "default policy", ",".join(p.flow.topics), p.checkpoint)
    metrics.state = "running"
    metrics.write_status()
    backoff = {p.flow.name: 1.0 for p in pipelines}
    exit_code = 0
    try:
        while not stop.wait(min(1.0, trigger_seconds(job.spark.trigger_interval))):
            paused = apply_paused(pipelines, paused, read_paused(control_file), metrics)
            for p in pipelines:
                if p.flow.name in paused:
                    continue
                p.tick()
                p.metrics.flow(p.flow.name).checkpoints_written = p.group_mirror.counters.checkpoints_written
                if p.query is not None and not p.query.isActive:
                    error = p.query.exception()
                    message = str(error.desc if hasattr(error, "desc") else error) if error else "query stopped"
                    figures = metrics.flow(p.flow.name)
                    metrics.error(p.flow.name, message.splitlines()[0] if message else "query stopped")
                    figures.state = "restarting"
                    if max_restarts is not None and figures.restarts >= max_restarts:
                        log.error("flow=%s failed and will not be restarted: %s", p.flow.name, message.splitlines()[0])
                        figures.state = "failed"
                        exit_code = 1
                        stop.set()
                        break
                    figures.restarts += 1
                    log.error("flow=%s query failed (%s); restarting in %.0fs from its checkpoint",
                              p.flow.name, message.splitlines()[0] if message else "?", backoff[p.flow.name])
                    metrics.write_status()
                    if stop.wait(backoff[p.flow.name]):
                        break
                    backoff[p.flow.name] = min(60.0, backoff[p.flow.name] * 2)
                    p.start()
            metrics.most_tasks_per_stage = jvm.mm2spec.spark.StageTasks.most()
            metrics.write_status()
    except BaseException:
        log.exception("the mirror's control loop failed")
        exit_code = 1
    finally:
        log.info("stopping")
        metrics.state = "stopping"
        metrics.write_status()
        # Stopping is bounded (mm2spec's stop kills the job after a grace period); if it takes
        # long, every thread's stack goes to the log so the wait can be found.
        faulthandler.dump_traceback_later(STOP_STACKS_AFTER_S, exit=False)
        for p in pipelines:
            try:
                p.stop()
            except Exception as exc:  # noqa: BLE001 - best effort: one flow failing to stop must not keep the others running
                log.warning("flow=%s stop: %s", p.flow.name, exc)
            if metrics.flow(p.flow.name).state not in ("failed", "paused"):
                metrics.flow(p.flow.name).state = "stopped"
        faulthandler.cancel_dump_traceback_later()
        metrics.state = "stopped" if exit_code == 0 else "failed"
        metrics.write_status()
        spark.stop()
        if endpoint is not None:
            endpoint.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return exit_code
