"""The playbook engine without clusters: loading and checking playbooks, conditions, the runner's
rules (tags, when, check mode, a failure stops the run), the exact-translation walk, and the
report in its three formats (golden files; regenerate with ``pytest --update-golden``)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mm2spec.cli import main
from mm2spec.errors import PlaybookInvalid
from mm2spec.live.types import Record
from mm2spec.ops.modules.catalogue import CATALOGUE
from mm2spec.ops.playbooks.context import Context, Options, parse_limit
from mm2spec.ops.playbooks.module import Module, report_sections
from mm2spec.ops.playbooks.playbook import Playbook, Task, condition_problem, evaluate, load_playbook, playbook_schema
from mm2spec.ops.playbooks.report import Outcome, RunReport, TaskResult, render
from mm2spec.ops.playbooks.runner import run
from mm2spec.ops.modules.sections import TRANSLATIONS
from mm2spec.ops.modules.translate import Anchor, Translation, align, mm2_translation, nearest_sync
from mm2spec.spec.document import Position
from mm2spec.spec.load import load_desired_state
from tests.kit.leases import MemoryLeaseStore

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "playbook"
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


# ---------------------------------------------------------------------------------- playbooks

@pytest.mark.parametrize("name", ["verify", "failover", "failback"])
def test_bundled_playbooks_load_and_match_the_schema(name):
    playbook = load_playbook(name, CATALOGUE)
    assert playbook.name == name and playbook.tasks
    import yaml

    data = yaml.safe_load(Path(playbook.path).read_text())
    jsonschema.Draft202012Validator(playbook_schema(CATALOGUE)).validate(data)


def test_the_schema_file_is_the_catalogue():
    assert json.loads((ROOT / "schemas/playbook.schema.json").read_text()) == playbook_schema(CATALOGUE), \
        "regenerate schemas/playbook.schema.json from mm2spec.ops.playbooks.playbook.playbook_schema(CATALOGUE)"


def test_every_problem_of_a_playbook_is_reported_with_its_place(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: mine\n"
        "colour: blue\n"
        "tasks:\n"
        "  - name: stop it\n"
        "    mirror.stp: {}\n"
        "  - name: commit first\n"
        "    offsets.commit: {}\n"
        "  - name: wait\n"
        "    mirror.wait_caught_up: {timeout: -3, forever: true}\n"
        "    when: planned and sourc_gone\n"
        "  - name: record\n"
        "    state.record: {}\n"
        "  - name: two\n"
        "    mirror.stop: {}\n"
        "    mirror.status: {}\n"
        "  - name: python\n"
        "    mirror.status: {}\n"
        "    when: __import__('os')\n")
    with pytest.raises(PlaybookInvalid) as caught:
        load_playbook(str(bad), CATALOGUE)
    text = str(caught.value)
    expected = [
        f"{bad}:2:1: /colour: unknown field 'colour'",
        f"{bad}:5:5: /tasks/0/mirror.stp: unknown module 'mirror.stp' (did you mean 'mirror.stop'?)",
        f"{bad}:7:5: /tasks/1/offsets.commit: offsets.commit uses the result of offsets.translate: "
        "put a offsets.translate task before it",
        f"{bad}:9:38: /tasks/2/mirror.wait_caught_up/timeout: mirror.wait_caught_up: "
        "-3 is less than or equal to the minimum of 0",
        "Additional properties are not allowed ('forever' was unexpected) (its arguments: timeout)",
        f"{bad}:10:11: /tasks/2/when: when: unknown variable 'sourc_gone'",
        f"{bad}:12:19: /tasks/3/state.record: state.record: 'phase' is a required property",
        "a task calls exactly one module, this one has 2 modules (mirror.stop, mirror.status)",
        f"{bad}:18:11: /tasks/5/when: when: \"__import__('os')\": only not, and, or, ==, != and names are allowed",
    ]
    for line in expected:
        assert line in text, f"missing: {line}\n---\n{text}"
    # Through the CLI: exit 1, the same lines, and the spec's clusters are never contacted
    # (127.0.0.1:1 would refuse).
    assert main(["playbook", "run", str(bad), str(EXAMPLE), "--env", "dev"]) == 1
    err = capsys.readouterr().err
    assert expected[1] in err and "internal error" not in err


def test_an_unknown_playbook_name_lists_the_bundled_ones(capsys):
    assert main(["playbook", "run", "fallover", str(EXAMPLE), "--env", "dev"]) == 1
    assert "bundled: failback, failover, verify" in capsys.readouterr().err


@pytest.mark.parametrize("text,variables,expected", [
    ("planned and not resuming", {"planned": True, "resuming": False}, True),
    ("planned and not resuming", {"planned": True, "resuming": True}, False),
    ("engine == 'connect' or fence", {"engine": "spark", "fence": False}, False),
    ("engine != 'connect'", {"engine": "spark"}, True),
    ("true", {}, True),
    (None, {}, True),
])
def test_conditions(text, variables, expected):
    assert text is None or condition_problem(text) is None
    assert evaluate(text, variables) is expected


def test_limit_parsing():
    assert parse_limit(["flow=a,group=billing-.*", "group=orders"]) == (("a",), "(?:billing-.*)|(?:orders)")
    from mm2spec.errors import OperationRefused

    for bad in (["flows=a"], ["group=("], ["flow="]):
        with pytest.raises(OperationRefused):
            parse_limit(bad)


# ------------------------------------------------------------------------------------- runner

class OfflineContext(Context):
    """A context that reads no cluster: no flow is failed over; DR leases kept in memory."""

    leases: dict = {}

    def failover_states(self, refresh: bool = False):
        return {}

    def lease_store(self, source: str, target: str) -> MemoryLeaseStore:
        return self.leases.setdefault((source, target), MemoryLeaseStore())


def _context(check: bool = False, **options) -> Context:
    return OfflineContext(load_desired_state(EXAMPLE, "dev"), Options(check=check, **options))


def _task(name: str, fn, tags=(), when=None, ignore_errors=False) -> Task:
    return Task(name, Module(f"test.{name}", name, fn), {}, tuple(tags), when, Position("p.yaml", 1, 1), ignore_errors)


def _writer(log: list):
    def fn(ctx, _args):
        if not ctx.options.check:
            log.append("wrote")
        return [Outcome("changed", "dr", "would write" if ctx.options.check else "wrote")]
    return fn


def test_check_mode_writes_nothing_and_exits_2():
    log: list = []
    playbook = Playbook("t", "", (_task("write", _writer(log)),), "p.yaml")
    report = run(playbook, _context(check=True))
    assert log == [] and report.exit_code() == 2 and report.tasks[0].status == "changed"
    report = run(playbook, _context())
    assert log == ["wrote"] and report.exit_code() == 0


def test_a_failure_stops_the_run_unless_ignored_and_tags_and_when_select():
    log: list = []

    def boom(_ctx, _args):
        from mm2spec.errors import OperationRefused

        raise OperationRefused("group g is active on dr")

    playbook = Playbook("t", "", (
        _task("tagged", _writer(log), tags=["drain"]),
        _task("conditional", _writer(log), when="source_unreachable"),
        _task("check", boom, ignore_errors=True),
        _task("fail", boom),
        _task("after", _writer(log)),
    ), "p.yaml")
    report = run(playbook, _context(), skip_tags=["drain"])
    statuses = [(t.name, t.status) for t in report.tasks]
    assert statuses == [("tagged", "skipped"), ("conditional", "skipped"), ("check", "failed"),
                        ("fail", "failed"), ("after", "not run")]
    assert log == [] and report.exit_code() == 1
    assert "group g is active on dr" in report.tasks[3].outcomes[0].message
    assert report.recap() == {"local": {"ok": 0, "changed": 0, "skipped": 0, "failed": 2}}
    report = run(playbook, _context(), tags=["drain"])
    assert [t.status for t in report.tasks] == ["changed", "skipped", "skipped", "skipped", "skipped"]


def test_an_unknown_flow_in_limit_is_refused():
    from mm2spec.errors import OperationRefused

    with pytest.raises(OperationRefused, match="no such flow in the spec .flows: primary-to-dr"):
        _context(limit_flows=("nope",))


# -------------------------------------------------------------------------------- translation

def _rec(offset: int, seq: int, topic: str = "t") -> Record:
    # Same key/value for many records: only the timestamp (seq) tells them apart, as in real topics.
    return Record(topic, 0, offset, b"k", b"v", 1000 + seq, (("h", b"x"),))


def test_align_resumes_after_the_last_consumed_copy():
    source = [_rec(o, o) for o in range(100, 111)]  # 100..110; the sync says 100 landed at 500
    dr = [_rec(500 + i, 100 + i) for i in range(11)]
    result = align(source[:9], dr, 108, Anchor(100, 500))  # committed 108: 100..107 consumed
    assert result.dr_offset == 508 and result.last_copied == 107
    assert not result.complete, "DR ended inside the replay horizon: a caller reads further"
    assert align(source[:9], dr, 108, Anchor(100, 500), horizon=1).complete


def test_align_follows_an_at_least_once_replay():
    # 100..104 written, then a replay from 102: DR holds 100 101 102 103 104 102 103 104 105
    seqs = [100, 101, 102, 103, 104, 102, 103, 104, 105]
    dr = [_rec(500 + i, s) for i, s in enumerate(seqs)]
    source = [_rec(o, o) for o in range(100, 106)]
    result = align(source[:5], dr, 104, Anchor(100, 500))  # consumed 100..103
    # the last copy of 103 is at 506: resume at 507 (104), never re-reading 102/103
    assert result.dr_offset == 507 and result.last_copied == 103


def test_a_look_alike_past_the_commit_is_not_a_replay():
    # 103 and 106 have the same content; 106 is not followed by a rewrite of 100..103
    source = [_rec(o, o if o != 106 else 103) for o in range(100, 108)]
    dr = [_rec(500 + i, r.timestamp - 1000) for i, r in enumerate(source)]
    assert align(source[:5], dr, 104, Anchor(100, 500)).dr_offset == 504


def test_align_skips_source_gaps_and_reports_foreign_records():
    source = [_rec(100, 1), _rec(103, 2), _rec(104, 3)]  # 101, 102: transaction markers
    dr = [_rec(500, 1), _rec(501, 2), _rec(502, 3)]
    assert align(source, dr, 104, Anchor(100, 500)).dr_offset == 502
    foreign = [_rec(500, 1), Record("t", 0, 501, b"other", b"x", 5, ())]
    result = align(source, foreign, 104, Anchor(100, 500))
    assert result.mismatch == 501 and not result.complete


def test_windows_are_read_once_and_sliced_in_order():
    from mm2spec.ops.modules.translate import PartitionWindow, merged

    assert merged([(50, 60), (0, 10), (12, 20), (100, 110)], gap=5) == [(0, 20), (50, 60), (100, 110)]
    window = PartitionWindow()
    window.add(10, 20, [_rec(o, o) for o in (14, 10, 12)])
    assert window.missing(5, 30) == [(5, 10), (20, 30)]
    assert [r.offset for r in window.between(11, 15)] == [12, 14]


def test_nearest_sync_and_mm2s_rounding():
    syncs = [(0, 0), (10, 12), (21, 30)]
    assert nearest_sync(syncs, 15) == Anchor(10, 12) and nearest_sync(syncs, 21) == Anchor(21, 30)
    assert nearest_sync([(5, 5)], 3) is None
    assert mm2_translation(Anchor(10, 12), 15) == 13  # MM2: one past the sync: re-reads 13..16
    assert mm2_translation(Anchor(10, 12), 10) == 12


# ------------------------------------------------------------------------------------- report

def _report() -> RunReport:
    report = RunReport("failover", "payments-dr", "dev", False, 1_700_000_000.0, 4.25)
    report.tasks = [
        TaskResult("Preflight - the mirror runs", "verify.mirror", "ok", 0.05,
                   [Outcome("ok", "local", "primary-to-dr: Spark job running (pid 42)", flow="primary-to-dr")]),
        TaskResult("Fence the clients' writes on the source", "acls.fence", "skipped", 0.0, reason="when: planned and fence"),
        TaskResult("Stop the mirror", "mirror.stop", "changed", 1.5,
                   [Outcome("changed", "local", "stopped the Spark job (primary-to-dr)",
                            (("Spark job", "running", "stopped"),))]),
        TaskResult("Translate every group's offsets", "offsets.translate", "ok", 0.7,
                   [Outcome("ok", "primary", "primary-to-dr: 1 groups, 2 partitions translated (exact); 0 skipped, 0 re-read")]),
        TaskResult("Commit the offsets on DR", "offsets.commit", "changed", 0.2,
                   [Outcome("changed", "dr", "orders-service: committed 2 partitions",
                            (("orders-service orders-0", "-", "1208"), ("orders-service orders-1", "990", "1107")))],
                   ends_rto=True),
        TaskResult("Verify the result", "verify.failover", "not run", 0.0, reason="an earlier task failed"),
    ]
    facts = {TRANSLATIONS: [
        Translation("orders-service", "orders", 0, "orders", 1200, 1208, "exact", mm2_offset=1201, mm2_reread=7, verified=True),
        Translation("orders-service", "orders", 1, "orders", 1100, 1107, "exact", mm2_offset=1105, mm2_reread=2, verified=True),
    ]}
    # What the runner does at the end of a run: every section of the catalogue, collected from the facts.
    report.sections = [(s, s.collect(facts)) for s in report_sections(CATALOGUE.values())]
    return report


@pytest.mark.parametrize("fmt,suffix", [("text", "txt"), ("markdown", "md"), ("json", "json")])
def test_report_formats_match_golden(fmt, suffix, update_golden):
    text = render(_report(), fmt, diff=True)
    golden = GOLDEN / f"failover.{suffix}"
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_json_report_matches_its_schema():
    schema = json.loads((ROOT / "schemas/playbook-report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    data = json.loads(render(_report(), "json"))
    jsonschema.validate(data, schema)
    assert data["rto"]["seconds"] == pytest.approx(2.45) and data["totals"]["mm2Reread"] == 9


def test_every_module_has_a_summary_and_an_argument_schema():
    for name, module in CATALOGUE.items():
        assert module.summary and module.args.get("type") == "object", name
        jsonschema.Draft202012Validator.check_schema(module.args)
