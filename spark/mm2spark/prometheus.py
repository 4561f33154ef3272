"""The driver's ``/metrics``: the job's figures in Prometheus's text format, under the names of
``mm2spec.mm2.metric_names`` (the one table the alerts and the dashboard read too).

MM2's per target topic-partition figures keep MirrorSourceMetrics' names and labels (``source``,
``target``, ``topic``: the target topic, ``partition``), so one dashboard fits both engines: records and bytes
written (counters since the job started), their rates over the last ``RATE_WINDOW_S``, replication
latency (record timestamp to the batch's acknowledged write) and record age (record timestamp to the
start of the batch that read it), each as the last batch's average, ``_max`` and ``_avg`` over the
window. The job's own figures are per flow: state (``mm2spec_mirror_up``), last batch duration,
failed batches, restarts, offset syncs and checkpoints written (``mm2spark.metrics.MirrorMetrics``).
Labels a scrape adds (``spec``, ``env``) are never emitted here.

A stdlib HTTP server on a daemon thread serves it on ``spark.metrics.port``; a port already in use
stops the job at its start with an error naming the port and the flows.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable

from mm2spark.metrics import RATE_WINDOW_S, MirrorMetrics
from mm2spec.errors import JobConfigError
from mm2spec.mm2.metric_names import CONTENT_TYPE, exposition, metric

log = logging.getLogger("mm2spark.prometheus")

_SOURCE = "kafka_connect_mirror_source_connector_"
RECORD_COUNT = metric(_SOURCE + "record_count")
RECORD_RATE = metric(_SOURCE + "record_rate")
BYTE_COUNT = metric(_SOURCE + "byte_count")
BYTE_RATE = metric(_SOURCE + "byte_rate")
RECORD_AGE = metric(_SOURCE + "record_age_ms")
RECORD_AGE_MAX = metric(_SOURCE + "record_age_ms_max")
RECORD_AGE_AVG = metric(_SOURCE + "record_age_ms_avg")
LATENCY = metric(_SOURCE + "replication_latency_ms")
LATENCY_MAX = metric(_SOURCE + "replication_latency_ms_max")
LATENCY_AVG = metric(_SOURCE + "replication_latency_ms_avg")
MIRROR_UP = metric("mm2spec_mirror_up")
BATCH_DURATION = metric("mm2spec_mirror_batch_duration_seconds")
ERRORS = metric("mm2spec_mirror_errors_total")
RESTARTS = metric("mm2spec_mirror_restarts_total")
SYNCS_WRITTEN = metric("mm2spec_offset_syncs_written_total")
CHECKPOINTS_WRITTEN = metric("mm2spec_checkpoints_written_total")

PARTITION_METRICS = (RECORD_COUNT, RECORD_RATE, BYTE_COUNT, BYTE_RATE, RECORD_AGE, RECORD_AGE_MAX, RECORD_AGE_AVG,
                     LATENCY, LATENCY_MAX, LATENCY_AVG)
FLOW_METRICS = (MIRROR_UP, BATCH_DURATION, ERRORS, RESTARTS, SYNCS_WRITTEN, CHECKPOINTS_WRITTEN)


@dataclass(frozen=True)
class PartitionBatch:
    """What one micro-batch wrote to one target partition."""

    topic: str
    """The target topic."""
    partition: int
    records: int
    bytes: int
    timestamp_min: int | None
    """Smallest source timestamp (ms) of the records written."""
    timestamp_sum: int
    """Sum of the records' source timestamps (ms): their average is ``timestamp_sum / records``."""
    latency_sum_ms: int = 0
    latency_max_ms: int | None = None
    """The replication latency the writer measured at each acknowledgement (summed; the largest).
    When set it is the latency (in Real-time Mode results arrive at the batch's end, long after the
    writes, so "now" would not do)."""


@dataclass
class _Sample:
    at: float
    records: int
    bytes: int
    latency_sum: float
    latency_max: float
    age_sum: float
    age_max: float


@dataclass
class _PartitionFigures:
    records: int = 0
    bytes: int = 0
    latency: float = 0.0
    age: float = 0.0
    window: deque = field(default_factory=deque)


class PartitionFigures:
    """MM2's per target topic-partition figures of every flow of the job (thread-safe)."""

    def __init__(self, started_at: float | None = None):
        self.started_at = time.time() if started_at is None else started_at
        self._figures: dict[tuple[str, str, str, int], _PartitionFigures] = {}
        self._lock = threading.Lock()

    def record(self, source: str, target: str, batches: Iterable[PartitionBatch], read_at: float | None,
               now: float | None = None) -> None:
        """A written batch of a flow from cluster ``source`` to ``target`` (MirrorSourceMetrics'
        ``source`` and ``target`` labels, as Connect's series carry them): ``read_at`` is when the batch began (its
        records were read after it), or None when each record was written as soon as it was read
        (Real-time Mode: the age is the latency); ``now`` when its writes were acknowledged."""
        now = time.time() if now is None else now
        with self._lock:
            for batch in batches:
                if not batch.records or batch.timestamp_min is None:
                    continue
                figures = self._figures.setdefault((source, target, batch.topic, batch.partition), _PartitionFigures())
                mean_ts = batch.timestamp_sum / batch.records
                figures.records += batch.records
                figures.bytes += batch.bytes
                if batch.latency_max_ms is not None:
                    figures.latency = batch.latency_sum_ms / batch.records
                    latency_max = float(batch.latency_max_ms)
                else:
                    figures.latency = max(0.0, now * 1000 - mean_ts)
                    latency_max = max(0.0, now * 1000 - batch.timestamp_min)
                if read_at is None:
                    figures.age, age_max = figures.latency, latency_max
                else:
                    figures.age = max(0.0, read_at * 1000 - mean_ts)
                    age_max = max(0.0, read_at * 1000 - batch.timestamp_min)
                figures.window.append(_Sample(now, batch.records, batch.bytes, figures.latency * batch.records,
                                              latency_max, figures.age * batch.records, age_max))

    def samples(self, now: float | None = None) -> list[tuple[dict[str, str], dict[str, float]]]:
        """Each partition's labels and its value of each of ``PARTITION_METRICS``. Rates divide by
        the window, or by the job's age while it is younger (at least a second); ``_max``/``_avg``
        are over the window, or the last batch's once the window holds none."""
        now = time.time() if now is None else now
        span = min(RATE_WINDOW_S, max(1.0, now - self.started_at))
        out = []
        with self._lock:
            for (source, target, topic, partition), f in sorted(self._figures.items()):
                while f.window and f.window[0].at < now - RATE_WINDOW_S:
                    f.window.popleft()
                window = list(f.window)
                records = sum(s.records for s in window)
                values = {
                    RECORD_COUNT: f.records, BYTE_COUNT: f.bytes,
                    RECORD_RATE: records / span, BYTE_RATE: sum(s.bytes for s in window) / span,
                    LATENCY: f.latency, RECORD_AGE: f.age,
                    LATENCY_MAX: max((s.latency_max for s in window), default=f.latency),
                    LATENCY_AVG: sum(s.latency_sum for s in window) / records if records else f.latency,
                    RECORD_AGE_MAX: max((s.age_max for s in window), default=f.age),
                    RECORD_AGE_AVG: sum(s.age_sum for s in window) / records if records else f.age,
                }
                out.append(({"source": source, "target": target, "topic": topic, "partition": str(partition)}, values))
        return out


def partition_batches(written, target_topic) -> list[PartitionBatch]:
    """The writer's per source partition results (``writer.BatchWritten``) as target partitions,
    ``target_topic`` naming each source topic's copy."""
    return [PartitionBatch(target_topic(p.topic), p.partition, p.records, p.bytes, p.timestamp_min, p.timestamp_sum,
                           p.latency_sum_ms if p.latency_max_ms is not None else 0, p.latency_max_ms)
            for p in written.partitions]


def flow_samples(metrics: MirrorMetrics) -> list[tuple[dict[str, str], dict[str, float]]]:
    """Each flow's label and its value of each of ``FLOW_METRICS`` that is known."""
    out = []
    for name, figures in sorted(list(metrics.flows.items())):
        values = {MIRROR_UP: 1 if figures.state == "running" else 0, ERRORS: figures.errors,
                  RESTARTS: figures.restarts, SYNCS_WRITTEN: figures.offset_syncs_written,
                  CHECKPOINTS_WRITTEN: figures.checkpoints_written}
        if figures.batch_duration_ms is not None:
            values[BATCH_DURATION] = figures.batch_duration_ms / 1000
        out.append(({"flow": name}, values))
    return out


def by_metric(samples: list[tuple[dict[str, str], dict[str, float]]], names: tuple[str, ...]) -> dict:
    """Samples (labels, values by metric) turned into series per metric, in ``names``' order."""
    return {name: [(labels, values[name]) for labels, values in samples if name in values] for name in names}


class MetricsEndpoint:
    """``/metrics`` of the whole job on ``port`` (0: a free port, see ``port`` once started)."""

    def __init__(self, metrics: MirrorMetrics, port: int, flows: Iterable[str], host: str = ""):
        self.metrics = metrics
        self.partitions = PartitionFigures(metrics.started_at)
        self.port = port
        self.flows = tuple(flows)
        self.host = host
        self._server: ThreadingHTTPServer | None = None

    def text(self, now: float | None = None) -> str:
        """The whole page: MM2's per-partition figures, then the flows'."""
        return (exposition(by_metric(self.partitions.samples(now), PARTITION_METRICS))
                + exposition(by_metric(flow_samples(self.metrics), FLOW_METRICS)))

    def start(self) -> None:
        """Listen; a port in use (or not allowed) is the user's to fix: ``JobConfigError``."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served")
                    return
                body = endpoint.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass  # a scrape every 15 s is not worth a log line

        try:
            self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as exc:
            flows = ", ".join(self.flows)
            if exc.errno == errno.EADDRINUSE:
                raise JobConfigError(f"spark.metrics.port {self.port} is already in use on this host, so the mirror "
                                     f"of flow {flows} cannot serve /metrics there: stop what listens on it, or set "
                                     "spark.metrics.port in the spec to a free port and render again") from None
            raise JobConfigError(f"spark.metrics.port {self.port}: cannot listen for /metrics of flow {flows}: "
                                 f"{exc.strerror or exc}") from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="mm2spark-metrics", daemon=True).start()
        log.info("serving Prometheus metrics on :%d/metrics", self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
