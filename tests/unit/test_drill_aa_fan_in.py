"""The drill on active-active and fan-in specs without clusters: which topologies it refuses and
why (exit 1, nothing written), the one pair it drills with ``--limit flow=``, the other flows it
leaves mirroring, a group's remote topics (the reverse flow's copies) probed at both switches, and
a report that names the flow, its probe topic on each cluster and each group's topics."""

from __future__ import annotations

import html
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from mm2spec.cli import main
from mm2spec.engines import Running
from mm2spec.engines.spark import SparkEngine
from mm2spec.errors import MirrorError, OperationRefused
from mm2spec.live.types import FailoverState, GroupState
from mm2spec.ops.drill import drill as drill_module
from mm2spec.ops.drill.checks import Move
from mm2spec.ops.drill.drill import Drill, DrillSettings, plan_drill, relation
from mm2spec.ops.drill.report import format_html, format_markdown, topic_moves
from mm2spec.ops.modules.topology import reverse_flows
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.resources import schema_path

from test_topologies import ACTIVE_ACTIVE, FAN_IN, _spec

RECORDED = Path(__file__).parent / "data" / "drill" / "drill.json"


def _chain(tmp_path: Path):
    spec = yaml.safe_load(ACTIVE_ACTIVE)
    spec["clusters"]["edge"] = {"bootstrapServers": ["127.0.0.1:3"]}
    spec["mirrors"][1].update(name="dr-to-edge", target="edge")
    return _spec(tmp_path, yaml.safe_dump(spec))


@pytest.mark.parametrize("pair, kind", [
    (("dr", "primary"), "active-active"), (("east", "dr"), "fan-in"), (("primary", "edge"), "fan-out"),
    (("dr", "edge"), "chain"), (("edge", "primary"), "chain"), (("primary", "dr"), None), (("x", "y"), None),
])
def test_each_flow_s_relation_to_the_drilled_pair(pair, kind):
    assert relation(pair, "primary", "dr") == kind


@pytest.mark.parametrize("build, says", [
    (lambda tmp: _spec(tmp, ACTIVE_ACTIVE), ["flows go dr -> primary, primary -> dr (active-active: a switch moves "
                                             "consumers one way", "with one of --limit flow=primary-to-dr (primary -> "
                                             "dr), --limit flow=dr-to-primary (dr -> primary)"]),
    (lambda tmp: _spec(tmp, FAN_IN), ["flows go east -> dr, west -> dr (fan-in: each source fails over and back on "
                                      "its own while the others keep mirroring", "one of --limit flow=east-to-dr (east -> dr)"]),
    (_chain, ["(chain: one cluster would be both the one failed over and the one failed over to)"]),
])
def test_flows_over_several_pairs_are_refused_naming_the_topology_and_why(tmp_path, build, says):
    with pytest.raises(OperationRefused) as refused:
        plan_drill(build(tmp_path), Options(), DrillSettings())
    for text in says + ["nothing was changed"]:
        assert text in str(refused.value)


def test_the_cli_refuses_an_active_active_spec_without_a_limit_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "aa.yaml").write_text(ACTIVE_ACTIVE)
    code = main(["drill", "aa.yaml"])
    err = capsys.readouterr().err
    assert code == 1 and "error: a drill fails one source cluster over" in err and "active-active" in err, err
    assert "Traceback" not in err and sorted(p.name for p in tmp_path.iterdir()) == ["aa.yaml"], "no report folder"


def test_a_limit_drills_one_direction_on_its_own_probe_topic_and_leaves_the_other(tmp_path):
    state = _spec(tmp_path, ACTIVE_ACTIVE)
    plan = plan_drill(state, Options(limit_flows=("primary-to-dr",)), DrillSettings())
    assert (plan.source, plan.target, [f.name for f in plan.flows]) == ("primary", "dr", ["primary-to-dr"])
    assert plan.topics == {"primary-to-dr": ("mm2spec-probe-primary-to-dr",)}
    assert plan.names_on("dr") == {"mm2spec-probe-primary-to-dr": "primary.mm2spec-probe-primary-to-dr"}
    assert plan.groups == {"mm2spec-probe-primary-to-dr": ("mm2spec-probe-primary-to-dr",)}
    assert [(f.name, kind) for f, kind in plan.others] == [("dr-to-primary", "active-active")]
    assert [f.name for f in reverse_flows(Context(state, Options()), plan.flows[0])] == ["dr-to-primary"]
    back = plan_drill(state, Options(limit_flows=("dr-to-primary",)), DrillSettings())
    assert (back.source, back.target, back.topics) == ("dr", "primary", {"dr-to-primary": ("mm2spec-probe-dr-to-primary",)})


def test_a_limit_drills_one_source_of_a_fan_in_and_leaves_the_other(tmp_path):
    state = _spec(tmp_path, FAN_IN)
    plan = plan_drill(state, Options(limit_flows=("west-to-dr",)), DrillSettings())
    assert (plan.source, plan.target) == ("west", "dr")
    assert plan.names_on("dr") == {"mm2spec-probe-west-to-dr": "west.mm2spec-probe-west-to-dr"}
    assert [(f.name, kind) for f, kind in plan.others] == [("east-to-dr", "fan-in")]
    assert reverse_flows(Context(state, Options()), plan.flows[0]) == []


class FakeGroups:
    """GroupOffsets on in-memory committed offsets, per cluster."""

    offsets: dict[str, dict[str, dict]] = {}

    def __init__(self, cluster, _secrets=None):
        self.alias = cluster.alias

    def groups(self):
        return sorted(self.offsets.get(self.alias, {}))

    def describe(self, names):
        return {g: GroupState(g, dict(self.offsets[self.alias][g]), ()) for g in names if g in self.offsets[self.alias]}


def _drill(tmp_path, text: str, flow: str) -> Drill:
    state = _spec(tmp_path, text)
    options = Options(limit_flows=(flow,))
    return Drill(state, options, DrillSettings(), plan_drill(state, options, DrillSettings()))


def test_a_group_s_remote_topics_are_probed_at_both_switches(tmp_path, monkeypatch):
    monkeypatch.setattr(drill_module, "GroupOffsets", FakeGroups)
    # app read primary's own orders and dr.orders (dr-to-primary's copy of dr's orders); "other"
    # is no topic either flow mirrors. On dr, native-app reads dr's own orders: not moved by the failover.
    FakeGroups.offsets = {
        "primary": {"app": {("orders", 0): 5, ("dr.orders", 1): 7, ("other", 0): 1}},
        "dr": {"app": {("primary.orders", 0): 6, ("orders", 1): 9}, "native-app": {("orders", 0): 3}},
    }
    drill = _drill(tmp_path, ACTIVE_ACTIVE, "primary-to-dr")
    assert drill._moves("primary", forward=True) == [
        Move("app", "dr.orders", "orders", 1, remote="dr-to-primary"), Move("app", "orders", "primary.orders", 0)]
    drill.probes = [{"switch": "failover", "group": "app"}]
    assert drill._moves("dr", forward=False) == [
        Move("app", "orders", "dr.orders", 1, remote="dr-to-primary"), Move("app", "primary.orders", "orders", 0)]


def test_fan_in_moves_only_the_drilled_source_s_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(drill_module, "GroupOffsets", FakeGroups)
    FakeGroups.offsets = {"west": {"app": {("orders", 0): 4}},
                          "dr": {"app": {("west.orders", 0): 4, ("east.orders", 0): 2}}}
    drill = _drill(tmp_path, FAN_IN, "west-to-dr")
    assert drill._moves("west", forward=True) == [Move("app", "orders", "west.orders", 0)]
    drill.probes = [{"switch": "failover", "group": "app"}]
    assert drill._moves("dr", forward=False) == [Move("app", "west.orders", "orders", 0)], "east's copy stays"


def test_the_other_flows_are_checked_after_a_switch_and_named(tmp_path, monkeypatch):
    monkeypatch.setattr(SparkEngine, "running", lambda self, flow: Running(True, f"Spark job running, {flow.name} runs"))
    drill = _drill(tmp_path, ACTIVE_ACTIVE, "primary-to-dr")
    assert drill._others() == [{"flow": "dr-to-primary", "running": True, "seen": "Spark job running, dr-to-primary runs"}]
    assert drill_module._others_text(drill._others()) == "; kept mirroring: dr-to-primary"
    def unreachable(self, flow):
        raise MirrorError("the Spark job's status cannot be read")
    monkeypatch.setattr(SparkEngine, "running", unreachable)
    assert drill._others() == [{"flow": "dr-to-primary", "running": False,
                                "seen": "not known: the Spark job's status cannot be read"}], "reported, not raised"
    stopped = [{"flow": "dr-to-primary", "running": False, "seen": "Spark job stopped"}]
    assert drill_module._others_text(stopped) == "; not mirroring: dr-to-primary (Spark job stopped)"
    data = drill.to_json()
    assert data["flows"] == [{"flow": "primary-to-dr", "source": "primary", "target": "dr",
                              "probeTopics": ["mm2spec-probe-primary-to-dr"],
                              "targetTopics": ["primary.mm2spec-probe-primary-to-dr"]}]
    assert data["otherFlows"] == [{"flow": "dr-to-primary", "source": "dr", "target": "primary",
                                   "relation": "active-active", "runningBefore": None}]
    jsonschema.validate(data, json.loads(schema_path("drill-report.schema.json").read_text()))


def test_the_report_names_the_flow_its_probe_topic_on_each_cluster_and_each_group_s_topics():
    data = json.loads(RECORDED.read_text())
    data["flows"] = [{"flow": "primary-to-dr", "source": "primary", "target": "dr",
                      "probeTopics": ["mm2spec-probe-primary-to-dr"],
                      "targetTopics": ["primary.mm2spec-probe-primary-to-dr"]}]
    data["otherFlows"] = [{"flow": "dr-to-primary", "source": "dr", "target": "primary", "relation": "active-active",
                           "runningBefore": True}]
    base = data["probes"][0]
    data["probes"] = [{**base, "switch": "failover", "group": "app", "topic": "dr.orders", "targetTopic": "orders",
                       "partition": p, "remote": "dr-to-primary", "result": "exact"} for p in (0, 1)]
    data["probes"].append({**base, "switch": "failover", "group": "app", "topic": "orders",
                           "targetTopic": "primary.orders", "partition": 0, "result": "re-read"})
    for switch in data["switches"]:
        switch["otherFlows"] = [{"flow": "dr-to-primary", "running": True, "seen": "Spark job running"}]
    jsonschema.validate(data, json.loads(schema_path("drill-report.schema.json").read_text()))
    assert topic_moves(data) == [["failover", "app", "dr.orders -> orders (remote, dr-to-primary)", "2", "2"],
                                 ["failover", "app", "orders -> primary.orders", "1", "0"]]
    named = ["primary-to-dr (primary -> dr, probe topics mm2spec-probe-primary-to-dr -> "
             "primary.mm2spec-probe-primary-to-dr)", "left mirroring: dr-to-primary (active-active, dr -> primary)",
             "dr-to-primary mirroring", "dr.orders -> orders (remote, dr-to-primary)"]
    markdown, page = format_markdown(data), format_html(data, {})
    assert [text for text in named if text not in markdown or html.escape(text) not in page] == []
    assert "| failover | app | dr.orders -> orders (remote, dr-to-primary) | 2 | 2 |" in markdown


def test_a_drill_of_one_direction_while_the_other_is_failed_over_is_refused_before_any_write(tmp_path, monkeypatch):
    def recorded(ctx, refresh=False):
        return {f.name: FailoverState(f.name, "failed-over", "planned", f.source, f.target, 1)
                for f in ctx.flows if f.name == "dr-to-primary"}
    monkeypatch.setattr(Context, "failover_states", recorded)
    monkeypatch.setattr(Drill, "_create", lambda *_: pytest.fail("a probe topic was created"))
    with pytest.raises(OperationRefused, match="dr-to-primary is failed-over: a drill starts from a healthy setup"):
        _drill(tmp_path, ACTIVE_ACTIVE, "primary-to-dr")._prepare()
    # Another source of a fan-in failed over does not keep this source's drill from starting.
    monkeypatch.setattr(Context, "failover_states", lambda ctx, refresh=False: {
        f.name: FailoverState(f.name, "failed-over", "planned", f.source, f.target, 1) for f in ctx.flows
        if f.name == "east-to-dr"})
    monkeypatch.setattr(Drill, "_others", lambda self: [])

    def create(self, topic):
        raise OperationRefused(f"would create {topic}")
    monkeypatch.setattr(Drill, "_create", create)
    with pytest.raises(OperationRefused, match="would create mm2spec-probe-west-to-dr"):
        _drill(tmp_path, FAN_IN, "west-to-dr")._prepare()
