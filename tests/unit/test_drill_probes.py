"""The drill without clusters: naming and refusing probe topics and groups, the CLI's refusals
(exit 1, no traceback, nothing written), the group filters handed to the playbooks, and the probe
that judges where a group resumes (on in-memory partitions)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mm2spec.cli import main
from mm2spec.errors import OperationRefused
from mm2spec.live.types import Record
from mm2spec.live.traffic import DRILL_HEADER, SEQ_HEADER
from mm2spec.ops.playbooks.context import Options
from mm2spec.ops.drill.drill import Drill, DrillSettings, plan_drill
from mm2spec.ops.drill.checks import Move, probe
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def _example():
    return load_desired_state(EXAMPLE, "dev")


def test_probe_names_follow_the_flows_patterns():
    plan = plan_drill(_example(), Options(), DrillSettings())
    assert (plan.source, plan.target) == ("primary", "dr")
    assert plan.topics == {"primary-to-dr": ("mm2spec-probe-primary-to-dr",)}
    assert plan.groups == {"mm2spec-probe-primary-to-dr": ("mm2spec-probe-primary-to-dr",)}
    assert plan.names_on("dr") == {"mm2spec-probe-primary-to-dr": "mm2spec-probe-primary-to-dr"}
    given = plan_drill(_example(), Options(), DrillSettings(probe_topics=("invoices-drill",)))
    assert given.topics == {"primary-to-dr": ("invoices-drill",)}, "--probe-topic still overrides"


@pytest.mark.parametrize("settings, says", [
    (DrillSettings(probe_topics=("orders-drill",)), "does not mirror the probe topic orders-drill (its topics: orders, "
                                                    "payments, invoices-.*, minus its excludes): pick one it mirrors "
                                                    "with --probe-topic NAME"),
    (DrillSettings(probe_groups=("drill-readers",)), "does not checkpoint the probe group drill-readers (its groups: "
                                                     "orders-service, billing-.*, minus its excludes): pick one it checkpoints "
                                                     "with --probe-group NAME"),
])
def test_probe_names_the_flow_cannot_mirror_are_refused(settings, says):
    with pytest.raises(OperationRefused) as refused:
        plan_drill(_example(), Options(), settings)
    assert says in str(refused.value)


@pytest.mark.parametrize("policy, on_dr", [("identity", "mm2spec-probe-primary-to-dr"),
                                            ("default", "primary.mm2spec-probe-primary-to-dr")])
def test_a_flow_of_literal_topics_drills_on_its_own_probe_topic(tmp_path, policy, on_dr):
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["mirrors"][0].update(topics=["ledger-entries"], replicationPolicy=policy)
    path = tmp_path / "literal.dr.yaml"
    path.write_text(yaml.safe_dump(spec))
    plan = plan_drill(load_desired_state(path, "dev"), Options(), DrillSettings())
    assert plan.topics == {"primary-to-dr": ("mm2spec-probe-primary-to-dr",)}, "never the application's topic"
    assert plan.names_on("dr") == {"mm2spec-probe-primary-to-dr": on_dr}


def test_flows_between_different_clusters_are_refused(tmp_path):
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["clusters"]["edge"] = spec["clusters"]["primary"]
    spec["mirrors"].append({**spec["mirrors"][0], "name": "edge-to-dr", "source": "edge"})
    spec["environments"] = {}
    path = tmp_path / "two.dr.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(OperationRefused, match=r"edge -> dr, primary -> dr \(fan-in: .*one of --limit flow=primary-to-dr "
                                               r"\(primary -> dr\), --limit flow=edge-to-dr \(edge -> dr\)"):
        plan_drill(load_desired_state(path, None), Options(), DrillSettings())


@pytest.mark.parametrize("argv, says", [
    (["--rate", "0"], "error: --rate 0: must be at least 0.1"),
    (["--probe-topic", "nope"], "error: flow primary-to-dr does not mirror the probe topic nope"),
    (["--limit", "flow=elsewhere"], "error: --limit flow=elsewhere: no such flow"),
])
def test_the_cli_refuses_bad_input_before_writing_anything(argv, says, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["drill", str(EXAMPLE), "--env", "dev", *argv])
    err = capsys.readouterr().err
    assert code == 1 and says in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert list(tmp_path.iterdir()) == [], "no report folder for a drill that never ran"


def test_an_unwritable_report_folder_is_refused_before_the_drill(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["drill", str(EXAMPLE), "--env", "dev", "--out", str(blocker / "report")])
    err = capsys.readouterr().err
    assert code == 1 and f"error: --out {blocker / 'report'}: cannot create the report folder" in err, err


def test_verify_leaves_the_probe_groups_out_and_the_switches_take_them_in():
    state = _example()
    plan = plan_drill(state, Options(limit_groups="billing-.*"), DrillSettings())
    drill = Drill(state, Options(limit_groups="billing-.*"), DrillSettings(), plan)
    verify, switch = drill._options(exclude_probe_groups=True).limit_groups, drill._options().limit_groups
    assert re.fullmatch(verify, "billing-eu") and not re.fullmatch(verify, "mm2spec-probe-primary-to-dr")
    assert not re.fullmatch(verify, "orders-service"), "the user's --limit still applies"
    assert re.fullmatch(switch, "mm2spec-probe-primary-to-dr") and re.fullmatch(switch, "billing-eu")


class Partition:
    """One partition in memory, read as RecordReader reads (watermarks, read ranges)."""

    def __init__(self, topic: str, records: list[tuple[int, bytes]]):
        self.topic = topic
        self.records = [Record(topic, 0, offset, b"k", value, 1000, ()) for offset, value in records]

    def watermarks(self, _topic, _partition):
        return (self.records[0].offset if self.records else 0, self.records[-1].offset + 1 if self.records else 0)

    def read(self, _topic, _partition, start, end):
        return [r for r in self.records if start <= r.offset < end]


def _probe(old_values: list[bytes], new_values: list[bytes], committed: int, resume: int) -> dict:
    old = Partition("t", list(enumerate(old_values)))
    new = Partition("t", list(enumerate(new_values)))
    return probe(old, new, Move("g", "t", "t", 0), committed, resume, "drill")


VALUES = [f"v{i}".encode() for i in range(10)]


@pytest.mark.parametrize("new, resume, result, skipped, reread", [
    (VALUES, 4, "exact", 0, 0),
    (VALUES, 6, "skipped", 2, 0),
    (VALUES, 1, "re-read", 0, 3),
    ([b"x"] * 3 + VALUES, 7, "exact", 0, 0),  # DR's offsets differ; the content decides
    (VALUES[:4], 4, "unknown", None, None),  # the next record never reached the new cluster
])
def test_the_probe_counts_skipped_and_reread_records_by_content(new, resume, result, skipped, reread):
    row = _probe(VALUES, new, committed=4, resume=resume)
    assert (row["result"], row["skipped"], row["reread"]) == (result, skipped, reread), row


def test_a_group_that_consumed_everything_must_sit_right_after_its_last_record():
    written_after_switch = VALUES[:6] + [b"new-on-dr"]
    assert _probe(VALUES[:6], written_after_switch, committed=6, resume=6)["result"] == "exact"
    assert _probe(VALUES[:6], written_after_switch, committed=6, resume=5)["result"] == "unknown"


def test_drill_records_are_labelled_with_their_sequence():
    record = Record("t", 0, 5, b"k", b"v", 1, ((DRILL_HEADER, b"abc"), (SEQ_HEADER, b"42")))
    old, new = Partition("t", []), Partition("t", [])
    old.records, new.records = [record], []
    row = probe(old, new, Move("g", "t", "t", 0), 5, 0, "abc")
    assert row["expected"] == "t-0@5 (drill record #42)"


def test_a_failure_between_the_switches_says_the_flows_stay_failed_over():
    from mm2spec.ops.drill.drill import Phase

    state = _example()
    drill = Drill(state, Options(), DrillSettings(), plan_drill(state, Options(), DrillSettings()))
    assert drill._where_left() == ""
    drill.phases = [Phase("failover", "", 0.0, status="passed"), Phase("probe-dr", "", 1.0, status="failed")]
    assert "stay failed over to dr" in drill._where_left() and "mm2spec failback SPEC --env ENV" in drill._where_left()
    drill.phases.append(Phase("failback", "", 2.0, status="passed"))
    assert drill._where_left() == ""
