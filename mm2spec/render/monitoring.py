"""Monitoring DR with Prometheus and Grafana, rendered from the spec.

- ``prometheus.yml``: a scrape config with a job for the spec's mirror (the Spark driver's
  ``/metrics``, or the JMX exporter agent on the Connect workers) and one for mm2spec's DR exporter
  (``mm2spec verify --serve``: the RPO series the RPO alerts read, for either engine), every series
  labelled with the spec and the environment; it loads the rules below.
- ``prometheus-rules.yml``: the flows' objectives as recording rules and the alerts: RPO over
  objective, mirror down, task failed, checkpoints stale, flow failed over, cluster unreadable.
- ``grafana-dashboard.json``: the panels operators expect on an MM2 dashboard (throughput, bytes,
  replication latency, task errors, rebalances, connector and worker state) and the RPO panels.
- ``jmx-exporter.yml`` (engine connect): the Prometheus JMX exporter's rules that turn MM2's and
  Connect's MBeans into the same names; ``connect-worker.env``: the worker's start setting that
  loads the exporter's java agent with them (``KAFKA_OPTS``, which Kafka's start scripts read).

Every metric name comes from ``mm2spec.mm2.metric_names`` (the one table), so the exporter, the
Spark job, the alerts and the dashboard cannot disagree. Pure: DesiredState in, text out.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import yaml

from mm2spec.mm2.engine_facts import engine_facts
from mm2spec.mm2.metric_names import METRICS, Metric, metric
from mm2spec.render.kubernetes import on_kubernetes
from mm2spec.spec.model import DesiredState, MirrorFlow

SCRAPE_CONFIG = "prometheus.yml"
RULES = "prometheus-rules.yml"
DASHBOARD = "grafana-dashboard.json"
JMX_EXPORTER_CONFIG = "jmx-exporter.yml"
WORKER_ENV = "connect-worker.env"

SCRAPE_INTERVAL = "15s"
"""How often Prometheus scrapes: the rules' ``for`` durations are a few intervals."""
ALERT_FOR = "1m"
"""How long a breach must last before its alert fires: four scrapes, so one slow scrape is no page."""
MIRROR_DOWN_FOR = "2m"
"""A mirror restarting (the Spark job after a failure, a Connect rebalance) is not down yet."""


def monitoring_files(state: DesiredState) -> dict[str, str]:
    """File name -> content of the monitoring files ``mm2spec render`` writes for ``state``."""
    header = (f"# Rendered by mm2spec from the DR spec {state.name} (environment: {_env(state)}). Do not edit:\n"
              "# change the spec and render again.\n")
    files = {
        SCRAPE_CONFIG: header + _yaml(scrape_config(state)),
        RULES: header + _yaml(alert_rules(state)),
        DASHBOARD: json.dumps(dashboard(state), indent=2) + "\n",
    }
    if _on_connect_workers(state):
        files[JMX_EXPORTER_CONFIG] = header + _yaml(jmx_exporter_config())
        files[WORKER_ENV] = header + worker_env(state)
    return files


def javaagent_option(jar: str, port: int, config: str) -> str:
    """The JVM option that starts the Prometheus JMX exporter agent serving ``/metrics`` on ``port``
    (every interface) with the rules file ``config``."""
    return f"-javaagent:{jar}={port}:{config}"


def worker_env(state: DesiredState) -> str:
    """``connect-worker.env``: sourced before ``bin/connect-distributed.sh`` (which passes
    ``KAFKA_OPTS`` to the JVM), it starts the JMX exporter agent on ``connect.metrics.port``. The
    jar's and this folder's paths are the host's, so they stay variables."""
    option = javaagent_option("${JMX_EXPORTER_JAR:?set JMX_EXPORTER_JAR to jmx_prometheus_javaagent-<version>.jar}",
                              state.connect.metrics_port, "${MM2SPEC_RENDERED:-.}/" + JMX_EXPORTER_CONFIG)
    return ("# The Connect worker's start setting for Prometheus: the JMX exporter java agent (Maven Central\n"
            "# io.prometheus.jmx:jmx_prometheus_javaagent; scripts/install-jmx-exporter.sh) with this folder's\n"
            f"# {JMX_EXPORTER_CONFIG}. Use: JMX_EXPORTER_JAR=/path/to/the.jar MM2SPEC_RENDERED=/path/to/this/folder\n"
            "#   . ./connect-worker.env && bin/connect-distributed.sh connect-distributed.properties\n"
            f'export KAFKA_OPTS="${{KAFKA_OPTS:-}} {option}"\n')


def dr_exporter_port(state: DesiredState) -> int:
    """Where the DR exporter (``mm2spec verify --serve``) serves: the engine's ``metrics.exporterPort``."""
    return getattr(state, engine_facts(state.engine).section).exporter_port


def dr_exporter_port_field(state: DesiredState) -> str:
    """The spec field of ``dr_exporter_port``, for messages."""
    return f"{engine_facts(state.engine).section}.metrics.exporterPort"


def _on_connect_workers(state: DesiredState) -> bool:
    return engine_facts(state.engine).runs_on_connect_workers


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors: a person reads these files, and a shared labels map is no reason for ``&id001``."""

    def ignore_aliases(self, data) -> bool:
        return True


def _yaml(data: dict) -> str:
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=1000)


def _env(state: DesiredState) -> str:
    return state.environment or "base"


def job_names(state: DesiredState) -> dict[str, str]:
    """The scrape jobs by role: ``mirror`` (what moves the data: the engine's) and ``dr``
    (mm2spec's DR exporter, for either engine)."""
    return {"mirror": f"mm2spec-{state.name}-{state.engine}", "dr": f"mm2spec-{state.name}-dr-exporter"}


def scrape_config(state: DesiredState) -> dict:
    """Prometheus's config: a scrape job for the mirror's endpoint, one for the DR exporter, and the rule file."""
    labels = {"spec": state.name, "env": _env(state)}
    jobs = job_names(state)
    if _on_connect_workers(state):
        # The REST URL names the workers' host (or a load balancer: list each worker instead).
        host = urlsplit(state.connect.rest_url).hostname if state.connect.rest_url else None
        scrapes = [_static(jobs["mirror"], f"{host or 'localhost'}:{state.connect.metrics_port}", labels)]
    elif on_kubernetes(state):
        scrapes = [_spark_driver_pods(state, jobs["mirror"], labels)]
    else:
        # local[N] and spark:// (client deploy mode): the driver runs where mm2spec starts it.
        scrapes = [_static(jobs["mirror"], f"localhost:{state.spark.metrics_port}", labels)]
    # The DR exporter runs beside mm2spec (mm2spec verify --serve), not on the workers or the driver.
    scrapes.append(_static(jobs["dr"], f"localhost:{dr_exporter_port(state)}", labels))
    return {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "rule_files": [RULES], "scrape_configs": scrapes}


def _static(job: str, target: str, labels: dict) -> dict:
    return {"job_name": job, "metrics_path": "/metrics", "static_configs": [{"targets": [target], "labels": labels}]}


def _spark_driver_pods(state: DesiredState, job: str, labels: dict) -> dict:
    """The driver pod, found through the API server: the operator gives it a new name on each restart."""
    k8s = state.spark.kubernetes
    assert k8s is not None  # on_kubernetes
    relabel = [
        {"source_labels": ["__meta_kubernetes_pod_label_spark_role"], "regex": "driver", "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_label_mm2spec_spec"], "regex": re.escape(state.name),
         "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_ip"], "regex": "(.+)",
         "replacement": f"$1:{state.spark.metrics_port}", "target_label": "__address__"},
    ] + [{"target_label": key, "replacement": value} for key, value in labels.items()]
    return {"job_name": job, "metrics_path": "/metrics",
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [k8s.namespace]}}],
            "relabel_configs": relabel}


def _q(text: str) -> str:
    """A PromQL string literal."""
    return json.dumps(text)


def _flows_regex(flows: tuple[MirrorFlow, ...]) -> str:
    return "|".join(re.escape(flow.name) for flow in flows)


def alert_rules(state: DesiredState) -> dict:
    """The rule file: each flow's objectives as series (so one alert compares every flow with its
    own), then the alerts."""
    spec = f"spec={_q(state.name)}"
    objectives = []
    for flow in state.mirrors:
        labels = {"spec": state.name, "flow": flow.name}
        if flow.objectives.rpo_seconds is not None:
            objectives.append({"record": metric("mm2spec_objective_rpo_seconds"),
                               "expr": f"vector({flow.objectives.rpo_seconds:g})", "labels": labels})
        if flow.groups:
            # Without an objective, verify's own bound: two checkpoint intervals.
            bound = flow.objectives.checkpoint_age_seconds or 2 * flow.emit_checkpoints_interval_seconds
            objectives.append({"record": metric("mm2spec_objective_checkpoint_age_seconds"),
                               "expr": f"vector({bound:g})", "labels": labels})
    jobs = job_names(state)
    failed_over = f"max(last_over_time({metric('mm2spec_flow_failed_over')}{{{spec}}}[1h])) == 1"
    up = metric("up")
    alerts = [
        _alert("Mm2specRpoOverObjective", "critical",
               f"max by (spec, flow) ({metric('mm2spec_rpo_seconds')}{{{spec}}}) "
               f"> on (spec, flow) {metric('mm2spec_objective_rpo_seconds')}{{{spec}}}",
               "{{ $labels.flow }}: the oldest unmirrored record is {{ $value | humanize }}s old, over the RPO objective",
               "A failover now would lose more than the flow promises. Check the mirror's throughput and "
               "errors, and `mm2spec verify` for the partitions behind."),
        _alert("Mm2specMirrorDown", "critical",
               f"((max by (job) ({up}{{job={_q(jobs['mirror'])}}}) == 0) or absent({up}{{job={_q(jobs['mirror'])}}}))"
               f" unless on () ({failed_over})",
               f"{state.name}: the mirror ({state.engine}) does not answer its metrics scrape",
               "Nothing is being mirrored to DR and the RPO grows. Start it (`mm2spec mirror` or `pulumi up`) "
               "or look at its log; during a failover the mirror is stopped on purpose and this alert is quiet.",
               MIRROR_DOWN_FOR),
        _task_failed(state, spec),
        _alert("Mm2specCheckpointsStale", "warning",
               f"max by (spec, flow, group) ({metric('mm2spec_checkpoint_age_seconds')}{{{spec}}}) "
               f"> on (spec, flow) group_left {metric('mm2spec_objective_checkpoint_age_seconds')}{{{spec}}}",
               "{{ $labels.flow }}: group {{ $labels.group }}'s newest checkpoint is {{ $value | humanize }}s old",
               "A failover now would make the group re-read more than the flow allows. Is the checkpoint "
               "emitter running (MirrorCheckpointConnector or the Spark job) and the group selected?"),
        _alert("Mm2specFlowFailedOver", "warning",
               f"max by (spec, flow) ({metric('mm2spec_flow_failed_over')}{{{spec}}}) == 1",
               "{{ $labels.flow }} is failed over: clients run on DR and the mirror is stopped",
               "Expected during a DR event; fail back with `mm2spec failback` once the source is healthy.", "0m"),
        _alert("Mm2specClusterUnreadable", "warning",
               f"min by (spec, cluster) ({metric('mm2spec_cluster_up')}{{{spec}}}) == 0",
               "{{ $labels.cluster }} does not answer mm2spec's DR exporter",
               "The RPO and checkpoint figures of its flows are stale. Check the cluster and the "
               "exporter's credentials."),
    ]
    groups = [{"name": f"mm2spec-{state.name}-objectives", "rules": objectives},
              {"name": f"mm2spec-{state.name}-alerts", "rules": alerts}]
    return {"groups": [group for group in groups if group["rules"]]}


def _task_failed(state: DesiredState, spec: str) -> dict:
    """A task of the mirror failed: a Connect task in state failed, or micro-batches of the Spark job failing."""
    if _on_connect_workers(state):
        connectors = "(" + _flows_regex(state.mirrors) + ")-Mirror.+Connector"
        expr = (f"max by (spec, connector, task) ({metric('kafka_connect_connector_task_status')}"
                f"{{{spec}, status=\"failed\", connector=~{_q(connectors)}}}) == 1")
        summary = "{{ $labels.connector }} task {{ $labels.task }} failed"
        fix = "Read the task's trace (GET /connectors/<name>/status) and restart it (POST .../tasks/<n>/restart)."
    else:
        expr = f"sum by (spec, flow) (increase({metric('mm2spec_mirror_errors_total')}{{{spec}}}[5m])) > 0"
        summary = "{{ $labels.flow }}: the Spark job's micro-batches fail"
        fix = "Read the driver's log; the job retries, and the RPO grows while it fails."
    return _alert("Mm2specTaskFailed", "warning", expr, summary, fix)


def _alert(name: str, severity: str, expr: str, summary: str, description: str, duration: str = ALERT_FOR) -> dict:
    rule = {"alert": name, "expr": expr}
    if duration != "0m":
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def jmx_exporter_config() -> dict:
    """The JMX exporter agent's config: one rule per metric the table reads from an MBean.

    Each pattern ends at the attribute's name and ``:`` (the exporter matches
    ``domain<keys><>attribute: value`` anywhere), so ``record-age-ms`` never catches
    ``record-age-ms-max``. The exporter (1.x) takes ``_total`` off every name and adds it back to a
    COUNTER's only, so a name of the table that ends in ``_total`` is a COUNTER and every other
    one a GAUGE (a counter without ``_total``, ``record_count``, keeps its name that way).
    """
    rules = []
    for entry in METRICS:
        if entry.mbean is None:
            continue
        rules.append(_jmx_rule(entry))
    return {"lowercaseOutputName": False, "lowercaseOutputLabelNames": False,
            "includeObjectNames": ["kafka.connect.mirror:*", "kafka.connect:*"], "rules": rules}


def _jmx_rule(entry: Metric) -> dict:
    assert entry.mbean is not None
    labels = {label: f"${i + 1}" for i, label in enumerate(entry.mbean.labels)}
    if entry.state_label:
        # A text attribute: 1 for the state it holds, the state as a label (as Strimzi's configs do).
        rule = {"pattern": f"{entry.mbean.pattern}<>{entry.attribute}: ([a-z_-]+)", "name": entry.name, "value": 1}
        labels["status"] = f"${len(entry.mbean.labels) + 1}"
    else:
        rule = {"pattern": f"{entry.mbean.pattern}<>{entry.attribute}:", "name": entry.name}
    if labels:
        rule["labels"] = labels
    rule.update({"help": entry.help, "type": "COUNTER" if entry.name.endswith("_total") else "GAUGE"})
    return rule


# The dashboard ----------------------------------------------------------------------------------

_GRID_WIDTH = 24


def dashboard(state: DesiredState) -> dict:
    """A Grafana dashboard (JSON model, schema 39) of the spec's flows on a Prometheus data source."""
    spec = f"spec={_q(state.name)}"
    dr = f"{spec}, flow=~\"$flow\""
    rows: list[tuple[str, list[dict]]] = [
        ("Disaster recovery (mm2spec)", [
            _stat("RPO now (s)", [f"max by (flow) ({metric('mm2spec_rpo_seconds')}{{{dr}}})"], "s",
                  "Age of the oldest source record not yet on DR: what a failover now would lose."),
            _stat("Records behind", [f"sum by (flow) ({metric('mm2spec_rpo_records')}{{{dr}}})"], "short",
                  "Records on the source not yet on DR."),
            _stat("Failed over", [f"max by (flow) ({metric('mm2spec_flow_failed_over')}{{{dr}}})"], "bool",
                  "1 while the flow is failed over: clients on DR, the mirror stopped."),
            _stat("Mirror up", [f"{metric('up')}{{{spec}}}"], "bool", "Whether Prometheus reaches each endpoint."),
            _series("RPO against the objective (s)", [
                f"max by (flow) ({metric('mm2spec_rpo_seconds')}{{{dr}}})",
                f"max by (flow) ({metric('mm2spec_objective_rpo_seconds')}{{{dr}}})"], "s",
                "The RPO per flow, and the flow's rpoSeconds objective."),
            _series("Records behind per partition", [
                f"max by (flow, topic, partition) ({metric('mm2spec_rpo_records')}{{{dr}}})"], "short",
                "Per partition: records a failover now would lose."),
            _series("Checkpoint age per group (s)", [
                f"max by (flow, group) ({metric('mm2spec_checkpoint_age_seconds')}{{{dr}}})",
                f"max by (flow) ({metric('mm2spec_objective_checkpoint_age_seconds')}{{{dr}}})"], "s",
                "Age of each group's newest checkpoint on DR once it committed since; and the bound."),
        ]),
        ("Replication", [
            _text("Source -> Destination", "\n".join(
                f"- **{flow.name}**: {flow.source} -> {flow.target}" for flow in state.mirrors)),
            _stat("Last rebalance (s ago)", [
                f"min({metric('kafka_connect_worker_rebalance_time_since_last_rebalance_ms')}{{{spec}}}) / 1000"],
                "s", "Time since the Connect workers' last rebalance (engine connect)."),
            _stat("Completed rebalances", [
                f"sum({metric('kafka_connect_worker_rebalance_completed_rebalances_total')}{{{spec}}})"], "short",
                "Rebalances the Connect workers completed (engine connect)."),
            _stat("Throughput (records/s)", [
                f"sum({metric('kafka_connect_mirror_source_connector_record_rate')}{{{spec}}})"], "short",
                "Records replicated per second, all flows."),
            _stat("Topics synced", [
                f"count(count by (topic) ({metric('kafka_connect_mirror_source_connector_record_count')}{{{spec}}}))"],
                "short", "Target topics the mirror writes."),
            _stat("Bytes transferred", [
                f"sum({metric('kafka_connect_mirror_source_connector_byte_count')}{{{spec}}})"], "bytes",
                "Bytes replicated since the mirror started."),
            _stat("Replication latency (ms)", [
                f"max({metric('kafka_connect_mirror_source_connector_replication_latency_ms_max')}{{{spec}}})",
                f"avg({metric('kafka_connect_mirror_source_connector_replication_latency_ms_avg')}{{{spec}}})"],
                "ms", "Record timestamp to its write on DR: largest and average."),
            _series("Message count", [
                f"sum by (target) ({metric('kafka_connect_mirror_source_connector_record_count')}{{{spec}}})"],
                "short", "Records replicated, per target cluster."),
            _series("Topics throughput (records/s)", [
                f"sum by (topic) ({metric('kafka_connect_mirror_source_connector_record_rate')}{{{spec}}})"],
                "short", "Records per second per target topic."),
            _series("Topics replication latency (ms)", [
                f"max by (topic) ({metric('kafka_connect_mirror_source_connector_replication_latency_ms_max')}"
                f"{{{spec}}})",
                f"max by (topic) ({metric('kafka_connect_mirror_source_connector_record_age_ms_max')}{{{spec}}})"],
                "ms", "Per target topic: largest replication latency, and the largest record age when read."),
            _table("Topics bytes transferred", [
                f"sum by (instance, topic) ({metric('kafka_connect_mirror_source_connector_byte_count')}{{{spec}}})",
                f"sum by (instance, topic) ({metric('kafka_connect_mirror_source_connector_byte_rate')}{{{spec}}})"],
                "Per node and topic: bytes replicated, and bytes per second."),
            _table("Synced topics", [
                f"count by (instance, topic) ({metric('kafka_connect_mirror_source_connector_record_count')}"
                f"{{{spec}}})"], "Per node: the topics it mirrors (partitions each)."),
        ]),
        ("Connect tasks and workers (engine connect)", [
            _table("Task errors", [
                f"sum by (connector, task) ({metric(name)}{{{spec}}})" for name in (
                    "kafka_connect_task_error_total_record_errors", "kafka_connect_task_error_total_record_failures",
                    "kafka_connect_task_error_total_retries")], "Per task: record errors, failures and retries."),
            _table("Source task metrics", [
                f"sum by (connector, task) ({metric(name)}{{{spec}}})" for name in (
                    "kafka_connect_source_task_source_record_active_count",
                    "kafka_connect_source_task_source_record_poll_total",
                    "kafka_connect_source_task_source_record_write_total")],
                "Per task: records in flight, polled from the source, written to DR."),
            _table("Connector task metrics", [
                f"max by (connector, task) ({metric(name)}{{{spec}}})" for name in (
                    "kafka_connect_connector_task_offset_commit_success_percentage",
                    "kafka_connect_connector_task_offset_commit_failure_percentage")] + [
                f"max by (connector, task, status) ({metric('kafka_connect_connector_task_status')}{{{spec}}}) == 1"],
                "Per task: offset commits that succeeded and failed, and its state."),
            _table("Connector state", [
                f"max by (connector, status) ({metric('kafka_connect_connector_status')}{{{spec}}}) == 1"],
                "Each MM2 connector's state."),
            _table("Connect worker metrics", [
                f"sum by (instance) ({metric(name)}{{{spec}}})" for name in (
                    "kafka_connect_worker_connector_count", "kafka_connect_worker_task_count")] + [
                f"sum by (instance, connector) ({metric(name)}{{{spec}}})" for name in (
                    "kafka_connect_worker_connector_total_task_count",
                    "kafka_connect_worker_connector_running_task_count",
                    "kafka_connect_worker_connector_paused_task_count",
                    "kafka_connect_worker_connector_failed_task_count",
                    "kafka_connect_worker_connector_unassigned_task_count",
                    "kafka_connect_worker_connector_destroyed_task_count",
                    "kafka_connect_worker_connector_restarting_task_count")],
                "Per worker: connectors and tasks; per connector: tasks by state."),
        ]),
        ("Spark job (engine spark)", [
            _series("Batch duration (s)", [
                f"max by (flow) ({metric('mm2spec_mirror_batch_duration_seconds')}{{{dr}}})"], "s",
                "Duration of each flow's last micro-batch."),
            _series("Failed batches and restarts", [
                f"sum by (flow) (increase({metric('mm2spec_mirror_errors_total')}{{{dr}}}[5m]))",
                f"sum by (flow) (increase({metric('mm2spec_mirror_restarts_total')}{{{dr}}}[5m]))"], "short",
                "Per flow, over five minutes: micro-batches that failed, and restarts of its query."),
            _series("Offset syncs and checkpoints written (/s)", [
                f"sum by (flow) (rate({metric('mm2spec_offset_syncs_written_total')}{{{dr}}}[5m]))",
                f"sum by (flow) (rate({metric('mm2spec_checkpoints_written_total')}{{{dr}}}[5m]))"], "short",
                "What a failover translates groups with."),
        ]),
    ]
    panels: list[dict] = []
    y = 0
    for title, row_panels in rows:
        panels.append({"type": "row", "title": title, "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
                       "panels": []})
        y += 1
        x = line_height = 0
        for panel in row_panels:  # left to right, a new line when the next panel does not fit
            width, height = panel["gridPos"]["w"], panel["gridPos"]["h"]
            if x + width > _GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            panel["gridPos"].update({"x": x, "y": y})
            x, line_height = x + width, max(line_height, height)
        y += line_height
        panels += row_panels
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
    flows = [flow.name for flow in state.mirrors]
    return {
        "title": f"mm2spec DR: {state.name} ({_env(state)})",
        "uid": f"mm2spec-{state.name}-{_env(state)}"[:40],
        "tags": ["mm2spec", "kafka", "mirrormaker2"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "flow", "type": "custom", "label": "Flow", "multi": True, "includeAll": True,
             "allValue": ".*", "query": ",".join(flows),
             "current": {"text": "All", "value": "$__all"},
             "options": [{"text": name, "value": name, "selected": False} for name in flows]},
        ]},
        "panels": panels,
    }


def _targets(queries: list[str], table: bool = False) -> list[dict]:
    return [{"refId": chr(ord("A") + i), "expr": query, "datasource": {"type": "prometheus", "uid": "${datasource}"},
             **({"format": "table", "instant": True} if table else {"legendFormat": "__auto"})}
            for i, query in enumerate(queries)]


def _panel(kind: str, title: str, queries: list[str], description: str, width: int, height: int, unit: str = "",
           table: bool = False) -> dict:
    panel = {"type": kind, "title": title, "description": description,
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "gridPos": {"w": width, "h": height}, "targets": _targets(queries, table)}
    if unit:
        panel["fieldConfig"] = {"defaults": {"unit": unit}, "overrides": []}
    return panel


def _stat(title: str, queries: list[str], unit: str, description: str) -> dict:
    return _panel("stat", title, queries, description, 4, 4, unit)


def _series(title: str, queries: list[str], unit: str, description: str) -> dict:
    return _panel("timeseries", title, queries, description, 12, 8, unit)


def _table(title: str, queries: list[str], description: str) -> dict:
    panel = _panel("table", title, queries, description, 12, 8, table=True)
    panel["transformations"] = [{"id": "merge", "options": {}}]
    return panel


def _text(title: str, markdown: str) -> dict:
    return {"type": "text", "title": title, "gridPos": {"w": 4, "h": 4},
            "options": {"mode": "markdown", "content": markdown}}


def panel_queries(board: dict) -> list[str]:
    """Every query of the dashboard's panels, in order (the tests check each against the names table)."""
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]
