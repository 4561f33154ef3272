"""The engine seam without clusters: each engine's facts, Connect over a fake REST client, the
Spark job's checkpoint surgery in a temporary folder over a fake driver, and no engine branch
left outside ``mm2spec/engines``."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from mm2spec.engines import MetricsSource, engine_for
from mm2spec.engines import spark as spark_engine
from mm2spec.engines.connect import ConnectEngine, connector_names
from mm2spec.engines.spark import SparkEngine
from mm2spec.errors import Mm2specError, OperationRefused
from mm2spec.live.records import GroupOffsets
from mm2spec.mm2.engine_facts import ENGINE_FACTS
from mm2spec.mm2.spark_checkpoint import START_OFFSETS_SUFFIX, start_offsets_file
from mm2spec.render import render_files
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


@pytest.fixture(scope="module")
def spark_spec():
    return load_desired_state(EXAMPLE, "prod")  # one exactly-once flow, engine spark


@pytest.fixture(scope="module")
def connect_spec(spark_spec):
    flow = replace(spark_spec.mirrors[0], heartbeats=True)
    return replace(spark_spec, engine="connect", mirrors=(flow,))


class FakeConnect:
    """Answers like ConnectClient from in-memory connector states; a stop or resume takes effect at once."""

    def __init__(self, states: dict[str, str], tasks: dict[str, list[str]] | None = None):
        self.states, self.tasks, self.calls = dict(states), dict(tasks or {}), []

    def connector_status(self, name):
        if name not in self.states:
            return None
        return {"connector": {"state": self.states[name]},
                "tasks": [{"id": i, "state": s} for i, s in enumerate(self.tasks.get(name, ["RUNNING"]))]}

    def stop_connector(self, name):
        self.calls.append(("stop", name))
        self.states[name] = "STOPPED"

    def resume_connector(self, name):
        self.calls.append(("resume", name))
        self.states[name] = "RUNNING"

    def alter_offsets(self, name, offsets):
        self.calls.append(("alter", name, offsets))


def test_each_engine_states_its_facts(spark_spec, connect_spec):
    spark, connect = engine_for(spark_spec), engine_for(connect_spec)
    flow = spark_spec.mirrors[0]
    assert isinstance(spark, SparkEngine) and isinstance(connect, ConnectEngine)
    assert {spark.name, connect.name} == set(ENGINE_FACTS), "one engine per name the spec compiler knows"
    assert (spark.location(flow), spark.emits_heartbeats, spark.shared_by_flows) == ("local", False, True)
    assert (connect.location(flow), connect.emits_heartbeats, connect.shared_by_flows) == (flow.target, True, False)
    assert "mm2spec mirror" in spark.start_hint and "Connect" in connect.start_hint
    assert spark.metrics_source().location.endswith("status.json")
    assert connect.metrics_source() == MetricsSource("connect-rest", "http://connect.dr.internal:8083")
    assert engine_for(connect_spec, connect_url="http://other:8083").url == "http://other:8083"


def test_each_engine_deploys_its_own_rendered_files(spark_spec, connect_spec):
    rendered = render_files(connect_spec)
    spark_files, connect_files = engine_for(spark_spec).deployment_files(), engine_for(connect_spec).deployment_files()
    assert "spark-mirror.json" in spark_files and not any(name.endswith(".properties") for name in spark_files)
    assert {"connect-distributed.properties", "primary-to-dr-MirrorSourceConnector.json"} <= set(connect_files)
    assert "spark-mirror.json" not in connect_files
    assert all(rendered[name] == content for name, content in connect_files.items())


def test_provisioning_needs_are_data(spark_spec, connect_spec):
    spark = engine_for(spark_spec).deployment_resources()
    assert [(r.kind, r.name, r.after) for r in spark.resources] == [("SparkDeployment", "spark-mirror", ())]
    needs = engine_for(connect_spec).deployment_resources()
    names = [f"primary-to-dr-Mirror{k}Connector" for k in ("Source", "Checkpoint", "Heartbeat")]
    assert needs.names("WorkerConfig") == ["connect-worker"] and needs.names("Connector") == names
    assert not needs.names("SparkDeployment")
    worker, *connectors = needs.resources
    assert not worker.after_cluster_resources
    assert all(c.after == ("connect-worker",) and c.item["connectUrl"] == "http://connect.dr.internal:8083"
               for c in connectors)
    assert [c.item["connector"]["name"] for c in connectors] == names
    no_url = replace(connect_spec, connect=replace(connect_spec.connect, rest_url=None))
    with pytest.raises(Mm2specError, match="set connect.restUrl"):
        engine_for(no_url).deployment_resources()


def engine_enums(schema):
    """Every ``enum`` of a property called ``engine`` anywhere in a JSON Schema."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "engine" and isinstance(value, dict) and "enum" in value:
                yield value["enum"]
            yield from engine_enums(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from engine_enums(value)


def test_one_descriptor_per_engine_ties_every_copy_of_the_engine_names(spark_spec, connect_spec):
    """The engine registry (``mm2.engine_facts``) is the one list: each name has a descriptor in the
    module its facts name, a renderer in ``mm2spec.render``, resource kinds provisioning registers,
    and the JSON Schemas' enums list exactly these names."""
    from mm2spec.engines import descriptor, descriptors
    from mm2spec.mm2.engine_facts import DEFAULT_ENGINE
    from mm2spec.provision.kinds import KINDS
    from mm2spec.render import engine_files

    assert [d.name for d in descriptors()] == list(ENGINE_FACTS)
    for found in descriptors():
        assert found.facts.module.startswith("mm2spec.engines.") and found.engine.facts is found.facts
        assert found.facts.renderer.startswith("mm2spec.render.")
        assert set(found.resource_kinds) <= set(KINDS), "every kind an engine registers is a registered kind"
        assert all(KINDS[k].deployment_inputs is not None for k in found.resource_kinds)
    for spec in (spark_spec, connect_spec):
        found = descriptor(spec.engine)
        assert {r.kind for r in engine_for(spec).deployment_resources().resources} == set(found.resource_kinds)
        assert engine_files(spec, spec.engine) == engine_for(spec).deployment_files()
    spec_schema = json.loads((ROOT / "schemas" / "dr-spec.schema.json").read_text())
    assert spec_schema["properties"]["engine"]["default"] == DEFAULT_ENGINE
    enums = {path.name: list(engine_enums(json.loads(path.read_text())))
             for path in sorted((ROOT / "schemas").glob("*.json"))}
    assert {name for name, found in enums.items() if found} == {
        "dr-spec.schema.json", "plan.schema.json", "drill-report.schema.json"}
    assert all(found == list(ENGINE_FACTS) for listed in enums.values() for found in listed), enums
    with pytest.raises(Mm2specError, match="use spark or connect"):
        descriptor("flink")


def test_connect_without_a_url_is_refused_and_not_planned(connect_spec):
    engine = engine_for(replace(connect_spec, connect=replace(connect_spec.connect, rest_url=None)))
    with pytest.raises(OperationRefused, match="--connect-url"):
        engine.running(connect_spec.mirrors[0])
    assert engine.plan_changes(False) == ([], ["connect.restUrl is not set: connectors are not compared"])


def test_connect_running_reads_every_connector_and_task(connect_spec):
    flow = connect_spec.mirrors[0]
    names = connector_names(flow)
    assert len(names) == 3
    fake = FakeConnect({n: "RUNNING" for n in names})
    engine = ConnectEngine(connect_spec, client=fake)
    assert engine.running(flow).up
    fake.tasks[names[0]] = ["RUNNING", "FAILED"]
    found = engine.running(flow)
    assert not found.up and f"{names[0]} RUNNING (task 1 FAILED)" in found.seen
    del fake.states[names[2]]
    assert f"{names[2]} ABSENT" in engine.running(flow).seen


def test_connect_stop_says_what_it_would_stop_and_then_stops(connect_spec):
    flow = connect_spec.mirrors[0]
    names = connector_names(flow)
    fake = FakeConnect({names[0]: "RUNNING", names[1]: "STOPPED", names[2]: "PAUSED"})
    engine = ConnectEngine(connect_spec, client=fake)
    [would] = engine.stop([flow], check=True, timeout=5)
    assert would.changed and would.summary.startswith(f"{flow.name}: would stop") and fake.calls == []
    assert would.diff == ((names[0], "RUNNING", "STOPPED"), (names[2], "PAUSED", "STOPPED"))
    [done] = engine.stop([flow], check=False, timeout=5)
    assert done.where == flow.target and fake.calls == [("stop", names[0]), ("stop", names[2])]
    [again] = engine.stop([flow], check=False, timeout=5)
    assert not again.changed and "already stopped" in again.summary


def test_connect_starts_from_offsets_through_the_source_connectors_offsets(connect_spec):
    flow = connect_spec.mirrors[0]
    names = connector_names(flow)
    fake = FakeConnect({n: "STOPPED" for n in names})
    [started] = ConnectEngine(connect_spec, client=fake).start_from([flow], {flow.name: {("orders", 1): 7, ("orders", 0): 0}})
    alter = fake.calls[0]
    assert alter[:2] == ("alter", names[0])
    assert alter[2] == [{"partition": {"cluster": flow.source, "topic": "orders", "partition": 0}, "offset": None},
                        {"partition": {"cluster": flow.source, "topic": "orders", "partition": 1}, "offset": {"offset": 6}}]
    assert fake.calls[1:] == [("resume", n) for n in names]
    assert started.diff == (("orders-0", "stopped", "from 0"), ("orders-1", "stopped", "from 7"))


class FakeDriver:
    """Stands in for ``runtime.deployment``: records stops and starts."""

    def __init__(self):
        self.calls = []

    def stop(self, state_dir):
        self.calls.append(("stop", Path(state_dir)))
        return True

    def start(self, job, *, state_dir, wait_running):
        self.calls.append(("start", Path(state_dir), job["name"]))
        return type("Started", (), {"pid": 4242})()


class FakeGroupOffsets:
    def __init__(self):
        self.deleted = []

    def delete_offsets(self, group, partitions):
        self.deleted.append((group, sorted(partitions)))


def test_spark_start_from_sets_the_checkpoint_aside_and_leaves_the_start_offsets(spark_spec, tmp_path, monkeypatch):
    # A k8s:// master: the job stops and starts whole (tests/unit/test_spark_pause.py: a local driver
    # pauses and resumes flows in the running job).
    checkpoints = tmp_path / "checkpoints"
    spec = replace(spark_spec, spark=replace(spark_spec.spark, checkpoint_location=str(checkpoints), kubernetes=None,
                                             master="k8s://https://kube.example:6443"))
    flow = spec.mirrors[0]
    (checkpoints / flow.name / "offsets").mkdir(parents=True)
    driver = FakeDriver()
    monkeypatch.setattr(spark_engine, "deployment", driver)
    groups = FakeGroupOffsets()
    clients = []

    def client_for(kind, alias, **_options):
        clients.append((kind, alias))
        return groups

    engine = engine_for(spec, state_dir=str(tmp_path / "state"), client_for=client_for, clock=lambda: 1700.9)
    offsets = {flow.name: {("orders", 0): 10, ("orders", 1): 0, ("payments", 0): 3}}

    [reset] = engine.start_from([flow], offsets, others_failed_over=["other-flow"])
    aside = checkpoints / f"{flow.name}.before-failback-1700"
    assert (aside / "offsets").is_dir() and not (checkpoints / flow.name).exists()
    start_file = checkpoints / f"{flow.name}{START_OFFSETS_SUFFIX}"
    assert start_file == start_offsets_file(checkpoints / flow.name)
    assert json.loads(start_file.read_text()) == {"orders": {"0": 10, "1": 0}, "payments": {"0": 3}}
    assert driver.calls == [("stop", tmp_path / "state")], "never reset a checkpoint under a running query; not started"
    assert "not started: other-flow still failed over" in reset.summary and reset.where == "local"
    assert clients == [(GroupOffsets, flow.target)]
    assert groups.deleted[-1] == (f"mm2spec-mirror.{spec.name}.{flow.name}",
                                  [("orders", 0), ("orders", 1), ("payments", 0)])

    [started] = engine.start_from([flow], offsets)
    assert driver.calls[-2:] == [("stop", tmp_path / "state"), ("start", tmp_path / "state", spec.name)]
    assert "restarted the Spark job" in started.summary and "pid 4242" in started.summary
    assert started.diff[0] == (f"{flow.name} orders-0", "stopped", "from 10")


def test_spark_refuses_checkpoints_it_cannot_move(spark_spec, monkeypatch):
    spec = replace(spark_spec, spark=replace(spark_spec.spark, checkpoint_location="s3a://bucket/checkpoints",
                                             kubernetes=None, master="local[2]"))
    driver = FakeDriver()
    monkeypatch.setattr(spark_engine, "deployment", driver)
    with pytest.raises(OperationRefused, match="not a local folder"):
        engine_for(spec).start_from(list(spec.mirrors), {spec.mirrors[0].name: {}})
    assert driver.calls == [], "refused before the job is stopped"


ENGINE_BRANCH = re.compile(r"""\bengine\s*(==|!=)|["'](spark|connect)["']\s+if\b""")


def test_no_engine_branch_outside_the_engines():
    package = ROOT / "mm2spec"
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted(package.rglob("*.py")) if "engines" not in path.relative_to(package).parts
             for number, line in enumerate(path.read_text().splitlines(), 1) if ENGINE_BRANCH.search(line)]
    assert found == [], "ask the engine (mm2spec.engines) instead:\n" + "\n".join(found)


def test_the_start_offsets_file_is_named_once():
    """In code (a string ending with the name), only mm2.spark_checkpoint names it: the failback
    that writes it and the Spark job that reads it both ask there."""
    literal = re.compile(r"start-offsets\.json[\"']")
    found = [str(path.relative_to(ROOT)) for folder in ("mm2spec", "spark")
             for path in sorted((ROOT / folder).rglob("*.py")) for line in path.read_text().splitlines()
             if literal.search(line)]
    assert found == ["mm2spec/mm2/spark_checkpoint.py"]
