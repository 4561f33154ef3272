"""Unit tests of the Spark deployment helpers and the job's figures (no Spark, no network)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spec.cli import mirror as mirror_cli
from mm2spec.runtime import deployment as mirror
from mm2spark.metrics import BatchReport, MirrorMetrics, TopicBatch, progress_line


def test_mirror_command_registers_with_a_handler():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    mirror_cli.add_parsers(commands)
    args = parser.parse_args(["mirror", "spec.yaml", "--env", "dev", "--master", "spark://127.0.0.1:7077"])
    assert args.func is mirror_cli.cmd_mirror and args.env == "dev" and args.master == "spark://127.0.0.1:7077"


def test_status_of_a_job_that_never_ran(tmp_path):
    current = mirror.status(tmp_path / "nothing")
    assert not current.running and current.state == "absent" and current.pid is None
    assert mirror.stop(tmp_path / "nothing") is False


def test_status_reports_a_dead_driver_as_failed(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (tmp_path / "driver.pid").write_text(json.dumps({"pid": child.pid}))
    (tmp_path / "status.json").write_text(json.dumps({"state": "running", "flows": {"f": {"records": 5}}}))
    current = mirror.status(tmp_path)
    assert not current.running and current.state == "failed" and current.flows == {"f": {"records": 5}}


def test_stop_terminates_a_running_driver(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    (tmp_path / "driver.pid").write_text(json.dumps({"pid": child.pid}))
    assert mirror.status(tmp_path).running
    assert mirror.stop(tmp_path, timeout=10) is True
    # Ended long before its sleep would. Not its exit code: stop() reaps its own children, and
    # Popen reads a child someone else reaped as exit code 0.
    child.wait(timeout=10)
    assert not mirror.status(tmp_path).running


def test_a_driver_killed_after_the_grace_period_is_recorded_as_a_forced_stop(tmp_path):
    # A driver that ignores SIGTERM: stop() has to kill it, and the job could not record its stop.
    child = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, "
                              "signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert child.stdout.readline().strip() == "ready"
    (tmp_path / "driver.pid").write_text(json.dumps({"pid": child.pid}))
    (tmp_path / "status.json").write_text(json.dumps({"state": "running", "flows": {"f": {"records": 5}}}))
    assert mirror.stop(tmp_path, timeout=0.5) is True
    child.wait(timeout=10)  # gone (killed: SIGTERM was ignored), long before its sleep would end
    current = mirror.status(tmp_path)
    assert not current.running and current.state == "stopped" and current.flows == {"f": {"records": 5}}
    assert "killed after" in json.loads((tmp_path / "status.json").read_text())["forcedStop"]


def test_a_driver_gone_while_stopping_reads_as_stopped_and_a_recorded_failure_stays(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (tmp_path / "driver.pid").write_text(json.dumps({"pid": child.pid}))
    (tmp_path / "status.json").write_text(json.dumps({"state": "stopping"}))
    assert mirror.status(tmp_path).state == "stopped"
    (tmp_path / "status.json").write_text(json.dumps({"state": "failed"}))
    assert mirror.status(tmp_path).state == "failed"


def _fake_driver(seconds: float):
    """A job_command stand-in: a driver that lives ``seconds`` (no Spark)."""
    return lambda *args, **kwargs: [sys.executable, "-c", f"import time; time.sleep({seconds})"]


def test_foreground_and_background_runs_record_the_same_config_hash(tmp_path, monkeypatch):
    """A foreground run must not make a later start() restart an identical job (issue 9)."""
    job = {"apiVersion": "mm2spec/v1", "name": "j", "spark": {"master": "local[1]"}, "flows": []}
    monkeypatch.setattr(mirror, "job_command", _fake_driver(0))
    assert mirror.run_foreground(job, state_dir=tmp_path / "fg", master="local[2]") == 0
    foreground = json.loads((tmp_path / "fg" / "driver.pid").read_text())["config_hash"]
    monkeypatch.setattr(mirror, "job_command", _fake_driver(30))
    started = mirror.start(job, state_dir=tmp_path / "bg", master="local[2]")
    try:
        assert started.config_hash == foreground
        again = mirror.start(job, state_dir=tmp_path / "bg", master="local[2]")
        assert again.pid == started.pid  # the same config already running is kept
        other = mirror.start({**job, "spark": {"master": "local[3]"}}, state_dir=tmp_path / "bg", master="local[2]")
        assert other.pid != started.pid and other.config_hash != started.config_hash
    finally:
        mirror.stop(tmp_path / "bg", timeout=10)


def test_figures_per_topic_from_the_writers_results(tmp_path):
    metrics = MirrorMetrics("job", tmp_path / "status.json")
    now = 1_000_000.0
    orders, invoices = TopicBatch(), TopicBatch()
    orders.add(10, 1000, int(now * 1000) - 500, 10 * (int(now * 1000) - 200))
    invoices.add(4, 40, int(now * 1000) - 50, 4 * (int(now * 1000) - 50))
    metrics.record_batch(BatchReport("f", 0, {"orders": orders, "invoices-1": invoices, "idle": TopicBatch()},
                                     offset_syncs=3, producer={"records-per-request-avg": 7.5}), now=now)
    figures = metrics.flow("f")
    assert set(figures.topics) == {"orders", "invoices-1"}  # the idle topic absent
    assert figures.records == 14 and figures.bytes == 1040 and figures.offset_syncs_written == 3
    assert figures.topics["orders"].replication_latency_ms_max == 500
    assert figures.topics["orders"].replication_latency_ms_avg == 200
    metrics.write_status()
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["flows"]["f"]["topics"]["orders"]["replicationLatencyMsAvg"] == 200
    assert status["flows"]["f"]["offsetSyncsWritten"] == 3
    assert status["flows"]["f"]["producerMetrics"] == {"records-per-request-avg": 7.5}
    assert "flow=f batch=0 records=14" in progress_line("f", figures, 0, 14)


def test_a_batch_line_names_only_the_busiest_topics(tmp_path):
    """At width (10,000 topics) a line naming every topic would be megabytes a minute of log."""
    from mm2spark.metrics import PROGRESS_TOPICS

    metrics = MirrorMetrics("job", tmp_path / "status.json")
    now = 1_000_000.0
    batches = {}
    for i in range(PROGRESS_TOPICS + 5):
        batch = TopicBatch()
        batch.add(i + 1, 10, None, 0)
        batches[f"t{i:02d}"] = batch
    metrics.record_batch(BatchReport("f", 0, batches), now=now)
    line = progress_line("f", metrics.flow("f"), 0, 1)
    named = [name for name in batches if f"{name} " in line]
    busiest = sorted(batches, key=lambda n: -batches[n].records)[:PROGRESS_TOPICS]
    assert sorted(named) == sorted(busiest)
    assert "and 5 more" in line


# --------------------------------------------------------------- the job's entry point: user errors

@pytest.fixture
def mirror_job(monkeypatch):
    """spark/mirror_job.py, its logging set-up kept off the test session's root logger."""
    import logging

    import mirror_job

    monkeypatch.setattr(logging, "basicConfig", lambda **_: None)
    return mirror_job


def _job_file(tmp_path) -> Path:
    flow = {"name": "f", "source.cluster.alias": "primary", "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": "127.0.0.1:1", "target.cluster.bootstrap.servers": "127.0.0.1:2",
            "topics": "orders"}
    path = tmp_path / "spark-mirror.json"
    path.write_text(json.dumps({"apiVersion": "mm2spec/v1", "name": "job", "flows": [flow],
                                "spark": {"checkpoint.location": str(tmp_path / "checkpoints")}}))
    return path


def test_job_reports_an_unreadable_config_as_an_error_line(tmp_path, capsys, mirror_job):
    assert mirror_job.main(["--config", str(tmp_path / "missing.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing.json" in err and "Traceback" not in err


def test_job_reports_missing_jars_as_an_error_line(tmp_path, capsys, monkeypatch, mirror_job):
    from mm2spec.errors import ComponentMissing

    def no_jars():
        raise ComponentMissing("the Spark Kafka connector jars are not installed: run scripts/setup")

    monkeypatch.setattr(mirror_job, "default_jars", no_jars)
    assert mirror_job.main(["--config", str(_job_file(tmp_path))]) == 1
    assert capsys.readouterr().err == "error: the Spark Kafka connector jars are not installed: run scripts/setup\n"
    assert mirror_job.main(["--config", str(_job_file(tmp_path)), "--jars", "/x/spark-sql-kafka.jar"]) == 1
    err = capsys.readouterr().err
    assert "mm2spec-spark-writer.jar" in err and "scripts/install-spark.sh" in err


def test_job_reports_a_user_error_at_start_as_an_error_line_and_lets_bugs_through(tmp_path, capsys, monkeypatch,
                                                                                 mirror_job):
    import mm2spark.pipeline
    from mm2spec.errors import ClusterUnreachable

    def unreachable(*_, **__):
        raise ClusterUnreachable("cluster dr (127.0.0.1:2) did not answer within 30s")

    jars = ["--jars", "/x/mm2spec-spark-writer.jar"]
    monkeypatch.setattr(mm2spark.pipeline, "run", unreachable)
    assert mirror_job.main(["--config", str(_job_file(tmp_path)), *jars]) == 1
    assert capsys.readouterr().err == "error: cluster dr (127.0.0.1:2) did not answer within 30s\n"

    def bug(*_, **__):
        raise KeyError("flows")

    monkeypatch.setattr(mm2spark.pipeline, "run", bug)
    with pytest.raises(KeyError):
        mirror_job.main(["--config", str(_job_file(tmp_path)), *jars])


def test_job_refuses_an_abbreviated_flag(tmp_path, capsys, mirror_job):
    # "--max" is a prefix of --max-restarts alone: a mistyped deployment fails, it does not run
    # with the flag it happens to begin.
    with pytest.raises(SystemExit) as refused:
        mirror_job.main(["--config", str(_job_file(tmp_path)), "--jars", "/x/spark-sql-kafka.jar", "--max", "1"])
    assert refused.value.code == 2
    assert "unrecognized arguments: --max" in capsys.readouterr().err
