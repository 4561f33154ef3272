"""Playbooks: YAML data, an ordered list of named tasks, each calling one module of the catalogue.

    name: failover
    description: Move consumers to the DR cluster.
    tasks:
      - name: Stop the mirror
        mirror.stop: {}
        tags: [stop]
        when: not failed_over

A task has a ``name``, exactly one module key (``mirror.stop``) with its arguments (a mapping, or
nothing), optional ``tags``, ``ignore_errors`` and an optional ``when`` condition (``not``, ``and``, ``or``, ``==``,
``!=`` over the run's variables, see ``VARIABLES``). Everything is checked before any task runs:
unknown modules and arguments, a module whose input an earlier task must produce, conditions;
every problem is reported at once with FILE:LINE:COL, like a spec.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from mm2spec.errors import PlaybookInvalid, SpecUnreadable
from mm2spec.ops.playbooks.context import WHEN_VARIABLES
from mm2spec.ops.playbooks.module import Module, report_sections
from mm2spec.ops.playbooks.report import ReportSection
from mm2spec.resources import playbook_dir, playbook_path
from mm2spec.spec.document import Mapping as MapNode, Node, Position, Scalar, Sequence as SeqNode, load_file, locate, to_plain
from mm2spec.spec.validate import Diagnostic

TASK_KEYS = ("name", "tags", "when", "ignore_errors")
PLAYBOOK_KEYS = ("name", "description", "tasks")

VARIABLES = {variable.name: variable.description for variable in WHEN_VARIABLES}
"""The names a ``when`` condition may use, with what each means (``context.WHEN_VARIABLES``, which also
computes them for a run)."""


@dataclass(frozen=True)
class Task:
    name: str
    module: Module
    args: Mapping[str, Any]
    tags: tuple[str, ...]
    when: str | None
    pos: Position
    ignore_errors: bool = False
    """A failure of this task does not stop the run (the verify checks: every failing one is named)."""


@dataclass(frozen=True)
class Playbook:
    name: str
    description: str
    tasks: tuple[Task, ...]
    path: str
    sections: tuple[ReportSection, ...] = ()
    """The report sections of the catalogue it was checked against: its every run's report has them."""


def resolve_playbook(name_or_path: str) -> Path:
    """A playbook file: a path, or the name of a bundled one (``verify``, ``failover``)."""
    path = Path(name_or_path)
    if path.exists() or path.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return path
    bundled = playbook_path(name_or_path)
    if bundled.exists():
        return bundled
    known = sorted(p.stem for p in playbook_dir().glob("*.yaml"))
    raise SpecUnreadable(f"no playbook file {name_or_path!r} and no bundled playbook of that name "
                         f"(bundled: {', '.join(known)})")


def load_playbook(name_or_path: str, catalogue: Mapping[str, Module]) -> Playbook:
    """Load and check a playbook against ``catalogue`` (module name -> module, see
    ``mm2spec.ops.modules.catalogue``); PlaybookInvalid lists every problem with its place."""
    path = resolve_playbook(name_or_path)
    root = load_file(path)
    problems: list[Diagnostic] = []

    def report(node_path: list, message: str, key: bool = False) -> None:
        problems.append(Diagnostic.at(locate(root, node_path, key=key), node_path, message))

    if not isinstance(root, MapNode):
        raise PlaybookInvalid([Diagnostic.at(root.pos, [], "a playbook is a mapping with name, description and tasks")])
    for key in root.entries:
        if key not in PLAYBOOK_KEYS:
            report([key], f"unknown field {key!r}{_suggest(key, PLAYBOOK_KEYS)}", key=True)
    tasks_node = root.entries.get("tasks")
    tasks: list[Task] = []
    if not isinstance(tasks_node, SeqNode) or not tasks_node.items:
        report(["tasks"] if tasks_node is not None else [], "tasks: a non-empty list of tasks is required")
    else:
        seen: list[str] = []
        for index, node in enumerate(tasks_node.items):
            task = _task(node, ["tasks", index], report, seen, catalogue)
            if task is not None:
                tasks.append(task)
                seen.append(task.module.name)
    name = _text(root.entries.get("name")) or path.stem
    if problems:
        raise PlaybookInvalid(problems)
    return Playbook(name, _text(root.entries.get("description")) or "", tuple(tasks), str(path),
                    report_sections(catalogue.values()))


def _text(node: Node | None) -> str | None:
    return node.value if isinstance(node, Scalar) and isinstance(node.value, str) else None


def _suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _task(node: Node, path: list, report, earlier: list[str], catalogue: Mapping[str, Module]) -> Task | None:
    if not isinstance(node, MapNode):
        report(path, "a task is a mapping: name, one module (e.g. mirror.stop) and optional tags and when")
        return None
    modules = [k for k in node.entries if k not in TASK_KEYS]
    name = _text(node.entries.get("name"))
    if name is None:
        report(path + ["name"] if "name" in node.entries else path, "every task needs a name (a string)")
    if len(modules) != 1:
        what = "no module" if not modules else f"{len(modules)} modules ({', '.join(modules)})"
        report(path, f"a task calls exactly one module, this one has {what}; modules: {', '.join(sorted(catalogue))}")
        return None
    key = modules[0]
    module = catalogue.get(key)
    if module is None:
        report(path + [key], f"unknown module {key!r}{_suggest(key, catalogue)}", key=True)
        return None
    args_node = node.entries[key]
    args = {} if isinstance(args_node, Scalar) and args_node.value is None else to_plain(args_node)
    if not isinstance(args, dict):
        report(path + [key], f"{key}: arguments are a mapping (or nothing), not {type(args).__name__}")
        return None
    for error in jsonschema.Draft202012Validator(module.args).iter_errors(args):
        where = path + [key] + list(error.absolute_path)
        if error.validator == "additionalProperties":
            allowed = ", ".join(sorted(module.args.get("properties", {}))) or "none"
            report(where, f"{key}: {error.message} (its arguments: {allowed})")
        else:
            report(where, f"{key}: {error.message}")
    for needed in module.needs:
        if needed not in earlier:
            report(path + [key], f"{key} uses the result of {needed}: put a {needed} task before it", key=True)
    tags = to_plain(node.entries["tags"]) if "tags" in node.entries else []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        report(path + ["tags"], "tags: a list of names")
        tags = []
    when = node.entries.get("when")
    condition = None
    if when is not None:
        condition = when.value if isinstance(when, Scalar) else None
        if isinstance(condition, bool):
            condition = "true" if condition else "false"
        problem = condition_problem(condition) if isinstance(condition, str) else "when: a condition, e.g. 'planned and fence'"
        if problem:
            report(path + ["when"], problem)
    ignore = node.entries.get("ignore_errors")
    if ignore is not None and not (isinstance(ignore, Scalar) and isinstance(ignore.value, bool)):
        report(path + ["ignore_errors"], "ignore_errors: true or false")
    return Task(name or key, module, args, tuple(tags), condition, node.pos,
                bool(ignore.value) if isinstance(ignore, Scalar) and isinstance(ignore.value, bool) else False)


# ----------------------------------------------------------------------------------- conditions

_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.Compare, ast.Eq, ast.NotEq,
            ast.Name, ast.Load, ast.Constant)


def condition_problem(text: str) -> str | None:
    """Why ``text`` is not a valid ``when`` condition, or None."""
    if text.strip() in ("true", "false"):
        return None
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return f"when: {text!r} is not a condition (use not, and, or, ==, != and the variables {', '.join(VARIABLES)})"
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            return f"when: {text!r}: only not, and, or, ==, != and names are allowed"
        if isinstance(node, ast.Name) and node.id not in VARIABLES:
            return f"when: unknown variable {node.id!r}{_suggest(node.id, VARIABLES)}; variables: {', '.join(VARIABLES)}"
    return None


def evaluate(text: str | None, variables: Mapping[str, Any]) -> bool:
    """Evaluate a checked condition (``condition_problem`` returned None) over ``variables``."""
    if text is None or text.strip() == "true":
        return True
    if text.strip() == "false":
        return False
    return bool(_eval(ast.parse(text.strip(), mode="eval").body, variables))


def _eval(node: ast.AST, variables: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, variables) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        return not _eval(node.operand, variables)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, variables)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, variables)
            if (left == right) != isinstance(op, ast.Eq):
                return False
            left = right
        return True
    if isinstance(node, ast.Name):
        return variables[node.id]
    return node.value  # ast.Constant


def playbook_schema(catalogue: Mapping[str, Module]) -> dict:
    """The JSON Schema of a playbook file, from the catalogue (``schemas/playbook.schema.json``
    holds it for editors; a unit test keeps the two equal)."""
    task_props = {
        "name": {"type": "string", "description": "Shown in the output and the report."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Selected by --tags / --skip-tags."},
        "when": {"type": "string", "description": "A condition over the run's variables: " + ", ".join(VARIABLES)},
        "ignore_errors": {"type": "boolean", "description": "A failure of this task does not stop the run."},
    }
    modules = {name: {**module.args, "description": module.summary} for name, module in sorted(catalogue.items())}
    one_module = [{"required": [name], "properties": {name: schema}} for name, schema in modules.items()]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mm2spec.dev/schemas/playbook.schema.json",
        "title": "mm2spec playbook",
        "description": "An ordered list of named tasks, each calling one module of mm2spec's catalogue.",
        "type": "object",
        "additionalProperties": False,
        "required": ["tasks"],
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "tasks": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["name"],
                "properties": {**task_props, **{n: {"description": s["description"]} for n, s in modules.items()}},
                "additionalProperties": False, "minProperties": 2, "oneOf": one_module}},
        },
    }
