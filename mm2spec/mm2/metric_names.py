"""The one table of Prometheus metric names mm2spec's monitoring uses, for both engines.

MM2's figures keep the names operators already chart: the Prometheus JMX exporter's rendering of
MM2's and Connect's MBeans (lower case, ``-`` as ``_``, as Strimzi's metrics configs name them),
e.g. ``kafka_connect_mirror_source_connector_replication_latency_ms_avg``. The Spark job serves the
MM2 figures under the same names and labels, so one dashboard and one set of alerts fit either
engine. What no MM2 MBean has (the RPO, checkpoint age, failover state, the Spark job's own
figures) is named ``mm2spec_*``.

Every consumer reads this table: ``mm2spec.render.monitoring`` (the JMX exporter's rules, the
alert rules, the dashboard), the Spark job's ``/metrics`` and the DR exporter, which both write
Prometheus's text format with ``exposition`` (HELP and TYPE from the table). Labels a scrape
adds (``spec``, ``env``: see ``SCRAPE_LABELS``) are not in ``labels``: exporters never emit them.

Stdlib only: the Spark job imports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

SPARK_METRICS_PORT_DEFAULT = 9405
"""Port of the Spark job driver's ``/metrics`` (``spark.metrics.port``): beside the JMX exporter's
usual 9404, so one host can run both engines' endpoints in a demo."""
CONNECT_METRICS_PORT_DEFAULT = 9404
"""Port of the JMX exporter agent on each Connect worker (``connect.metrics.port``): the port
Strimzi and the exporter's own examples use."""
DR_EXPORTER_PORT_DEFAULT = 9406
"""Port of mm2spec's DR exporter, ``mm2spec verify --serve`` (the engine's ``metrics.exporterPort``:
``spark.`` or ``connect.``): the figures no MBean has (RPO, checkpoint age, failover state); the
rendered scrape config names it for either engine."""

SCRAPE_LABELS = ("spec", "env")
"""Labels the rendered scrape config puts on every series: ``metadata.name`` and the environment."""


@dataclass(frozen=True)
class MBean:
    """A kind of MBean as the JMX exporter sees it: ``domain<key=value, ...>`` in registration order,
    each ``(.+)`` group becoming the label of the same position in ``labels``."""

    pattern: str
    """The exporter's match text up to the attribute, e.g. ``kafka.connect<type=connector-metrics, connector=(.+)>``."""
    labels: tuple[str, ...]
    """The Prometheus label of each capture group of ``pattern``, in order."""


MIRROR_SOURCE = MBean("kafka.connect.mirror<type=MirrorSourceConnector, source=(.+), target=(.+), topic=(.+), "
                      "partition=([0-9]+)>", ("source", "target", "topic", "partition"))
"""MM2's ``MirrorSourceMetrics``: per replicated (target) topic-partition. Kafka 4's MBean names the
source cluster first (Kafka 3's had no ``source`` key); the Spark job does not serve ``source``."""
MIRROR_CHECKPOINT = MBean("kafka.connect.mirror<type=MirrorCheckpointConnector, source=(.+), target=(.+), group=(.+), "
                          "topic=(.+), partition=([0-9]+)>", ("source", "target", "group", "topic", "partition"))
"""MM2's ``MirrorCheckpointMetrics``: per group and upstream topic-partition."""
WORKER = MBean("kafka.connect<type=connect-worker-metrics>", ())
"""The Connect worker's totals."""
WORKER_CONNECTOR = MBean("kafka.connect<type=connect-worker-metrics, connector=(.+)>", ("connector",))
"""The worker's task counts per connector."""
REBALANCE = MBean("kafka.connect<type=connect-worker-rebalance-metrics>", ())
"""The worker's group rebalances."""
CONNECTOR = MBean("kafka.connect<type=connector-metrics, connector=(.+)>", ("connector",))
"""A connector's own state."""
CONNECTOR_TASK = MBean("kafka.connect<type=connector-task-metrics, connector=(.+), task=(.+)>", ("connector", "task"))
"""Each task's state and offset commits."""
SOURCE_TASK = MBean("kafka.connect<type=source-task-metrics, connector=(.+), task=(.+)>", ("connector", "task"))
"""Each source task's polls and writes."""
TASK_ERROR = MBean("kafka.connect<type=task-error-metrics, connector=(.+), task=(.+)>", ("connector", "task"))
"""Each task's record errors, failures and retries."""


Kind = Literal["gauge", "counter"]
Source = Literal["mm2", "connect", "mm2spec", "spark", "prometheus"]


@dataclass(frozen=True)
class Metric:
    """One metric name, what it measures and who serves it."""

    name: str
    """The Prometheus name, e.g. ``mm2spec_rpo_seconds``."""
    kind: Kind
    """``gauge`` or ``counter`` (a ``_total`` name)."""
    help: str
    """What it measures, in the unit its name says."""
    labels: tuple[str, ...]
    """The labels its exporter puts on each series (the scrape adds ``SCRAPE_LABELS``)."""
    source: Source
    """``mm2``: MM2's MBeans on Connect and the Spark job alike; ``connect``: only a Connect worker;
    ``mm2spec``: the DR figures (the DR exporter, ``mm2spec verify --serve``); ``spark``: only the job;
    ``prometheus``: Prometheus's own series about each scrape."""
    mbean: MBean | None = None
    """Where the JMX exporter reads it on a Connect worker; None: no MBean has it."""
    attribute: str = ""
    """The MBean attribute, e.g. ``replication-latency-ms-avg``; ``status``: a text state, exported
    as 1 with its value in a ``status`` label."""

    @property
    def state_label(self) -> bool:
        """Whether the value is a text state, exported as 1 with a ``status`` label."""
        return self.attribute == "status"


def _mm2(name: str, attribute: str, help: str, mbean: MBean = MIRROR_SOURCE, kind: Kind = "gauge") -> Metric:
    return Metric(name, kind, help, mbean.labels, "mm2", mbean, attribute)


def _connect(name: str, mbean: MBean, attribute: str, help: str, kind: Kind = "gauge") -> Metric:
    labels = mbean.labels + (("status",) if attribute == "status" else ())
    return Metric(name, kind, help, labels, "connect", mbean, attribute)


_SOURCE = "kafka_connect_mirror_source_connector_"
METRICS: tuple[Metric, ...] = (
    # MM2's MirrorSourceMetrics (Kafka's MirrorSourceMetrics.java), served by both engines.
    _mm2(_SOURCE + "record_count", "record-count", "Records replicated to this target partition.", kind="counter"),
    _mm2(_SOURCE + "record_rate", "record-rate", "Records replicated per second."),
    _mm2(_SOURCE + "byte_count", "byte-count", "Bytes replicated to this target partition.", kind="counter"),
    _mm2(_SOURCE + "byte_rate", "byte-rate", "Bytes replicated per second."),
    _mm2(_SOURCE + "record_age_ms", "record-age-ms", "Age of the last record when it was read from the source (ms)."),
    _mm2(_SOURCE + "record_age_ms_max", "record-age-ms-max", "Largest record age when read (ms)."),
    _mm2(_SOURCE + "record_age_ms_avg", "record-age-ms-avg", "Average record age when read (ms)."),
    _mm2(_SOURCE + "replication_latency_ms", "replication-latency-ms",
         "Time from the record's timestamp to its write on the target (ms)."),
    _mm2(_SOURCE + "replication_latency_ms_max", "replication-latency-ms-max", "Largest replication latency (ms)."),
    _mm2(_SOURCE + "replication_latency_ms_avg", "replication-latency-ms-avg", "Average replication latency (ms)."),
    # MM2's MirrorCheckpointMetrics.
    _mm2("kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms", "checkpoint-latency-ms",
         "Time from the group's commit to its checkpoint (ms).", MIRROR_CHECKPOINT),
    _mm2("kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms_max", "checkpoint-latency-ms-max",
         "Largest checkpoint latency (ms).", MIRROR_CHECKPOINT),
    # The Connect worker running MM2 (Connect's worker, task and rebalance metrics).
    _connect("kafka_connect_worker_connector_count", WORKER, "connector-count", "Connectors on this worker."),
    _connect("kafka_connect_worker_task_count", WORKER, "task-count", "Tasks on this worker."),
    _connect("kafka_connect_worker_connector_total_task_count", WORKER_CONNECTOR, "connector-total-task-count",
             "The connector's tasks on this worker."),
    _connect("kafka_connect_worker_connector_running_task_count", WORKER_CONNECTOR, "connector-running-task-count",
             "The connector's running tasks on this worker."),
    _connect("kafka_connect_worker_connector_paused_task_count", WORKER_CONNECTOR, "connector-paused-task-count",
             "The connector's paused tasks on this worker."),
    _connect("kafka_connect_worker_connector_failed_task_count", WORKER_CONNECTOR, "connector-failed-task-count",
             "The connector's failed tasks on this worker."),
    _connect("kafka_connect_worker_connector_unassigned_task_count", WORKER_CONNECTOR,
             "connector-unassigned-task-count", "The connector's unassigned tasks on this worker."),
    _connect("kafka_connect_worker_connector_destroyed_task_count", WORKER_CONNECTOR, "connector-destroyed-task-count",
             "The connector's destroyed tasks on this worker."),
    _connect("kafka_connect_worker_connector_restarting_task_count", WORKER_CONNECTOR,
             "connector-restarting-task-count", "The connector's restarting tasks on this worker."),
    _connect("kafka_connect_worker_rebalance_completed_rebalances_total", REBALANCE, "completed-rebalances-total",
             "Rebalances this worker completed.", "counter"),
    _connect("kafka_connect_worker_rebalance_time_since_last_rebalance_ms", REBALANCE, "time-since-last-rebalance-ms",
             "Time since this worker's last rebalance (ms)."),
    _connect("kafka_connect_worker_rebalance_rebalancing", REBALANCE, "rebalancing",
             "1 while this worker is rebalancing."),
    _connect("kafka_connect_connector_status", CONNECTOR, "status",
             "1 for the connector's state (status label: running, paused, failed, ...)."),
    _connect("kafka_connect_connector_task_status", CONNECTOR_TASK, "status",
             "1 for the task's state (status label: running, paused, failed, ...)."),
    _connect("kafka_connect_connector_task_offset_commit_success_percentage", CONNECTOR_TASK,
             "offset-commit-success-percentage", "Share of the task's offset commits that succeeded."),
    _connect("kafka_connect_connector_task_offset_commit_failure_percentage", CONNECTOR_TASK,
             "offset-commit-failure-percentage", "Share of the task's offset commits that failed."),
    _connect("kafka_connect_source_task_source_record_active_count", SOURCE_TASK, "source-record-active-count",
             "Records polled but not yet written by the task."),
    _connect("kafka_connect_source_task_source_record_poll_total", SOURCE_TASK, "source-record-poll-total",
             "Records the task polled from the source.", "counter"),
    _connect("kafka_connect_source_task_source_record_write_total", SOURCE_TASK, "source-record-write-total",
             "Records the task wrote to the target.", "counter"),
    _connect("kafka_connect_task_error_total_record_errors", TASK_ERROR, "total-record-errors",
             "Record errors in the task.", "counter"),
    _connect("kafka_connect_task_error_total_record_failures", TASK_ERROR, "total-record-failures",
             "Record processing failures in the task.", "counter"),
    _connect("kafka_connect_task_error_total_retries", TASK_ERROR, "total-retries",
             "Retried operations in the task.", "counter"),
    Metric("up", "gauge", "1 when Prometheus's last scrape of the target succeeded (Prometheus's own).", (),
           "prometheus"),
    # DR figures no MBean has: the DR exporter (mm2spec verify --serve) serves them, for either engine.
    Metric("mm2spec_rpo_records", "gauge", "Records on the source not yet on the target: lost if the source died now.",
           ("flow", "topic", "partition"), "mm2spec"),
    Metric("mm2spec_rpo_seconds", "gauge", "Age of the oldest source record not yet on the target (s): the RPO now.",
           ("flow", "topic", "partition"), "mm2spec"),
    Metric("mm2spec_checkpoint_age_seconds", "gauge",
           "Age of the group's newest checkpoint on the target, while the group has committed since (s).",
           ("flow", "group"), "mm2spec"),
    Metric("mm2spec_flow_failed_over", "gauge", "1 while the flow is failed over (or failing back): its mirror is "
           "stopped on purpose.", ("flow",), "mm2spec"),
    Metric("mm2spec_cluster_up", "gauge", "1 when the exporter could read the cluster at its last collection.",
           ("cluster",), "mm2spec"),
    Metric("mm2spec_objective_rpo_seconds", "gauge", "The flow's rpoSeconds objective (a recording rule).",
           ("flow",), "mm2spec"),
    Metric("mm2spec_objective_checkpoint_age_seconds", "gauge",
           "The flow's checkpointAgeSeconds objective (a recording rule).", ("flow",), "mm2spec"),
    # The Spark job's own figures.
    Metric("mm2spec_mirror_up", "gauge", "1 while the job mirrors the flow.", ("flow",), "spark"),
    Metric("mm2spec_mirror_batch_duration_seconds", "gauge", "Duration of the flow's last micro-batch (s).",
           ("flow",), "spark"),
    Metric("mm2spec_mirror_errors_total", "counter", "Micro-batches of the flow that failed.", ("flow",), "spark"),
    Metric("mm2spec_mirror_restarts_total", "counter", "Restarts of the flow's streaming query.", ("flow",), "spark"),
    Metric("mm2spec_offset_syncs_written_total", "counter", "Offset syncs the job wrote for the flow.",
           ("flow",), "spark"),
    Metric("mm2spec_checkpoints_written_total", "counter", "Checkpoints the job wrote for the flow.",
           ("flow",), "spark"),
)
"""Every metric name mm2spec's monitoring uses, once."""

BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}
"""``METRICS`` by name."""
NAMES: frozenset[str] = frozenset(BY_NAME)
"""Every name in the table."""


def metric(name: str) -> str:
    """``name`` after checking it is in the table: how code spells a metric name (a typo fails at once)."""
    if name not in BY_NAME:
        raise KeyError(f"{name} is not in mm2spec.mm2.metric_names.METRICS")
    return name


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus's text exposition format, version 0.0.4: what the Spark job and the DR exporter serve."""

def exposition(series: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    """Series in Prometheus's text format: for each metric name (of the table) with series, its
    HELP and TYPE lines from the table, then one line per series, labels in the table's order
    (labels the table does not give the metric are left out). Non-finite values are left out."""
    lines = []
    for name, rows in series.items():
        entry = BY_NAME[metric(name)]
        rows = [(labels, value) for labels, value in rows if math.isfinite(value)]
        if not rows:
            continue
        lines.append(f"# HELP {name} {_escape(entry.help)}")
        lines.append(f"# TYPE {name} {entry.kind}")
        for labels, value in rows:
            text = ",".join(f'{key}="{_escape(labels[key], quote=True)}"' for key in entry.labels if key in labels)
            lines.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def _escape(text: str, quote: bool = False) -> str:
    text = str(text).replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(float(value))
