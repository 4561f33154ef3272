"""Rules written once: each is derived from its one source, and where a copy must remain, a test here
fails as soon as the copies differ.

- the DR spec's name, cluster-alias and environment-name rules: the schema's patterns, which
  ``mm2spec init`` checks its flags by (``render/repository``);
- the engines: ``mm2.engine_facts.ENGINE_FACTS``, which ``init``'s ``--engine``, its skeleton's
  comment, the playbooks' ``engine`` variable and the schema's ``engine`` enum follow;
- the variables of a playbook's ``when``: ``ops/playbooks/context.WHEN_VARIABLES``, which both the
  checks of a playbook and a run's values come from;
- the version: ``mm2spec.__version__``, which the wheel, ``--version`` and the Spark job's
  ``mm2spark`` give.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

import mm2spec
from mm2spec.cli import main
from mm2spec.errors import InitRefused
from mm2spec.mm2 import engine_facts
from mm2spec.mm2.engine_facts import DEFAULT_ENGINE, ENGINE_FACTS, engine_names
from mm2spec.ops.playbooks.context import WHEN_VARIABLES, Context, Options
from mm2spec.ops.playbooks.playbook import VARIABLES, condition_problem, evaluate
from mm2spec.render import repository
from mm2spec.render.repository import RepositoryOptions, init_files
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.schema import schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def _python_files() -> list[Path]:
    return sorted(p for folder in ("mm2spec", "spark") for p in (ROOT / folder).rglob("*.py"))


# ------------------------------------------------------------------------ the schema's name rules

SCHEMA_RULES = {
    "NAME": ("properties", "metadata", "properties", "name"),
    "ALIAS": ("properties", "clusters", "propertyNames"),
    "ENVIRONMENT": ("properties", "environments", "propertyNames"),
}


def _pattern(path: tuple[str, ...]) -> str:
    node = schema()
    for key in path:
        node = node[key]
    return node["pattern"]


@pytest.mark.parametrize("rule", sorted(SCHEMA_RULES))
def test_init_checks_names_by_the_schemas_own_patterns(rule):
    pattern = _pattern(SCHEMA_RULES[rule])
    assert pattern.startswith("^") and pattern.endswith("$"), "init fullmatches the pattern: keep it anchored"
    assert getattr(repository, rule).pattern == pattern[1:-1]


@pytest.mark.parametrize("rule", sorted(SCHEMA_RULES))
def test_no_python_file_copies_a_schema_name_rule(rule):
    body = _pattern(SCHEMA_RULES[rule])[1:-1]
    found = [str(p.relative_to(ROOT)) for p in _python_files() if body in p.read_text(encoding="utf-8")]
    assert found == [], f"take the rule from the schema (mm2spec.spec.schema.schema()), as render/repository does: {found}"


NAMES = ["a", "payments-dr", "a" * 63, "a" * 64, "-a", "a-", "A", "a_b", "0", "a.b", "a b", "", "é"]


@pytest.mark.parametrize("name", NAMES)
def test_init_refuses_a_name_exactly_when_validate_would(name):
    """The words of init's messages ("at most 63, not starting or ending with '-'") describe the rule:
    these cases cross its edges."""
    in_schema = jsonschema.Draft202012Validator(schema()["properties"]["metadata"]).is_valid({"name": name})
    try:
        init_files(RepositoryOptions(name=name), "{}", mm2spec.__version__)
    except InitRefused as exc:
        assert not in_schema and "--name" in str(exc)
    else:
        assert in_schema
    assert in_schema == (name in ("a", "payments-dr", "a" * 63, "0"))


@pytest.mark.parametrize("alias", NAMES[:-1] + ["A_b-0", "_a"])
def test_init_refuses_an_alias_or_environment_exactly_when_validate_would(alias):
    for part in ("clusters", "environments"):
        names = schema()["properties"][part]["propertyNames"]
        in_schema = jsonschema.Draft202012Validator(names).is_valid(alias)
        try:
            if part == "clusters":
                repository.parse_cluster("--source", f"{alias}=k:9092")
            else:
                init_files(RepositoryOptions(name="n", environments=(alias,)), "{}", mm2spec.__version__)
        except InitRefused as exc:
            assert not in_schema, exc
        else:
            assert in_schema, f"init takes {part} name {alias!r} that the schema refuses"
        assert in_schema == (alias in ("a", "payments-dr", "a" * 63, "a-", "A", "a_b", "0", "A_b-0"))


# ------------------------------------------------------------------------------------ the engines

def test_the_schemas_engines_are_engine_facts():
    engine = schema()["properties"]["engine"]
    assert set(engine["enum"]) == set(ENGINE_FACTS) and engine["default"] == DEFAULT_ENGINE


def test_init_takes_and_describes_the_engines_of_engine_facts(capsys):
    assert repository.ENGINES == tuple(ENGINE_FACTS) and RepositoryOptions("n").engine == DEFAULT_ENGINE
    for name in ENGINE_FACTS:
        spec = init_files(RepositoryOptions("n", engine=name), "{}", mm2spec.__version__)["n.dr.yaml"]
        line = next(line for line in spec.splitlines() if line.startswith("engine:"))
        assert line.split("#")[0].split() == ["engine:", name]
        listed = [choice.split(" (")[0] for choice in line.split("which runs the mirror: ")[1].split(" | ")]
        assert listed == list(ENGINE_FACTS)
    with pytest.raises(InitRefused, match=re.escape(", ".join(ENGINE_FACTS))):
        init_files(RepositoryOptions("n", engine="flink"), "{}", mm2spec.__version__)
    with pytest.raises(SystemExit):
        main(["init", "--help"])
    assert ", ".join(ENGINE_FACTS) in " ".join(capsys.readouterr().out.split())


def test_the_skeletons_engine_comment_says_which_runs_on_connect():
    choices = repository.ENGINE_CHOICES.split(" | ")
    assert [c.split(" (")[0] for c in choices] == list(ENGINE_FACTS)
    assert [c.endswith(" (MM2 on Kafka Connect)") for c in choices] == [
        f.runs_on_connect_workers for f in ENGINE_FACTS.values()]


def test_the_engine_variable_names_every_engine(monkeypatch):
    """Its words, from the table: "the spec's engine: 'spark' or 'connect'" for the two engines."""
    assert VARIABLES["engine"] == "the spec's engine: " + engine_names(quote="'")
    assert re.findall(r"'([^']+)'", VARIABLES["engine"].split(": ", 1)[1]) == list(ENGINE_FACTS)
    assert engine_names(quote="'") == "'spark' or 'connect'" and engine_names() == "spark or connect"
    monkeypatch.setattr(engine_facts, "ENGINE_FACTS", dict.fromkeys("abc"))
    assert (engine_names(quote="'"), engine_names(", and ")) == ("'a', 'b' or 'c'", "a, b, and c")


# -------------------------------------------------------------------------- when's variables

class OfflineContext(Context):
    """Reads no cluster: the failover states are given."""

    states: dict = {}

    def failover_states(self, refresh: bool = False):
        return self.states


def test_a_playbook_checks_the_variables_a_run_gives():
    ctx = OfflineContext(load_desired_state(EXAMPLE, "dev"), Options(check=True))
    values = ctx.variables()
    assert list(values) == list(VARIABLES) == [v.name for v in WHEN_VARIABLES]
    assert VARIABLES == {v.name: v.description for v in WHEN_VARIABLES} and all(VARIABLES.values())
    for name in VARIABLES:
        assert condition_problem(name) is None
        assert condition_problem(f"{name} and not {name}") is None
        evaluate(name, values)
    assert condition_problem("no_such_variable") is not None
    assert values["check"] is True and values["planned"] is True and values["engine"] == ctx.spec.engine


def test_the_variables_compute_what_they_did(monkeypatch):
    """The table computes what ``Context.variables`` computed inline before it."""
    from mm2spec.live.types import FailoverState

    ctx = OfflineContext(load_desired_state(EXAMPLE, "dev"), Options(source_unreachable=True))
    flow = ctx.flows[0].name
    base = {"check": False, "planned": False, "source_unreachable": True, "engine": ctx.spec.engine,
            "fence": ctx.spec.failover.fence and bool(ctx.spec.failover.clients),
            "clients": bool(ctx.spec.failover.clients),
            "exactly_once": any(f.exactly_once for f in ctx.flows), "heartbeats": any(f.heartbeats for f in ctx.flows)}
    assert ctx.variables() == {**base, "failed_over": False, "resuming": False, "failing_back": False}
    for phase, expected in (("failed-over", (len(ctx.flows) == 1, True, False)), ("failing-back", (False, True, True))):
        state = FailoverState(flow, phase, "unplanned", ctx.flows[0].source, ctx.flows[0].target, 0)
        monkeypatch.setattr(ctx, "states", {flow: state})
        assert ctx.variables() == {**base, **dict(zip(("failed_over", "resuming", "failing_back"), expected))}


# ------------------------------------------------------------------------------------ the version

def test_one_version():
    sys.path.insert(0, str(ROOT / "spark"))
    try:
        import mm2spark
    finally:
        sys.path.remove(str(ROOT / "spark"))
    assert mm2spark.__version__ is mm2spec.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mm2spec.__version__"}
    assigned = [str(p.relative_to(ROOT)) for p in [*_python_files(), ROOT / "setup.py"]
                for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                if isinstance(node, ast.Name) and node.id == "__version__" and isinstance(node.ctx, ast.Store)]
    assert assigned == ["mm2spec/__init__.py"], "mm2spec.__version__ is the one version: import it"
    setup_call = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    assert not [k for k in ast.walk(setup_call) if isinstance(k, ast.keyword) and k.arg == "version"]
