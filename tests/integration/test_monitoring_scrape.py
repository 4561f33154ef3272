"""A real Prometheus scrapes what mm2spec serves: Debian's ``prometheus`` server (the package that
brings promtool) runs the RENDERED scrape config and rules, scraping a running Spark mirror's
``/metrics`` and the DR exporter (``mm2spec verify --serve``), and its HTTP API finds the records
this test produced counted, the RPO per partition, and a series for every dashboard query that
engine spark can answer. Then engine connect: MM2 on a Connect worker started with the Prometheus
JMX exporter agent and the rendered ``jmx-exporter.yml``, where Prometheus finds the records counted
under the same names, the connector's and task's states, and a series for every dashboard query of
the Connect worker's names.

One test per engine, on the session's clusters: the Spark job's start is most of the first one's
time, the worker's start most of the second's (~20 s).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.components import components
from mm2spec.dev.process import pick_free_ports
from mm2spec.errors import ComponentMissing
from mm2spec.dev.process import stop
from mm2spec.live.connect import ConnectClient
from mm2spec.mm2.metric_names import METRICS, MIRROR_SOURCE
from mm2spec.mm2.retry import retry_call
from mm2spec.render import connectors, render_files, spark_job_config, write_files
from mm2spec.render.monitoring import (DASHBOARD, JMX_EXPORTER_CONFIG, RULES, SCRAPE_CONFIG, WORKER_ENV, job_names,
                                       panel_queries)
from mm2spec.render.spark import anchor_checkpoint
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from tests.integration.required import missing_component
from tests.integration.specs import spec_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RECORDS = 600
PARTITIONS = 2
SCRAPE_EVERY = "1s"
"""The test's scrape and rule interval (the rendered 15 s would make it wait minutes)."""
CONNECT_ONLY = tuple(m.name for m in METRICS if m.source == "connect")


@pytest.fixture(scope="module")
def prometheus() -> str:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if not found:
        missing_component("the Prometheus server is not installed: run scripts/setup (Debian package prometheus)")
    return found


@pytest.fixture
def spark_writer() -> None:
    try:
        jars = components().spark_kafka_jars
    except ComponentMissing as exc:
        missing_component(exc)
    if not any(j.name == "mm2spec-spark-writer.jar" for j in jars):
        missing_component("mm2spec-spark-writer.jar is not installed; run scripts/install-spark.sh")


def _assert_every_query_answers(api: str, queries: list[str], timeout: float) -> None:
    """Each query returns at least one series from Prometheus within ``timeout`` seconds."""
    empty: list[str] = []

    def all_answer() -> bool:
        empty[:] = [q for q in queries if not _query(api, q)]
        return not empty

    deadline = time.monotonic() + timeout
    while not all_answer() and time.monotonic() < deadline:
        time.sleep(1)
    assert not empty, f"dashboard queries without series: {empty}"


def _query(api: str, expr: str) -> list[dict]:
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        data = json.load(response)
    assert data["status"] == "success", data
    return data["data"]["result"]


def _value(api: str, expr: str) -> float | None:
    result = _query(api, expr)
    return float(result[0]["value"][1]) if result else None


def _ready(api: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api}/-/ready", timeout=5) as response:
            return response.status == 200
    except OSError:  # not listening yet (URLError is an OSError)
        return False


def _wait(what: str, check, timeout: float, *logs: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    tails = "\n".join(f"--- {log}:\n" + log.read_text(errors="replace")[-3000:] for log in logs if log.exists())
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{tails}")


def _rendered_prometheus(files: dict[str, str], folder: Path) -> list[dict]:
    """Write the rendered scrape config (at the test's interval) and rules into ``folder``; its scrape jobs."""
    folder.mkdir()
    config = yaml.safe_load(files[SCRAPE_CONFIG])
    config["global"] = {"scrape_interval": SCRAPE_EVERY, "evaluation_interval": SCRAPE_EVERY}
    (folder / SCRAPE_CONFIG).write_text(yaml.safe_dump(config, sort_keys=False))
    (folder / RULES).write_text(files[RULES])
    return config["scrape_configs"]


def _start_prometheus(prometheus: str, folder: Path, api_port: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [prometheus, f"--config.file={folder / SCRAPE_CONFIG}", f"--storage.tsdb.path={folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{api_port}", "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT, cwd=folder)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


def test_prometheus_scrapes_the_spark_mirror_and_the_dr_exporter(kafka_pair, prometheus, spark_writer, tmp_path):
    uid = uuid.uuid4().hex[:8]
    topic, group, name = f"it-mon-{uid}", f"it-mon-{uid}-g", f"it-mon-{uid}"
    metrics_port, exporter_port, api_port = pick_free_ports(3)
    primary = kafka_pair.primary.bootstrap

    # Records and a group's commit on the source before the mirror starts.
    admin = AdminClient({"bootstrap.servers": primary})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": primary, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=b"v" * 100, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": primary, "group.id": group, "enable.auto.commit": False})
    # A fresh cluster may still be loading its group coordinator: the one retry of retriable errors.
    retry_call(lambda: consumer.commit(offsets=[TopicPartition(topic, p, RECORDS // PARTITIONS // 2)
                                                for p in range(PARTITIONS)], asynchronous=False))
    consumer.close()

    spec = spec_for(kafka_pair, [topic], [group], name=name,
                    mirror={"emitCheckpointsIntervalSeconds": 1, "objectives": {"rpoSeconds": 60}})
    spec["spark"] = {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp_path / "cp"),
                     "metrics": {"port": metrics_port, "exporterPort": exporter_port}}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    state = load_desired_state(spec_file, None)

    # The rendered monitoring files, at the test's interval: engine spark's scrape config names the
    # driver and the DR exporter.
    folder = tmp_path / "prometheus"
    files = render_files(state)
    spark_job, dr_job = _rendered_prometheus(files, folder)
    assert (spark_job["job_name"], dr_job["job_name"]) == (job_names(state)["mirror"], job_names(state)["dr"])
    assert spark_job["static_configs"][0]["targets"] == [f"localhost:{metrics_port}"]
    assert dr_job["static_configs"][0]["targets"] == [f"localhost:{exporter_port}"]

    deployment = mirror.start(anchor_checkpoint(spark_job_config(state), tmp_path), state_dir=tmp_path / "state",
                              wait_running=300)
    driver_log = Path(deployment.state_dir) / "driver.log"
    exporter_log = tmp_path / "exporter.log"
    prometheus_log = tmp_path / "prometheus.log"
    processes = []
    try:
        with open(exporter_log, "wb") as out:
            processes.append(subprocess.Popen(
                [str(Path(sys.executable).with_name("mm2spec")), "verify", str(spec_file), "--serve", str(exporter_port),
                 "--refresh", "1"], stdout=out, stderr=subprocess.STDOUT, env={**os.environ}))
        processes.append(_start_prometheus(prometheus, folder, api_port, prometheus_log))
        api = f"http://127.0.0.1:{api_port}"
        logs = (driver_log, exporter_log, prometheus_log)
        spec_sel = f'spec="{name}"'
        _wait("Prometheus to be ready", lambda: _ready(api), 60, prometheus_log)

        # The records this test produced, counted by the Spark job and scraped.
        count = f"sum(kafka_connect_mirror_source_connector_record_count{{{spec_sel}, topic=\"{topic}\"}})"
        _wait(f"{RECORDS} records counted in Prometheus", lambda: _value(api, count) == RECORDS, 180, *logs)
        # MirrorSourceMetrics' labels, as Connect's agent serves them (the test below checks those)
        one = f'kafka_connect_mirror_source_connector_record_count{{{spec_sel}, topic="{topic}", partition="0"}}'
        [series] = _query(api, one)
        assert {k: series["metric"][k] for k in ("source", "target")} == {"source": "primary", "target": "dr"}, series
        # The exporter's RPO: every partition of the topic, nothing behind once mirrored.
        rpo = f'mm2spec_rpo_records{{{spec_sel}, topic="{topic}"}}'
        _wait("the RPO per partition at 0", lambda: len(_query(api, rpo)) == PARTITIONS
              and _value(api, f"sum({rpo})") == 0, 60, *logs)
        assert _value(api, f'min(up{{{spec_sel}}})') == 1 and len(_query(api, f"up{{{spec_sel}}}")) == 2
        assert _value(api, f'mm2spec_flow_failed_over{{{spec_sel}, flow="primary-to-dr"}}') == 0
        assert _value(api, f'min(mm2spec_cluster_up{{{spec_sel}}})') == 1

        # Every dashboard query engine spark can answer returns series from this Prometheus.
        queries = [q.replace("$flow", ".*") for q in panel_queries(json.loads(files[DASHBOARD]))
                   if not any(name in q for name in CONNECT_ONLY)]
        assert len(queries) >= 15
        _assert_every_query_answers(api, queries, 60)

        # Ctrl-C stops the exporter cleanly.
        processes[0].send_signal(signal.SIGINT)
        assert processes[0].wait(15) == 0, exporter_log.read_text()
        assert "stopped" in exporter_log.read_text()
    finally:
        _stop(processes)
        mirror.stop(deployment)


def test_prometheus_scrapes_mm2_on_connect_through_the_jmx_exporter_agent_under_the_same_names(
        kafka_pair, connect_worker, prometheus, tmp_path):
    """Engine connect: the worker runs the JMX exporter agent with the rendered rules, Prometheus the
    rendered scrape config; MM2's records are counted under the Spark job's names and the
    connectors' and tasks' states are series."""
    uid = uuid.uuid4().hex[:8]
    topic, name = f"it-monc-{uid}", f"it-monc-{uid}"
    metrics_port, api_port = pick_free_ports(2)
    primary = kafka_pair.primary.bootstrap
    admin = AdminClient({"bootstrap.servers": primary})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": primary, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=b"v" * 100, partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    # restUrl names the workers' host, which the rendered scrape job targets on connect.metrics.port.
    spec = spec_for(kafka_pair, [topic], name=name, engine="connect", rest_url="http://127.0.0.1:8083",
                    connect={"metrics": {"port": metrics_port}})
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    state = load_desired_state(spec_file, None)
    files = render_files(state)
    rendered = tmp_path / "rendered"
    write_files(files, rendered)
    assert "=9404:" not in files[WORKER_ENV] and f"={metrics_port}:" in files[WORKER_ENV]
    connect_job, dr_job = _rendered_prometheus(files, tmp_path / "prometheus")
    assert connect_job["job_name"] == job_names(state)["mirror"] and dr_job["job_name"] == job_names(state)["dr"]
    assert connect_job["static_configs"][0]["targets"] == [f"127.0.0.1:{metrics_port}"]

    worker = connect_worker(rendered / "connect-distributed.properties", overrides={"listeners": "http://127.0.0.1:0"},
                            metrics=(metrics_port, rendered / JMX_EXPORTER_CONFIG))
    client = ConnectClient(worker.url)
    names = [connector["name"] for connector in connectors(state)]
    prometheus_log = tmp_path / "prometheus.log"
    processes = []
    try:
        for connector in connectors(state):
            client.put_connector_config(connector["name"], connector["config"])
        processes.append(_start_prometheus(prometheus, tmp_path / "prometheus", api_port, prometheus_log))
        api = f"http://127.0.0.1:{api_port}"
        logs = (Path(worker.process.log), prometheus_log)
        spec_sel = f'spec="{name}"'
        _wait("Prometheus to be ready", lambda: _ready(api), 60, prometheus_log)

        # The records this test produced, counted by MM2 and scraped through the agent, under the
        # names and labels the Spark job serves (and MM2's source).
        count = f'sum(kafka_connect_mirror_source_connector_record_count{{{spec_sel}, topic="{topic}"}})'
        _wait(f"{RECORDS} records counted in Prometheus", lambda: _value(api, count) == RECORDS, 120, *logs)
        for entry in METRICS:
            if entry.mbean is MIRROR_SOURCE:
                series = _query(api, f'{entry.name}{{{spec_sel}, topic="{topic}"}}')
                assert len(series) == PARTITIONS, entry.name
                assert set(series[0]["metric"]) >= {"source", "target", "topic", "partition", "spec", "env"}, series[0]
        assert _value(api, f'up{{job="{connect_job["job_name"]}"}}') == 1

        # The connectors' and their tasks' states, 1 under their status label.
        source = f"{state.mirrors[0].name}-MirrorSourceConnector"
        assert source in names
        state_of = f'kafka_connect_connector_status{{{spec_sel}, connector="{source}", status="running"}}'
        _wait("the source connector's state", lambda: _value(api, state_of) == 1, 30, *logs)
        tasks = _query(api, f'kafka_connect_connector_task_status{{{spec_sel}, connector="{source}"}} == 1')
        assert tasks and {t["metric"]["status"] for t in tasks} == {"running"}, tasks

        # Every dashboard query that reads the Connect worker's own names returns series.
        queries = [q.replace("$flow", ".*") for q in panel_queries(json.loads(files[DASHBOARD]))
                   if any(name in q for name in CONNECT_ONLY)]
        assert len(queries) >= 10
        _assert_every_query_answers(api, queries, 30)
    finally:
        _stop(processes)
        for connector in names:
            client.delete_connector(connector)
        stop(worker.process)  # the agent's worker serves no other test: give its core back
