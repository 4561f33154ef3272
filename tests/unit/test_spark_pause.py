"""Pausing some of the Spark job's flows (issue 27): the control file ``paused-flows.json`` that
``runtime.deployment`` writes and the job's control loop reads, the loop's pause and resume, and the
Spark engine's stop / running / start_from over a fake job (a thread that does what the job's
control loop does to the status file). No Spark, no network."""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spec.engines import engine_for
from mm2spec.errors import MirrorError
from mm2spec.mm2.spark_checkpoint import start_offsets_file
from mm2spec.runtime import deployment
from mm2spec.spec.load import load_desired_state
from mm2spark.metrics import MirrorMetrics
from mm2spark.pipeline import apply_paused, read_paused

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def test_the_control_file_is_written_whole_and_read_the_same_by_the_job(tmp_path):
    assert deployment.paused_flows(tmp_path) == set() and read_paused(str(tmp_path / deployment.CONTROL_FILE)) == set()
    assert deployment.pause_flows(tmp_path, ["a", "b"]) == {"a", "b"}
    assert deployment.pause_flows(tmp_path, ["b"]) == {"a", "b"}
    assert deployment.resume_flows(tmp_path, ["a", "c"]) == {"b"}
    path = tmp_path / deployment.CONTROL_FILE
    assert json.loads(path.read_text()) == {"paused": ["b"]} and read_paused(str(path)) == {"b"}
    assert [p.name for p in tmp_path.iterdir()] == [deployment.CONTROL_FILE], "no temporary file left"
    assert read_paused(None) == set()
    path.write_text("{half")
    assert read_paused(str(path)) is None, "the job keeps what it decided last turn"
    with pytest.raises(MirrorError, match="delete it to resume every flow"):
        deployment.paused_flows(tmp_path)


class FakePipeline:
    def __init__(self, name: str, fail_resume: int = 0):
        self.flow = type("Flow", (), {"name": name})()
        self.calls: list[str] = []
        self.fail_resume = fail_resume

    def stop(self):
        self.calls.append("stop")

    def resume(self):
        self.calls.append("resume")
        if self.fail_resume:
            self.fail_resume -= 1
            raise RuntimeError("cluster away")


def test_the_control_loop_stops_newly_paused_flows_and_resumes_the_others(tmp_path):
    metrics = MirrorMetrics("j", tmp_path / "status.json")
    east, west = FakePipeline("east"), FakePipeline("west", fail_resume=1)
    for p in (east, west):
        metrics.flow(p.flow.name).state = "running"
    paused = apply_paused([east, west], set(), {"west"}, metrics)
    assert paused == {"west"} and west.calls == ["stop"] and east.calls == []
    status = json.loads((tmp_path / "status.json").read_text())["flows"]
    assert (status["west"]["state"], status["east"]["state"]) == ("paused", "running")
    assert apply_paused([east, west], paused, {"west"}, metrics) == {"west"} and west.calls == ["stop"]
    assert apply_paused([east, west], paused, None, metrics) == {"west"}, "an unreadable file changes nothing"
    # A resume that fails stays paused and is tried again next turn.
    assert apply_paused([east, west], paused, set(), metrics) == {"west"}
    assert metrics.flow("west").state == "paused" and "resume: cluster away" in metrics.flow("west").last_error
    assert apply_paused([east, west], paused, set(), metrics) == set() and west.calls == ["stop", "resume", "resume"]
    assert metrics.flow("west").state == "starting"
    metrics.flow("west").mark_running()
    assert metrics.flow("west").state == "running"


def test_a_late_query_event_leaves_a_paused_flow_paused(tmp_path):
    figures = MirrorMetrics("j", None).flow("west")
    figures.state = "paused"
    figures.mark_running()
    assert figures.state == "paused"


class FakeJob:
    """The job's side: this process's pid as the driver's; a thread that pauses and resumes the flows
    the control file names in the status file, as the control loop does."""

    def __init__(self, folder: Path, flows: list[str]):
        self.folder, self.flows = folder, flows
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "driver.pid").write_text(json.dumps({"pid": os.getpid()}))
        self.done = threading.Event()
        self.turns = 0
        self.write()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def write(self):
        paused = read_paused(str(self.folder / deployment.CONTROL_FILE)) or set()
        flows = {n: {"state": "paused" if n in paused else "running"} for n in self.flows}
        (self.folder / "status.json").write_text(json.dumps({"state": "running", "flows": flows}))

    def run(self):
        while not self.done.wait(0.05):
            self.write()
            self.turns += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


@pytest.fixture
def two_flows(tmp_path, monkeypatch):
    """A local-driver spec with two flows; stopping or starting the whole job fails the test."""
    spec = load_desired_state(EXAMPLE, "prod")
    flow = replace(spec.mirrors[0], exactly_once=False)
    spec = replace(spec, mirrors=(flow, replace(flow, name="other-flow")),
                   spark=replace(spec.spark, master="local[2]", kubernetes=None,
                                 checkpoint_location=str(tmp_path / "checkpoints")))
    whole: list[str] = []
    monkeypatch.setattr(deployment, "stop", lambda *a, **k: whole.append("stop") or True)
    monkeypatch.setattr(deployment, "start", lambda *a, **k: whole.append("start") or type("S", (), {"pid": 77})())
    monkeypatch.setattr(deployment, "POLL_SECONDS", 0.02)
    engine = engine_for(spec, state_dir=str(tmp_path / "state"), clock=lambda: 1700.0)
    return spec, engine, whole


def test_stopping_one_flow_pauses_it_while_the_other_mirrors_on(two_flows, tmp_path):
    spec, engine, whole = two_flows
    flow, other = spec.mirrors
    with FakeJob(tmp_path / "state", [flow.name, other.name]):
        [would] = engine.stop([flow], check=True, timeout=5)
        assert would.summary.startswith(f"would pause {flow.name}") and not deployment.paused_flows(tmp_path / "state")
        [paused] = engine.stop([flow], check=False, timeout=5)
        assert paused.changed and not paused.stops_every_flow and "other flows mirror on" in paused.summary
        assert paused.diff == ((f"{flow.name} query", "running", "paused"),)
        assert not engine.running(flow).up and f"{flow.name} paused" in engine.running(flow).seen
        assert engine.running(other).up
        [again] = engine.stop([flow], check=False, timeout=5)
        assert not again.changed and "already paused" in again.summary
        # The other flow too: nothing would run, so the job stops whole.
        [stopped] = engine.stop([other], check=False, timeout=5)
        assert stopped.stops_every_flow and "stopped the Spark job" in stopped.summary
    assert whole == ["stop"]


def test_a_pause_the_job_does_not_show_in_time_is_an_error(two_flows, tmp_path):
    spec, engine, _whole = two_flows
    FakeJob(tmp_path / "state", [f.name for f in spec.mirrors])  # written once, never turns
    with pytest.raises(MirrorError, match=f"did not show {spec.mirrors[0].name} paused within 0s"):
        engine.stop([spec.mirrors[0]], check=False, timeout=0.2)


def test_failback_resets_a_paused_flow_and_resumes_it_in_the_running_job(two_flows, tmp_path):
    spec, engine, whole = two_flows
    flow, other = spec.mirrors
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / flow.name / "offsets").mkdir(parents=True)
    deployment.pause_flows(tmp_path / "state", [flow.name])
    with FakeJob(tmp_path / "state", [flow.name, other.name]) as job:
        [action] = engine.start_from([flow], {flow.name: {("orders", 0): 10}}, others_failed_over=[])
        assert job.turns > 0
    assert (checkpoints / f"{flow.name}.before-failback-1700" / "offsets").is_dir()
    assert json.loads(start_offsets_file(checkpoints / flow.name).read_text()) == {"orders": {"0": 10}}
    assert deployment.paused_flows(tmp_path / "state") == set() and whole == [], "no job restart"
    assert action.summary == f"resumed {flow.name} in the running Spark job from the source's end"


def test_failback_with_the_job_down_starts_it_with_the_flows_still_failed_over_paused(two_flows, tmp_path):
    spec, engine, whole = two_flows
    flow, other = spec.mirrors
    deployment.pause_flows(tmp_path / "state", [flow.name])
    [action] = engine.start_from([flow], {flow.name: {("orders", 0): 10}}, others_failed_over=[other.name])
    assert whole == ["start"] and deployment.paused_flows(tmp_path / "state") == {other.name}
    assert action.summary == f"started the Spark job from the source's end (pid 77); {other.name} stay paused " \
                             "(still failed over)"


def test_a_start_waits_for_running_flows_and_counts_paused_ones(tmp_path):
    FakeJob(tmp_path, ["a", "b"])
    deployment.pause_flows(tmp_path, ["b"])
    FakeJob(tmp_path, ["a", "b"])  # the status as the job writes it with b paused
    started = deployment.MirrorDeployment("j", str(tmp_path), os.getpid(), "local[2]", "h")
    assert deployment.wait_until_running(started, 1).flows["b"] == {"state": "paused"}


class FakeRealTime:
    """The JVM's mm2spec.spark.source.RealTime as the driver sees it: the source plans the next
    batch ``plans_after`` polls after the batches were told to end."""

    def __init__(self, plans_after: int | None):
        self.plans_after = plans_after
        self.calls: list[tuple] = []
        self.polls = 0

    def endBatches(self, key, ending):  # the JVM method's name
        self.calls.append(("endBatches", key, ending))

    def drained(self, key):
        self.polls += 1
        return self.plans_after is not None and self.polls > self.plans_after


def realtime_pipeline(realtime: FakeRealTime):
    from types import SimpleNamespace

    from mm2spark.pipeline import FlowPipeline

    pipeline = object.__new__(FlowPipeline)
    jvm = SimpleNamespace(mm2spec=SimpleNamespace(spark=SimpleNamespace(source=SimpleNamespace(RealTime=realtime))))
    pipeline.spark = SimpleNamespace(sparkContext=SimpleNamespace(_jvm=jvm))
    pipeline.query_name = "mm2spark.job.east-to-west"
    # The query's progress says a new batch at once (it lags the source): the old wait returned on it
    # and the stop killed the batch that had just written records.
    pipeline.query = SimpleNamespace(isActive=True, lastProgress={"batchId": 99})
    pipeline.flow = SimpleNamespace(name="east-to-west")
    return pipeline


def test_a_realtime_stop_waits_until_the_next_batch_is_planned_not_for_the_progress(caplog):
    realtime = FakeRealTime(plans_after=3)
    realtime_pipeline(realtime).end_realtime_batch()
    assert realtime.calls == [("endBatches", "mm2spark.job.east-to-west", True)]
    assert realtime.polls == 4, "returned before the source planned a batch that reads nothing"
    assert "did not end" not in caplog.text


def test_a_realtime_batch_that_does_not_end_is_reported_and_the_stop_goes_on(monkeypatch, caplog):
    import mm2spark.pipeline as pipeline_module

    monkeypatch.setattr(pipeline_module, "REALTIME_END_TIMEOUT_S", 0.2)
    realtime = FakeRealTime(plans_after=None)
    realtime_pipeline(realtime).end_realtime_batch()
    assert realtime.polls >= 2
    assert "east-to-west: the Real-time batch did not end within" in caplog.text
