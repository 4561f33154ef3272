"""What mm2spec serves to Prometheus, without clusters: the text format (``metric_names.exposition``),
the Spark job's ``/metrics`` (``spark/mm2spark/prometheus.py``) and the DR exporter
(``mm2spec verify --serve``, ``ops/modules/exporter.py``) with fakes, and a port already in use.

The real scrape (Prometheus, a running Spark mirror, the exporter) is
tests/integration/test_monitoring_scrape.py.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from mm2spec.cli import main
from mm2spec.errors import ClusterUnreachable, JobConfigError, OperationRefused
from mm2spec.live.types import FailoverState, GroupState, Record
from mm2spec.mm2.metric_names import BY_NAME, CONTENT_TYPE, NAMES, exposition
from mm2spec.mm2.records import Checkpoint
from mm2spec.ops.modules import exporter, verify
from mm2spec.ops.modules.exporter import Collection, DrExporter, collect
from mm2spec.ops.modules.topology import MirroredPartition
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.render import spark_job_config
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "spark"))

from mm2spark.config import parse_job_config  # noqa: E402
from mm2spark.metrics import MirrorMetrics  # noqa: E402
from mm2spark.prometheus import MetricsEndpoint, PartitionBatch, PartitionFigures, partition_batches  # noqa: E402
from mm2spark.writer import WRITER_JAR, BatchWritten, PartitionWritten  # noqa: E402

EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
NOW_S = 1_800_000_000.0
LINE = re.compile(r'^([a-z_:][a-z0-9_:]*)(\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\})? (-?[0-9.e+]+)$')


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A page of Prometheus's text format, checked line by line: every sample's name has HELP and
    TYPE lines before it, both as the one table says."""
    found: dict[str, list] = {}
    declared: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert line == f"# HELP {name} {BY_NAME[name].help}"
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind == BY_NAME[name].kind
            declared[name] = kind
        else:
            match = LINE.match(line)
            assert match, line
            name = match.group(1)
            assert name in declared, f"{name} has no TYPE line"
            labels = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
            assert set(labels) <= set(BY_NAME[name].labels), line
            found.setdefault(name, []).append((labels, float(match.group(4))))
    return found


def fetch(port: int, path: str = "/metrics") -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


@pytest.fixture
def busy_port():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        yield held.getsockname()[1]


# ------------------------------------------------------------------------------ the format

def test_the_text_format_takes_help_and_type_from_the_table_and_escapes_labels():
    text = exposition({
        "mm2spec_rpo_records": [({"flow": "a", "topic": 'we"ird\\name\n', "partition": "0", "spec": "x"}, 3),
                                ({"flow": "a", "topic": "t", "partition": "1"}, float("nan"))],
        "mm2spec_rpo_seconds": [({"flow": "a", "topic": "t", "partition": "1"}, 1.5)],
        "mm2spec_checkpoint_age_seconds": [],
    })
    assert text == (
        "# HELP mm2spec_rpo_records " + BY_NAME["mm2spec_rpo_records"].help + "\n"
        "# TYPE mm2spec_rpo_records gauge\n"
        'mm2spec_rpo_records{flow="a",topic="we\\"ird\\\\name\\n",partition="0"} 3\n'
        "# HELP mm2spec_rpo_seconds " + BY_NAME["mm2spec_rpo_seconds"].help + "\n"
        "# TYPE mm2spec_rpo_seconds gauge\n"
        'mm2spec_rpo_seconds{flow="a",topic="t",partition="1"} 1.5\n')
    # a label the table does not give the metric (here spec: the scrape adds it) is never written
    assert "spec=" not in text
    with pytest.raises(KeyError, match="not in mm2spec.mm2.metric_names"):
        exposition({"mm2spec_rpo_recrods": [({}, 1)]})


# ------------------------------------------------------------------- the Spark job's /metrics

def _metrics() -> MirrorMetrics:
    metrics = MirrorMetrics("payments-dr", None)
    figures = metrics.flow("primary-to-dr")
    figures.state, figures.batch_duration_ms, figures.errors, figures.restarts = "running", 1500, 2, 1
    figures.offset_syncs_written, figures.checkpoints_written = 40, 7
    metrics.flow("eu-to-dr").state = "restarting"
    return metrics


def test_the_jobs_page_has_mm2s_per_partition_figures_and_each_flows_own():
    endpoint = MetricsEndpoint(_metrics(), 0, ["primary-to-dr", "eu-to-dr"])
    endpoint.partitions = PartitionFigures(started_at=NOW_S - 100)
    ts = int(NOW_S * 1000)
    # two batches of partition 0 two seconds apart, one of partition 1; timestamps 1-3 s before the write
    endpoint.partitions.record("primary", "dr", [PartitionBatch("primary.orders", 0, 10, 1000, ts - 3000, (ts - 2000) * 10)],
                               read_at=NOW_S - 2.5, now=NOW_S - 2)
    endpoint.partitions.record("primary", "dr", [PartitionBatch("primary.orders", 0, 30, 3000, ts - 1000, (ts - 500) * 30),
                                      PartitionBatch("primary.orders", 1, 0, 0, None, 0)],
                               read_at=NOW_S - 0.25, now=NOW_S)
    page = parse(endpoint.text(now=NOW_S))

    def value(name, **labels):
        [found] = [v for got, v in page[name] if got == labels]
        return found

    p0 = {"source": "primary", "target": "dr", "topic": "primary.orders", "partition": "0"}
    source = "kafka_connect_mirror_source_connector_"
    assert value(source + "record_count", **p0) == 40 and value(source + "byte_count", **p0) == 4000
    assert value(source + "record_rate", **p0) == 4.0  # 40 records in the 10 s window
    assert value(source + "byte_rate", **p0) == 400.0
    assert value(source + "replication_latency_ms", **p0) == 500  # the last batch's mean
    assert value(source + "replication_latency_ms_max", **p0) == 1000  # its oldest record, the window's worst
    assert value(source + "replication_latency_ms_avg", **p0) == (10 * 0 + 30 * 500) / 40
    assert value(source + "record_age_ms", **p0) == 250  # read a quarter second after the mean timestamp
    assert value(source + "record_age_ms_max", **p0) == 750
    assert len(page[source + "record_count"]) == 1, "a partition with nothing written has no series yet"
    flow = {"flow": "primary-to-dr"}
    assert value("mm2spec_mirror_up", **flow) == 1 and value("mm2spec_mirror_up", flow="eu-to-dr") == 0
    assert value("mm2spec_mirror_batch_duration_seconds", **flow) == 1.5
    assert value("mm2spec_mirror_errors_total", **flow) == 2 and value("mm2spec_mirror_restarts_total", **flow) == 1
    assert value("mm2spec_offset_syncs_written_total", **flow) == 40
    assert value("mm2spec_checkpoints_written_total", **flow) == 7
    assert [labels for labels, _ in page["mm2spec_mirror_batch_duration_seconds"]] == [flow], \
        "no batch yet: no duration"
    # out of the window the rates fall to 0 and the latency figures keep the last batch's
    later = parse(endpoint.text(now=NOW_S + 60))
    assert [v for _, v in later[source + "record_rate"]] == [0.0]
    assert [v for _, v in later[source + "replication_latency_ms_max"]] == [500.0]


def test_the_writers_results_become_target_partitions():
    written = BatchWritten(partitions=[PartitionWritten("orders", 3, records=5, bytes=50, skipped=0, timestamp_min=1000,
                                                        timestamp_sum=5100, runs=[])])
    assert partition_batches(written, lambda topic: f"primary.{topic}") == [
        PartitionBatch("primary.orders", 3, 5, 50, 1000, 5100)]


def test_the_job_serves_its_page_over_http_and_a_port_in_use_names_the_port_and_the_flows(busy_port):
    endpoint = MetricsEndpoint(_metrics(), 0, ["primary-to-dr"], host="127.0.0.1")
    endpoint.start()
    try:
        content_type, body = fetch(endpoint.port)
        assert content_type == CONTENT_TYPE and 'mm2spec_mirror_up{flow="primary-to-dr"} 1' in body
        with pytest.raises(urllib.error.HTTPError, match="404"):
            fetch(endpoint.port, "/other")
    finally:
        endpoint.stop()
    with pytest.raises(JobConfigError) as refused:
        MetricsEndpoint(_metrics(), busy_port, ["primary-to-dr", "eu-to-dr"]).start()
    message = str(refused.value)
    assert f"spark.metrics.port {busy_port} is already in use" in message
    assert "flow primary-to-dr, eu-to-dr" in message and "render again" in message


def test_the_rendered_job_config_names_the_specs_metrics_port_and_the_job_reads_it():
    job = spark_job_config(load_desired_state(EXAMPLE, "dev"))
    assert job["spark"]["metrics.port"] == 9405
    assert parse_job_config(job, environ={"PRIMARY_MM2_PASSWORD": "x", "DR_MM2_PASSWORD": "x"}).spark.metrics_port == 9405
    del job["spark"]["metrics.port"]  # a hand-made config without it: nothing is served
    assert parse_job_config(job, environ={}).spark.metrics_port is None
    for bad in ("http", 70000, -1):
        job["spark"]["metrics.port"] = bad
        with pytest.raises(JobConfigError, match="spark.metrics.port"):
            parse_job_config(job, environ={})


# -------------------------------------------------------------------------- the DR exporter

class FakeAdmin:
    def __init__(self, alias: str, down: bool):
        self.alias, self.down = alias, down

    def ping(self):
        if self.down:
            raise ClusterUnreachable(f'cluster "{self.alias}" (127.0.0.1:1) is unreachable: timed out')


class FakeGroups:
    def describe(self, groups):
        return {"orders-service": GroupState("orders-service", {("orders", 0): 100, ("orders", 1): 50}),
                "billing-eu": GroupState("billing-eu", {("orders", 0): 7})}


class FakeContext(Context):
    def __init__(self, down=()):
        super().__init__(load_desired_state(EXAMPLE, "dev"), Options(), clock=lambda: NOW_S)
        self.down = set(down)

    def admin(self, alias):
        return FakeAdmin(alias, alias in self.down)

    def client(self, kind, alias, **options):
        return FakeGroups()


PARTS = [MirroredPartition("orders", p, "orders") for p in range(3)]


@pytest.fixture
def dr_fakes(monkeypatch):
    """Three partitions of ``orders``: p1 30 records behind, its oldest 12.5 s old; two groups with
    checkpoints: orders-service's p0 current, its p1 behind a commit and written 40 s ago; a failover
    record for the flow."""
    states = {"primary-to-dr": FailoverState("primary-to-dr", "failed-over", "planned", "primary", "dr", 1)}
    monkeypatch.setattr(exporter, "partitions", lambda ctx, flow: PARTS)
    monkeypatch.setattr(exporter, "unmirrored", lambda ctx, flow, parts: [(parts[1], 30, 12.5)])
    monkeypatch.setattr(exporter, "groups", lambda ctx, flow: ["orders-service", "billing-eu"])
    monkeypatch.setattr(exporter, "checkpoints", lambda ctx, flow, with_age: {
        ("orders-service", "orders", 0): (Checkpoint("orders-service", "orders", 0, 100, 90), NOW_S * 1000 - 90_000),
        ("orders-service", "orders", 1): (Checkpoint("orders-service", "orders", 1, 40, 35), NOW_S * 1000 - 40_000)})
    monkeypatch.setattr(exporter, "read_flow_states", lambda spec, flows, secrets: {
        f.name: states[f.name] for f in flows if f.name in states})


def _values(collection: Collection) -> dict[str, dict[tuple, float]]:
    return {name: {tuple(sorted(labels.items())): value for labels, value in rows}
            for name, rows in collection.series.items()}


def test_the_exporter_serves_the_rpo_per_partition_checkpoint_age_per_group_and_the_failover(dr_fakes):
    collection = collect(FakeContext())
    values = _values(collection)
    flow = ("flow", "primary-to-dr")
    assert values["mm2spec_rpo_records"] == {
        (flow, ("partition", str(p)), ("topic", "orders")): (30 if p == 1 else 0) for p in range(3)}
    assert values["mm2spec_rpo_seconds"][(flow, ("partition", "1"), ("topic", "orders"))] == 12.5
    assert values["mm2spec_rpo_seconds"][(flow, ("partition", "0"), ("topic", "orders"))] == 0
    # orders-service: p0's checkpoint is at its commit (0 however old), p1's is 40 s behind a commit;
    # billing-eu has no checkpoint at all: verify reports that, it is no age
    assert values["mm2spec_checkpoint_age_seconds"] == {(flow, ("group", "orders-service")): 40.0}
    assert values["mm2spec_flow_failed_over"] == {(flow,): 1}
    assert values["mm2spec_cluster_up"] == {(("cluster", "dr"),): 1, (("cluster", "primary"),): 1}
    assert collection.problems == ()
    page = parse(collection.text())
    assert set(page) <= NAMES and len(page) == 5


def test_a_cluster_that_does_not_answer_is_down_and_the_rest_is_still_served(dr_fakes):
    collection = collect(FakeContext(down={"primary"}))
    values = _values(collection)
    assert values["mm2spec_cluster_up"] == {(("cluster", "dr"),): 1, (("cluster", "primary"),): 0}
    assert values["mm2spec_rpo_records"] == {} and values["mm2spec_checkpoint_age_seconds"] == {}
    assert values["mm2spec_flow_failed_over"] == {(("flow", "primary-to-dr"),): 1}  # read on DR
    assert collection.problems == ('cluster "primary" (127.0.0.1:1) is unreachable: timed out',)
    assert "mm2spec_rpo_records" not in collection.text()


def test_a_cluster_lost_during_a_collection_is_a_problem_noted_not_a_crash(dr_fakes, monkeypatch):
    def gone(ctx, flow, parts):
        raise ClusterUnreachable('cluster "dr" (127.0.0.1:2) is unreachable: connection refused')

    monkeypatch.setattr(exporter, "unmirrored", gone)
    collection = collect(FakeContext())
    assert collection.problems == ('cluster "dr" (127.0.0.1:2) is unreachable: connection refused',)
    assert _values(collection)["mm2spec_checkpoint_age_seconds"]  # the other reads went on


def test_the_exporter_serves_the_latest_collection_until_stopped_and_refuses_a_port_in_use(dr_fakes, busy_port):
    seen: list[Collection] = []
    stop = threading.Event()
    dr = DrExporter(FakeContext(), 0, refresh=0.05, host="127.0.0.1")
    dr.listen()
    runner = threading.Thread(target=dr.run, args=(stop, lambda c: (seen.append(c), len(seen) >= 3 and stop.set())))
    runner.start()
    runner.join(10)
    assert not runner.is_alive() and len(seen) >= 3, "collected every refresh, stopped when asked"
    with pytest.raises(urllib.error.URLError):
        fetch(dr.port)  # not serving once stopped
    dr = DrExporter(FakeContext(), 0, host="127.0.0.1")
    dr.listen()
    try:
        assert fetch(dr.port)[1] == "", "nothing collected yet: an empty page"
        dr.collect_once()
        assert 'mm2spec_rpo_records{flow="primary-to-dr",topic="orders",partition="1"} 30' in fetch(dr.port)[1]
    finally:
        dr._close_server()
    with pytest.raises(OperationRefused, match=f"verify --serve {busy_port}: the port is already in use"):
        DrExporter(FakeContext(), busy_port).listen()


def test_verify_serve_on_a_port_in_use_is_an_error_naming_it_without_a_traceback(busy_port, capsys, monkeypatch):
    monkeypatch.setenv("PRIMARY_MM2_PASSWORD", "x")
    monkeypatch.setenv("DR_MM2_PASSWORD", "x")
    assert main(["verify", str(EXAMPLE), "--env", "dev", "--serve", str(busy_port)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: verify --serve {busy_port}: the port is already in use") and "Traceback" not in err
    assert "the spec's spark.metrics.exporterPort is the one its scrape config names, 9406" in err
    assert main(["verify", str(EXAMPLE), "--env", "dev", "--serve", "9406", "--refresh", "0"]) == 1
    assert "--refresh 0: the seconds between collections must be above 0" in capsys.readouterr().err


def test_the_exporter_serves_only_names_of_the_table():
    assert set(exporter.NAMES) <= NAMES
    assert all(BY_NAME[name].source == "mm2spec" for name in exporter.NAMES)
    assert json.dumps(sorted(exporter.NAMES))  # the README lists them


def test_the_job_stops_at_its_start_on_a_metrics_port_in_use_with_exit_1_and_no_traceback(busy_port, tmp_path):
    job = spark_job_config(load_desired_state(EXAMPLE, "dev"))
    job["spark"]["metrics.port"] = busy_port
    (tmp_path / "job.json").write_text(json.dumps(job))
    # The port is taken before Spark starts: no jar is read (the writer jar's name passes the check).
    run = subprocess.run([sys.executable, str(ROOT / "spark" / "mirror_job.py"), "--config", str(tmp_path / "job.json"),
                          "--status-file", str(tmp_path / "status.json"), "--jars", str(tmp_path / WRITER_JAR)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PRIMARY_MM2_PASSWORD": "x", "DR_MM2_PASSWORD": "x"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr == (f"error: spark.metrics.port {busy_port} is already in use on this host, so the mirror of "
                          "flow primary-to-dr cannot serve /metrics there: stop what listens on it, or set "
                          "spark.metrics.port in the spec to a free port and render again\n")


class FakeReader:
    """Watermarks per partition and the records at some offsets (timestamp in ms)."""

    def __init__(self, marks, stamps=None):
        self.marks, self.stamps = marks, stamps or {}

    def watermarks(self, topic, partition):
        return self.marks[(topic, partition)]

    def read(self, topic, partition, start, end):
        stamp = self.stamps.get((topic, partition, start))
        return [Record(topic, partition, start, b"k", b"v", stamp)] if stamp is not None else []


def test_the_rpo_of_a_partition_counts_from_the_mirrors_position_and_ages_its_oldest_unmirrored_record(monkeypatch):
    # p0 caught up; p1: sync (100 -> 40), DR holds 20 records after it, so the mirror is at 120 of
    # 150; p2: no sync yet, so nothing past the log start (5) is known mirrored.
    now_ms = NOW_S * 1000
    source = FakeReader({("orders", 1): (0, 150), ("orders", 2): (5, 8)},
                        {("orders", 1, 120): now_ms - 12_500, ("orders", 2, 5): now_ms - 100_000})
    dr = FakeReader({("orders", 1): (0, 60)})
    monkeypatch.setattr(verify, "behind", lambda ctx, flow, parts: parts[1:])
    monkeypatch.setattr(verify, "offset_syncs", lambda ctx, flow: {("orders", 1): [(50, 10), (100, 40)]})
    monkeypatch.setattr(verify, "partitions", lambda ctx, flow: PARTS)

    class Readers(FakeContext):
        def client(self, kind, alias, **options):
            return source if alias == "primary" else dr

    ctx = Readers()
    found = verify.unmirrored(ctx, ctx.flows[0], PARTS)
    assert [(part.partition, records, age) for part, records, age in found] == [(1, 30, 12.5), (2, 3, 100.0)]
    # verify.lag judges the same figures against the flow's objective (rpoSeconds 10 in the example)
    [outcome] = verify.lag(ctx, {"max_age_seconds": 600})
    assert outcome.status == "failed", outcome
    assert "2 of 3 partitions behind, ~33 records, oldest unmirrored 100.0s old" in outcome.message
