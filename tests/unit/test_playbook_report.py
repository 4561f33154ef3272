"""The playbook engine renders what modules contribute without naming any: a module says whether
its end is the RTO and which report sections it adds; the runner collects the sections from the
run's facts and the report shows them in text, markdown and JSON. The engine's files import no
module of the catalogue (nor the drill), so a new module family never edits the engine."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from mm2spec.ops.modules.catalogue import CATALOGUE
from mm2spec.ops.modules.sections import LOSS, RPO, TRANSLATIONS
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.ops.playbooks.module import Module, report_sections
from mm2spec.ops.playbooks.playbook import Playbook, Task, load_playbook
from mm2spec.ops.playbooks.report import Outcome, render
from mm2spec.ops.playbooks.runner import run
from mm2spec.spec.document import Position
from mm2spec.spec.load import load_desired_state
from tests.kit.leases import MemoryLeaseStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
ENGINE = ROOT / "mm2spec" / "ops" / "playbooks"
FENCES = "fences"


class OfflineContext(Context):
    """A context that reads no cluster: no flow is failed over; DR leases kept in memory."""

    leases: dict = {}

    def failover_states(self, refresh: bool = False):
        return {}

    def lease_store(self, source: str, target: str) -> MemoryLeaseStore:
        return self.leases.setdefault((source, target), MemoryLeaseStore())


class FencesSection:
    """A section no real module has: the fences a fake module leaves in the facts."""

    name = FENCES

    def collect(self, facts: Mapping[str, Any]) -> list[str]:
        return facts.get(FENCES, [])

    def to_json(self, fences: list[str]) -> dict[str, Any]:
        return {"fences": fences}

    def text_lines(self, fences: list[str]) -> list[str]:
        return ["", "FENCES " + ", ".join(fences)] if fences else []

    def markdown_lines(self, fences: list[str]) -> list[str]:
        return ["", "**Fences**: " + ", ".join(fences)] if fences else []


SECTION = FencesSection()


def _fence(ctx: Context, _args) -> list[Outcome]:
    ctx.facts.setdefault(FENCES, []).append("orders-writer")
    return [Outcome("changed", "primary", "fenced orders-writer")]


def _ok(_ctx: Context, _args) -> list[Outcome]:
    return [Outcome("ok", "dr", "done")]


def _task(name: str, module: Module, when: str | None = None) -> Task:
    return Task(name, module, {}, (), when, Position("p.yaml", 1, 1))


def _context() -> Context:
    return OfflineContext(load_desired_state(EXAMPLE, "dev"), Options())


FENCE = Module("test.fence", "fence", _fence, sections=(SECTION,))
RESUME = Module("test.resume", "resume", _ok, ends_rto=True)
AFTER = Module("test.after", "after", _ok)


def test_a_modules_section_shows_in_every_format_and_its_end_is_the_rto():
    playbook = Playbook("t", "", (_task("fence", FENCE), _task("resume", RESUME), _task("after", AFTER)), "p.yaml",
                        report_sections([FENCE, RESUME, AFTER]))
    report = run(playbook, _context())
    assert report.section(FENCES) == ["orders-writer"]
    assert report.tasks[1].ends_rto and not report.tasks[2].ends_rto
    assert report.rto_seconds() == sum(t.seconds for t in report.tasks[:2])
    assert "\nFENCES orders-writer\n\nPLAY RECAP\n" in render(report, "text")
    assert "\n**Fences**: orders-writer\n\n| cluster |" in render(report, "markdown")
    data = json.loads(render(report, "json"))
    assert data["fences"] == ["orders-writer"] and list(data)[-2:] == ["rto", "fences"]
    assert data["rto"]["seconds"] == round(report.rto_seconds(), 3)


def test_a_section_is_there_when_its_module_did_not_run_and_a_skipped_rto_task_ends_nothing():
    playbook = Playbook("t", "", (_task("fence", FENCE, when="source_unreachable"),
                                  _task("resume", RESUME, when="source_unreachable"), _task("after", AFTER)),
                        "p.yaml", report_sections([FENCE, RESUME, AFTER]))
    report = run(playbook, _context())
    assert [t.status for t in report.tasks] == ["skipped", "skipped", "ok"]
    assert report.rto_seconds() is None
    assert json.loads(render(report, "json"))["fences"] == []
    assert "FENCES" not in render(report, "text") and "Fences" not in render(report, "markdown")


def test_every_report_of_the_catalogue_has_its_sections_even_when_no_translation_ran():
    """A verify run's JSON keeps ``translations``, ``totals`` and ``rpo`` (the schema requires them)
    and ``loss``."""
    playbook = load_playbook("verify", CATALOGUE)
    assert [s.name for s in playbook.sections] == [TRANSLATIONS, RPO, LOSS]
    offline = Playbook(playbook.name, "", (_task("after", AFTER),), "p.yaml", playbook.sections)
    data = json.loads(render(run(offline, _context()), "json"))
    jsonschema.validate(data, json.loads((ROOT / "schemas/playbook-report.schema.json").read_text()))
    assert list(data)[-5:] == ["rto", "translations", "totals", "rpo", "loss"]
    assert data["translations"] == [] and data["rpo"] == [] and data["loss"] == [] and set(data["totals"].values()) == {0}


def test_the_commits_end_the_rto():
    assert sorted(name for name, module in CATALOGUE.items() if module.ends_rto) == ["failback.commit", "offsets.commit"]


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, late imports included: (line, dotted name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def test_the_playbook_engine_names_no_module():
    files = sorted(ENGINE.glob("*.py"))
    assert files
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports {name}" for path in files for line, name in _imports(path)
             if name.split(".")[:3] in (["mm2spec", "ops", "modules"], ["mm2spec", "ops", "drill"])]
    assert wrong == []
    # the module names of the catalogue appear in no code of the engine (docstrings may name them)
    names = set(CATALOGUE)
    for path in files:
        tree = ast.parse(path.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        named = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and id(n) not in docstrings and n.value in names]
        assert named == [], f"{path.relative_to(ROOT)} names modules {named}"
