"""The figures an MM2 dashboard shows, for the Spark engine: per flow and per topic records/s,
bytes/s, replication latency (record timestamp to acknowledged write, as MM2's
``replication-latency-ms``), plus lag behind the source, offset syncs, checkpoints and errors.

Each micro-batch reports what the writer wrote, per source topic (``MirrorMetrics.record_batch``:
counts and source timestamps summed by the writer, no per-row aggregates in Spark); a
StreamingQueryListener joins that with Spark's own progress (durations, offsets behind latest) in
one log line per batch. The JSON status file that ``mm2spec mirror``/``status()`` read is written
by the job's control loop, at most once per second, never on the batch's path.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger("mm2spark.progress")

#: Rates (records/s, bytes/s) are averaged over this window: long enough to smooth over the gaps
#: between micro-batches (one per trigger.interval, 1 s by default, seconds apart under load),
#: short enough that a dashboard shows a change within a few refreshes.
RATE_WINDOW_S = 10.0
#: Until the job has run for a whole window, rates divide by its age, but by at least this, so the
#: first batch does not show as a burst of millions of records per second.
MIN_RATE_SPAN_S = 1.0
#: A progress event without records is logged only when its batch id is a multiple of this, so an
#: idle flow does not write a log line per event.
IDLE_LOG_EVERY_BATCHES = 30
#: A batch's log line names at most this many topics (the busiest): at width a line per batch that
#: named all of them would be thousands of entries long.
PROGRESS_TOPICS = 10


@dataclass
class TopicBatch:
    """What one micro-batch wrote for one source topic."""

    records: int = 0
    bytes: int = 0
    timestamp_min: int | None = None
    timestamp_sum: int = 0
    latency_sum_ms: int = 0
    latency_max_ms: int | None = None
    """Measured by the writer at each acknowledgement (MM2's replication-latency-ms); None when the
    writer did not measure it, and the figure is then taken at the batch's end."""

    def add(self, records: int, nbytes: int, ts_min: int | None, ts_sum: int,
            latency_sum_ms: int = 0, latency_max_ms: int | None = None) -> None:
        self.records += records
        self.bytes += nbytes
        self.timestamp_sum += ts_sum
        self.latency_sum_ms += latency_sum_ms
        if latency_max_ms is not None:
            self.latency_max_ms = max(self.latency_max_ms or 0, latency_max_ms)
        if ts_min is not None:
            self.timestamp_min = ts_min if self.timestamp_min is None else min(self.timestamp_min, ts_min)


@dataclass
class BatchReport:
    """What the driver learnt while writing a batch."""

    flow: str
    batch_id: int
    topics: dict
    """Source topic -> TopicBatch: what the writer wrote of it."""
    offset_syncs: int = 0
    skipped: int = 0
    """Records of a replayed exactly-once batch that were already committed."""
    producer: dict = field(default_factory=dict)
    """The writer's producer metrics, averaged over the batch's tasks."""


@dataclass
class TopicFigures:
    records: int = 0
    bytes: int = 0
    records_per_second: float = 0.0
    bytes_per_second: float = 0.0
    replication_latency_ms_avg: float | None = None
    replication_latency_ms_max: float | None = None


@dataclass
class FlowFigures:
    delivery: str = "at-least-once"
    state: str = "starting"
    batches: int = 0
    last_batch_id: int | None = None
    records: int = 0
    bytes: int = 0
    records_per_second: float = 0.0
    bytes_per_second: float = 0.0
    replication_latency_ms_avg: float | None = None
    replication_latency_ms_max: float | None = None
    offsets_behind_latest: int | None = None
    batch_duration_ms: int | None = None
    batch_phases_ms: dict = field(default_factory=dict)
    """Spark's split of the last trigger: latestOffset, addBatch (the write), walCommit, ..."""
    last_batch_ms: dict = field(default_factory=dict)
    """The job's split of addBatch: finding ranges and target topics, the write, offset syncs."""
    producer_metrics: dict = field(default_factory=dict)
    """The writer's producer metrics in the last batch (records-per-request-avg, ...)."""
    skipped_replayed_records: int = 0
    offset_syncs_written: int = 0
    checkpoints_written: int = 0
    groups_synced: int = 0
    errors: int = 0
    restarts: int = 0
    last_error: str | None = None
    topics: dict = field(default_factory=dict)

    def mark_running(self) -> None:
        """A query event says the flow runs; a paused flow's late event (the listener bus lags the
        stop) leaves it paused: only a resume (state ``starting``) lets it run again."""
        if self.state != "paused":
            self.state = "running"


class MirrorMetrics:
    """Thread-safe figures for all flows of one job; writes the status file."""

    def __init__(self, job: str, status_file: str | Path | None):
        self.job = job
        self.status_file = Path(status_file) if status_file else None
        self.started_at = time.time()
        self.state = "starting"
        self.flows: dict[str, FlowFigures] = {}
        self.most_tasks_per_stage: int | None = None
        """The most tasks any Spark stage of the job ran (Spark's listener: mm2spec.spark.StageTasks)."""
        self._window: dict[tuple[str, str], deque] = {}
        self._lock = threading.Lock()
        # The control loop and the listener bus both write the file (a paused query's termination
        # event comes as the loop records the pause): one at a time, or one's rename finds no tmp.
        self._write_lock = threading.Lock()

    def flow(self, name: str) -> FlowFigures:
        with self._lock:
            return self.flows.setdefault(name, FlowFigures())

    def record_batch(self, report: BatchReport, now: float | None = None) -> None:
        """A written batch: per-topic counts, rates and replication latency (acknowledgement time
        minus the records' source timestamps, as MM2's replication-latency-ms: measured by the
        writer, or now at the batch's end when it did not), syncs and replays."""
        now = time.time() if now is None else now
        with self._lock:
            figures = self.flows.setdefault(report.flow, FlowFigures())
            figures.offset_syncs_written += report.offset_syncs
            figures.skipped_replayed_records += report.skipped
            figures.producer_metrics = dict(report.producer)
            for topic, batch in report.topics.items():
                if not batch.records:
                    continue
                t = figures.topics.setdefault(topic, TopicFigures())
                t.records += batch.records
                t.bytes += batch.bytes
                self._window.setdefault((report.flow, topic), deque()).append((now, batch.records, batch.bytes))
                if batch.latency_max_ms is not None:
                    t.replication_latency_ms_max = float(batch.latency_max_ms)
                    t.replication_latency_ms_avg = batch.latency_sum_ms / batch.records
                elif batch.timestamp_min is not None:
                    t.replication_latency_ms_max = max(0.0, now * 1000 - batch.timestamp_min)
                    t.replication_latency_ms_avg = max(0.0, now * 1000 - batch.timestamp_sum / batch.records)
            self._refresh_rates(report.flow, now)

    def _refresh_rates(self, flow: str, now: float) -> None:
        figures = self.flows[flow]
        total_records = total_bytes = 0.0
        for (f, topic), window in self._window.items():
            if f != flow:
                continue
            while window and window[0][0] < now - RATE_WINDOW_S:
                window.popleft()
            span = RATE_WINDOW_S if now - self.started_at >= RATE_WINDOW_S else max(MIN_RATE_SPAN_S, now - self.started_at)
            t = figures.topics[topic]
            t.records_per_second = sum(w[1] for w in window) / span
            t.bytes_per_second = sum(w[2] for w in window) / span
            total_records += t.records_per_second
            total_bytes += t.bytes_per_second
        figures.records_per_second, figures.bytes_per_second = total_records, total_bytes
        figures.records = sum(t.records for t in figures.topics.values())
        figures.bytes = sum(t.bytes for t in figures.topics.values())
        latencies = [t for t in figures.topics.values() if t.replication_latency_ms_max is not None]
        if latencies:
            figures.replication_latency_ms_max = max(t.replication_latency_ms_max for t in latencies)
            figures.replication_latency_ms_avg = sum(t.replication_latency_ms_avg for t in latencies) / len(latencies)

    def error(self, flow: str, message: str) -> None:
        with self._lock:
            figures = self.flows.setdefault(flow, FlowFigures())
            figures.errors += 1
            figures.last_error = message[:2000]

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "job": self.job,
                "engine": "spark",
                "state": self.state,
                "pid": os.getpid(),
                "startedAt": self.started_at,
                "mostTasksPerStage": self.most_tasks_per_stage,
                "updatedAt": time.time(),
                "flows": {name: _camel(asdict(f)) for name, f in self.flows.items()},
            }

    def write_status(self) -> None:
        if self.status_file is None:
            return
        data = json.dumps(self.snapshot(), indent=2, sort_keys=True)
        with self._write_lock:
            self.status_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.status_file.with_name(self.status_file.name + ".tmp")
            tmp.write_text(data + "\n")
            os.replace(tmp, self.status_file)


def _camel(value):
    if isinstance(value, dict):
        return {(_camel_key(k) if isinstance(k, str) and "_" in k else k): _camel(v) for k, v in value.items()}
    return value


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000
    return f"{n:.1f} GB"


def progress_line(flow: str, figures: FlowFigures, batch_id: int, batch_records: int) -> str:
    latency = ("-" if figures.replication_latency_ms_avg is None
               else f"{figures.replication_latency_ms_avg:.0f}/{figures.replication_latency_ms_max:.0f} ms")
    active = sorted(((name, t) for name, t in figures.topics.items() if t.records_per_second > 0),
                    key=lambda item: (-item[1].records_per_second, item[0]))
    topics = ", ".join(
        f"{name} {t.records_per_second:.0f} rec/s"
        + (f" {t.replication_latency_ms_avg:.0f} ms" if t.replication_latency_ms_avg is not None else "")
        for name, t in active[:PROGRESS_TOPICS])
    if len(active) > PROGRESS_TOPICS:
        topics += f" and {len(active) - PROGRESS_TOPICS:,} more (status.json has every topic)"
    return (f"flow={flow} batch={batch_id} records={batch_records} total={figures.records} "
            f"rate={figures.records_per_second:.0f} rec/s {_fmt_bytes(figures.bytes_per_second)}/s "
            f"latency(avg/max)={latency} "
            f"behind={figures.offsets_behind_latest if figures.offsets_behind_latest is not None else '-'} "
            f"syncs={figures.offset_syncs_written} checkpoints={figures.checkpoints_written} errors={figures.errors}"
            + (f" topics: {topics}" if topics else ""))


class MirrorProgressListener(StreamingQueryListener):
    """Publishes each finished micro-batch: log line + status file."""

    def __init__(self, metrics: MirrorMetrics, flow_names: dict[str, str]):
        super().__init__()
        self.metrics = metrics
        self.flow_names = flow_names  # query name -> flow name

    def onQueryStarted(self, event) -> None:
        flow = self.flow_names.get(event.name or "", event.name or "?")
        self.metrics.flow(flow).mark_running()
        log.info("flow=%s query started (id %s)", flow, event.id)
        self.metrics.write_status()

    def onQueryProgress(self, event) -> None:
        try:
            progress = event.progress
            flow = self.flow_names.get(progress.name or "", progress.name or "?")
            figures = self.metrics.flow(flow)
            figures.mark_running()
            figures.batches += 1
            figures.last_batch_id = progress.batchId
            figures.batch_duration_ms = (progress.durationMs or {}).get("triggerExecution")
            figures.batch_phases_ms = dict(progress.durationMs or {})
            behind = None
            for source in progress.sources or []:
                value = (source.metrics or {}).get("maxOffsetsBehindLatest")
                if value is not None:
                    behind = (behind or 0) + int(float(value))
            figures.offsets_behind_latest = behind
            if progress.numInputRows or progress.batchId % IDLE_LOG_EVERY_BATCHES == 0:
                log.info(progress_line(flow, figures, progress.batchId, progress.numInputRows))
        except Exception as exc:  # noqa: BLE001 - a listener must not take the queries down
            # Deliberately broad: Spark calls listeners on its listener bus, and whatever a listener
            # raises (a status file that cannot be written, an unexpected progress shape, a bug)
            # must not take the queries down; the figures are only a report.
            log.warning("progress listener: %s", exc)

    def onQueryIdle(self, event) -> None:
        pass  # nothing new to report; the control loop keeps the status file fresh

    def onQueryTerminated(self, event) -> None:
        if event.exception and self.metrics.state == "stopping":
            # The job's stop interrupted the query mid-call: not a failure.
            log.info("a mirroring query stopped: %s", event.exception.splitlines()[0])
        elif event.exception:
            log.error("a mirroring query stopped with an error: %s", event.exception.splitlines()[0])
        self.metrics.write_status()
