"""The layers of ARCHITECTURE.md, checked: which subpackage may import which, and who may print.

ARCHITECTURE.md is the one source: its "Subpackages" table says what each row may import (and
which rows are stdlib only or work offline), its diagram says which row is above which; this test
reads both and holds every file of the package and of the Spark job (``spark/``) to them. Every
import statement is read (module level and inside functions alike), so a late import cannot slip
past. A rule that fails names the file, the line and the import.

Each folder's ``__init__.py`` docstring lists the folder's modules (the convention: bullet lines
"- ``a``, ``b``: what they do"; a sub-package counts as a module, ``__init__`` may be named or not),
and a layer's docstring says what it may import: the same rows as the table.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_NAME = "mm2spec"

# Libraries that talk to a network or drive an engine.
NETWORK = ("confluent_kafka", "urllib.request", "http.client", "socket", "requests", "pulumi", "pyspark")
# Modules of plan/ that import no client library (the plan formats and the diff work offline);
# the table's plan row says so in words ("only `build` reads clusters").
OFFLINE_PLAN = ("desired", "diff", "model", "formats", "__init__")
# The one layer that may print (the diagram's top row says so).
PRINTING_LAYER = "cli"


# ---------------------------------------------------------------------------------------------
# ARCHITECTURE.md, read


@dataclass(frozen=True)
class Row:
    """One row of the Subpackages table."""

    name: str
    """The path the row names, without ``/`` or ``.py``: ``errors``, ``ops/modules``, ``spark/mm2spark``."""
    listed: frozenset[str]
    """The rows its "may import" cell names before the first ``;`` (``everything`` expanded)."""
    stdlib_only: bool
    offline: bool


@dataclass(frozen=True)
class Layers:
    """The table and the diagram of ARCHITECTURE.md."""

    rows: dict[str, Row]
    diagram: list[list[str]]
    """The diagram's lines, top to bottom, each the rows it names (``cli``, ``errors``...)."""
    problems: list[str] = field(default_factory=list)
    """What could not be read (a cell naming no row)."""

    def parent(self, name: str) -> str | None:
        """The nearest row above ``name`` in the tree (``ops`` for ``ops/modules``)."""
        parts = name.split("/")
        for i in range(len(parts) - 1, 0, -1):
            if "/".join(parts[:i]) in self.rows:
                return "/".join(parts[:i])
        return None

    def allowed(self, name: str) -> set[str]:
        """What a file of row ``name`` may import: its own row, the rows listed, and, when it lists its
        parent, what the parent may import."""
        row = self.rows[name]
        allowed = {name} | set(row.listed)
        parent = self.parent(name)
        if parent in row.listed:
            allowed |= self.allowed(parent)
        return allowed

    def flag(self, name: str, flag: str) -> bool:
        """A row's ``stdlib_only`` / ``offline``, or any row above it in the tree."""
        while name is not None:
            if getattr(self.rows[name], flag):
                return True
            name = self.parent(name)
        return False


def parse_architecture(text: str) -> Layers:
    """The Subpackages table (package | holds | may import) and the layer diagram (the first fenced block)."""
    fence = re.search(r"^```\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    diagram = []
    for line in (fence.group(1).splitlines() if fence else []):
        names = []
        for token in line.split():
            if not re.fullmatch(r"\w+(/|\.py)", token):
                break
            names.append(token.removesuffix("/").removesuffix(".py"))
        if names:
            diagram.append(names)
    section = text.split("## Subpackages", 1)[1] if "## Subpackages" in text else ""
    cells = []
    for line in section.splitlines():
        if line.startswith("|") and not re.match(r"\|\s*(package\s*\||-)", line):
            cells.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif cells and not line.startswith("|"):
            break
    names = [c[0].strip("`").removesuffix("/").removesuffix(".py") for c in cells]
    rows, problems = {}, []
    for name, cell in zip(names, (c[-1] for c in cells)):
        cell = re.sub(r"\([^)]*\)", "", cell)  # notes in parentheses
        layers, _, notes = cell.partition(";")
        listed = set()
        for item in filter(None, (i.strip() for i in layers.split(","))):
            word = item.split()[0].strip("`").removesuffix("/").removesuffix(".py")
            if word == "everything":
                listed |= set(names)
            elif word in names:
                listed.add(word)
            elif word != "nothing":
                problems.append(f"row {name} may import {word}, which is no row of the table")
        rows[name] = Row(name, frozenset(listed - {name}), "stdlib only" in notes, "no network" in notes)
    return Layers(rows, diagram, problems)


ARCHITECTURE = ROOT / "ARCHITECTURE.md"
LAYERS = parse_architecture(ARCHITECTURE.read_text())


# ---------------------------------------------------------------------------------------------
# The tree: the package and the programs beside it (spark/), each file in its row


@dataclass
class Tree:
    """A checkout (the real one or a test's) seen through a table."""

    root: Path
    layers: Layers
    _locations: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @property
    def package(self) -> Path:
        return self.root / PACKAGE_NAME

    def location(self, row: str) -> tuple[str, ...]:
        """Where a row is, from the root: a program's row (``spark/``) is what the root holds and the
        package does not; every other row is in the package."""
        if row not in self._locations:
            parts = tuple(row.split("/"))
            here, beside = self.package.joinpath(*parts), self.root.joinpath(*parts)
            outside = not (here.exists() or here.with_suffix(".py").exists()) and (
                beside.exists() or beside.with_suffix(".py").exists())
            self._locations[row] = parts if outside else (PACKAGE_NAME,) + parts
        return self._locations[row]

    def program_rows(self) -> list[str]:
        return [r for r in self.layers.rows if self.location(r)[0] != PACKAGE_NAME]

    def row_of(self, parts: tuple[str, ...]) -> str | None:
        """The row of the longest path holding ``parts`` (a path from the root, no suffix); None for
        the package's own ``__init__`` (the version) and for what no row holds."""
        best = None
        for row in self.layers.rows:
            where = self.location(row)
            if parts[:len(where)] == where and (best is None or len(where) > len(self.location(best))):
                best = row
        return best

    def import_roots(self) -> dict[str, tuple[str, ...]]:
        """Top-level import name -> the folder (from the root) it is imported from: the package, and
        each program package (``mm2spark``, imported with ``spark/`` on the path)."""
        roots = {PACKAGE_NAME: ()}
        for row in self.program_rows():
            folder = self.root.joinpath(*self.location(row))
            if (folder / "__init__.py").exists() and (folder.parent / "__init__.py").exists():
                roots[folder.name] = self.location(row)[:-1]
        return roots

    def files(self) -> list[Path]:
        """Every Python file of the package and of the programs' folders."""
        found = set(self.package.rglob("*.py"))
        for row in self.program_rows():
            top = self.root / self.location(row)[0]
            found |= set(top.rglob("*.py")) if top.is_dir() else {top.with_suffix(".py")}
        return sorted(p for p in found if "__pycache__" not in p.parts and p.exists())

    def parts(self, path: Path) -> tuple[str, ...]:
        parts = path.relative_to(self.root).with_suffix("").parts
        return parts[:-1] if parts[-1] == "__init__" else parts

    def module_row(self, module: str) -> str | None:
        """The row an imported module belongs to; None outside the tree (or the package's root)."""
        top, *rest = module.split(".")
        roots = self.import_roots()
        return self.row_of(roots[top] + (top, *rest)) if top in roots else None

    def exists(self, module: str) -> bool:
        top, *rest = module.split(".")
        base = self.root.joinpath(*self.import_roots()[top], top, *rest)
        return base.is_dir() or base.with_suffix(".py").exists()

    def imports(self, path: Path) -> list[tuple[int, str]]:
        """(line, absolute module) for every import in a file; relative imports resolved, and
        ``from pkg import sub`` read as ``pkg.sub`` when ``sub`` is a module of the tree."""
        file_parts, roots, here = path.relative_to(self.root).parts, self.import_roots(), ""
        for top, where in roots.items():
            if file_parts[:len(where) + 1] == where + (top,):
                here = ".".join(file_parts[len(where):-1])
        found = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(node.lineno, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
                if module.split(".")[0] not in roots:
                    found.append((node.lineno, module))
                    continue
                names = [f"{module}.{a.name}" if self.exists(f"{module}.{a.name}") else module for a in node.names]
                found += [(node.lineno, name) for name in dict.fromkeys(names)]
        return found


TREE = Tree(ROOT, LAYERS)


# ---------------------------------------------------------------------------------------------
# The rules: each takes (tree, file, imported module) and returns what is wrong, or None


def _top(row: str | None) -> str | None:
    return row.split("/")[0] if row else None


def _is(module: str, names) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def downward(tree: Tree, path: Path, module: str) -> str | None:
    """The table's "may import" column: nothing else from the package or the programs."""
    row, target = tree.row_of(tree.parts(path)), tree.module_row(module)
    if target is None or target == row:
        return None
    if row is None:  # the package's own __init__ (its version), or a file the table misses
        return "no row of ARCHITECTURE.md's table holds this file, so it may import no layer"
    return None if target in tree.layers.allowed(row) else f"layer {row} may not import {target}"


def cli_only_imported_by_cli(tree: Tree, path: Path, module: str) -> str | None:
    row, target = tree.row_of(tree.parts(path)), tree.module_row(module)
    if _top(row) != "cli" and _top(target) == "cli":
        return "only the cli imports the cli"
    return None


def offline(tree: Tree, path: Path, module: str) -> str | None:
    """Rows marked "no network" import no network client library, not even late; nor do plan's
    modules other than ``build``."""
    row = tree.row_of(tree.parts(path))
    if row and tree.layers.flag(row, "offline") and _is(module, NETWORK):
        return f"layer {row} must work without a network client"
    if row == "plan" and path.stem in OFFLINE_PLAN:
        if _is(module, NETWORK) or (_is(module, [f"{PACKAGE_NAME}.live"]) and module != f"{PACKAGE_NAME}.live.types"):
            return "only plan.build reads live clusters"
    return None


def stdlib_only(tree: Tree, path: Path, module: str) -> str | None:
    """Rows marked "stdlib only" import the standard library and the rows they may, nothing else."""
    row = tree.row_of(tree.parts(path))
    if not row or not tree.layers.flag(row, "stdlib_only"):
        return None
    top = module.split(".")[0]
    if top in tree.import_roots():
        return downward(tree, path, module) and f"{row} is stdlib only"
    return None if top in sys.stdlib_module_names or top == "__future__" else f"{row} is stdlib only"


RULES = (downward, cli_only_imported_by_cli, offline, stdlib_only)


def violations(tree: Tree, rule) -> list[str]:
    out = []
    for path in tree.files():
        for line, module in tree.imports(path):
            problem = rule(tree, path, module)
            if problem:
                out.append(f"{path.relative_to(tree.root)}:{line}: imports {module}: {problem}")
    return out


def prints(tree: Tree) -> list[str]:
    """print() / input() / sys.stdout|stderr.* in the package outside the cli."""
    found = []
    for path in sorted(tree.package.rglob("*.py")):
        if _top(tree.row_of(tree.parts(path))) == PRINTING_LAYER:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("print", "input"):
                found.append(f"{path.relative_to(tree.root)}:{node.lineno}: {func.id}()")
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                  and isinstance(func.value.value, ast.Name) and func.value.value.id == "sys"
                  and func.value.attr in ("stdout", "stderr")):
                found.append(f"{path.relative_to(tree.root)}:{node.lineno}: sys.{func.value.attr}.{func.attr}()")
    return found


# ---------------------------------------------------------------------------------------------
# The table itself, and the docstrings that repeat it


def table_problems(tree: Tree) -> list[str]:
    """The table against the tree and the diagram: every row names something, every top-level
    module of the package has a row, every top-level row is on one line of the diagram, every edge
    runs down the diagram, and no edges make a loop (the sub-rows, which the diagram does not show)."""
    layers, problems = tree.layers, list(tree.layers.problems)
    for row in layers.rows:
        where = tree.root.joinpath(*tree.location(row))
        if not (where.is_dir() or where.with_suffix(".py").exists()):
            problems.append(f"row {row} names nothing in the tree")
    tops = {p.name for p in tree.package.iterdir() if (p / "__init__.py").exists()}
    tops |= {p.stem for p in tree.package.glob("*.py") if p.stem != "__init__"}
    problems += [f"{PACKAGE_NAME}/{t} has no row in the table" for t in sorted(tops - set(layers.rows))]
    program_files = [p for p in tree.files() if p.relative_to(tree.root).parts[0] != PACKAGE_NAME]
    problems += [f"{p.relative_to(tree.root)} is in no row of the table" for p in program_files
                 if tree.row_of(tree.parts(p)) is None]

    line_of = {}
    for i, names in enumerate(layers.diagram):
        for name in names:
            if name in line_of:
                problems.append(f"{name} is on two lines of the diagram")
            line_of[name] = i
    package_tops = [r for r in layers.rows if "/" not in r and r not in tree.program_rows()]
    problems += [f"row {r} is not in the diagram" for r in package_tops if r not in line_of]
    problems += [f"the diagram names {n}, which has no row" for n in line_of if n not in layers.rows]
    for row in layers.rows:
        for target in sorted(layers.allowed(row)):
            low, high = _top(row), _top(target)
            if low != high and low in line_of and high in line_of and line_of[high] <= line_of[low]:
                problems.append(f"{row} may import {target}, on its own line of the diagram or above")

    edges = {r: {t for t in layers.rows[r].listed if t != layers.parent(r)} for r in layers.rows}
    state: dict[str, str] = {}

    def visit(row: str, path: list[str]) -> None:
        state[row] = "open"
        for target in sorted(edges[row]):
            if state.get(target) == "open":
                problems.append("an import loop in the table: " + " -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[row] = "done"

    for row in layers.rows:
        if row not in state:
            visit(row, [row])
    return problems


def _docstring(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text())) or ""


def listed_modules(doc: str) -> list[str]:
    """The modules a docstring lists, in order: the ``names`` before the ``:`` of "- ``a``, ``b``: ..." lines."""
    names = []
    for line in doc.splitlines():
        match = re.match(r"\s*-\s+((?:``\w+``(?:\s*(?:,|and|\+)\s*)?)+):", line)
        if match:
            names += re.findall(r"``(\w+)``", match.group(1))
    return names


def module_list_problems(tree: Tree) -> list[str]:
    """Each package folder's ``__init__`` lists exactly its modules and sub-packages."""
    folders = [p.parent for p in tree.package.rglob("__init__.py") if p.parent != tree.package]
    for row in tree.program_rows():
        top = tree.root / tree.location(row)[0]
        folders += [p.parent for p in top.rglob("__init__.py") if p.parent != top] if top.is_dir() else []
    problems = []
    for folder in sorted(set(folders)):
        if "__pycache__" in folder.parts:
            continue
        present = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        present |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        listed = set(listed_modules(_docstring(folder / "__init__.py"))) - {"__init__"}
        where = (folder / "__init__.py").relative_to(tree.root)
        if listed - present:
            problems.append(f"{where}: lists {', '.join(sorted(listed - present))}, not in the folder")
        if present - listed:
            problems.append(f"{where}: does not list {', '.join(sorted(present - listed))} (\"- ``name``: what it holds\")")
    return problems


def may_import_problems(tree: Tree) -> list[str]:
    """Each layer's docstring says what it may import: the rows of its table cell, no more, no fewer."""
    problems = []
    for row in tree.layers.rows:
        init = tree.root.joinpath(*tree.location(row), "__init__.py")
        if "/" in row or row in tree.program_rows() or not init.exists():
            continue
        doc = _docstring(init)
        match = re.search(r"\bmay import\b(.*)", doc, re.IGNORECASE | re.DOTALL)
        if not match:
            problems.append(f"{init.relative_to(tree.root)}: the docstring must say what the layer may import")
            continue
        said = re.sub(r"\([^)]*\)", "", match.group(1))
        said = re.split(r";|\.(?:\s|$)", said, maxsplit=1)[0]
        if tree.layers.rows[row].listed >= set(tree.layers.rows) - {row}:
            if "every" not in said:
                problems.append(f"{init.relative_to(tree.root)}: may import everything, says \"{said.strip()}\"")
            continue
        names = {n.removeprefix(f"{PACKAGE_NAME}.").replace(".", "/") for n in re.findall(r"``([\w.]+)``", said)}
        names &= set(tree.layers.rows)
        table = set(tree.layers.rows[row].listed)
        if names != table:
            problems.append(f"{init.relative_to(tree.root)}: says it may import {', '.join(sorted(names)) or 'nothing'}; "
                            f"the table: {', '.join(sorted(table)) or 'nothing'}")
    return problems


# ---------------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_layer_rule(rule):
    assert violations(TREE, rule) == []


def test_only_the_cli_prints():
    assert prints(TREE) == []


def test_the_table_covers_the_tree_and_runs_down_the_diagram():
    assert table_problems(TREE) == []


def test_every_package_lists_its_modules():
    assert module_list_problems(TREE) == []


def import_cycles(tree: Tree) -> list[list[str]]:
    """The package's modules that import each other in a circle, directly or through others (every
    import counts, a late one inside a function too; a module found by name through ``importlib``,
    as an engine's or a renderer's, does not), each circle's modules sorted."""
    files = [p for p in tree.files() if tree.parts(p)[0] == PACKAGE_NAME]
    names = {".".join(tree.parts(p)) for p in files}
    graph = {".".join(tree.parts(p)): sorted({m for _line, m in tree.imports(p) if m in names}) for p in files}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            found = []
            while not found or found[-1] != module:
                found.append(stack.pop())
            if len(found) > 1:
                circles.append(sorted(found))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_modules_import_each_other_in_a_circle():
    assert import_cycles(TREE) == [], "a circle of imports: move what both need below both"


def test_every_layer_says_what_it_may_import_as_the_table_does():
    assert may_import_problems(TREE) == []


def test_the_spark_job_ships_what_its_executors_import():
    """The executors import ``mm2spark`` from the zip ``pipeline.package_zip`` builds: every file of
    the package rows its table row allows must be in ``SHIPPED_MM2SPEC``, and stdlib only."""
    row = "spark/mm2spark"
    folder = ROOT.joinpath(*TREE.location(row))
    shipped = None
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SHIPPED_MM2SPEC" for t in node.targets):
                shipped = ast.literal_eval(node.value)
    assert shipped is not None, f"no SHIPPED_MM2SPEC in {folder.relative_to(ROOT)}"
    for target in sorted(LAYERS.allowed(row) - {row}):
        assert LAYERS.flag(target, "stdlib_only"), f"{row} may import {target}, which is not stdlib only"
        where = ROOT.joinpath(*TREE.location(target))
        files = sorted(where.rglob("*.py")) if where.is_dir() else [where.with_suffix(".py")]
        for path in files:
            name = path.relative_to(TREE.package).as_posix()
            assert any(fnmatch.fnmatchcase(name, p) for p in shipped), f"{name} is not in SHIPPED_MM2SPEC {shipped}"


def test_the_spark_job_modules_call_only_the_ones_listed_before():
    """mm2spark's docstring lists its modules "each calling only the ones listed before it"."""
    folder = ROOT.joinpath(*TREE.location("spark/mm2spark"))
    order = listed_modules(_docstring(folder / "__init__.py"))
    late = []
    for path in sorted(folder.glob("*.py")):
        if path.stem == "__init__" or path.stem not in order:
            continue
        for line, module in TREE.imports(path):
            parts = module.split(".")
            if parts[0] == folder.name and len(parts) > 1 and parts[1] in order and parts[1] != path.stem \
                    and order.index(parts[1]) > order.index(path.stem):
                late.append(f"{path.relative_to(ROOT)}:{line}: imports {module}, listed after {path.stem}")
    assert late == []


# A small checkout, to prove the checks can fail.
MINI_ARCHITECTURE = """# Architecture

```
 cli/                 the only layer that prints
 ops/
 plan/  render/
 live/
 spec/
 mm2/
 errors.py
```

## Subpackages

| package | holds | may import |
|---|---|---|
| `errors.py` | errors | nothing; stdlib only, no network |
| `mm2/` | rules | errors; stdlib only, no network |
| `spec/` | the model | mm2, errors (notes; in parentheses); pyyaml; no network |
| `live/` | clusters | spec |
| `render/` | files | spec, mm2; no network |
| `plan/` | the plan | spec, mm2, render, live (only `build`) |
| `ops/` | operations | spec, live |
| `ops/playbooks/` | the engine | ops (and what it may import) |
| `ops/modules/` | the modules | ops/playbooks, ops |
| `cli/` | the command line | everything |
| `spark/mm2spark/` | the job | mm2, errors |

Prose after the table.
"""


def _checkout(tmp_path: Path, files: dict[str, str], architecture: str = MINI_ARCHITECTURE) -> Tree:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return Tree(tmp_path, parse_architecture(architecture))


def test_the_rules_catch_violations(tmp_path):
    """The checks are only worth something if they can fail: a checkout that breaks each rule."""
    tree = _checkout(tmp_path, {
        "mm2spec/spec/bad.py": "from mm2spec.live import kafka\nimport confluent_kafka\nprint('x')\n",
        "mm2spec/mm2/bad.py": "import yaml\nfrom mm2spec import spec\nfrom mm2spec import errors\n",
        "mm2spec/render/bad.py": "from ..cli import main\nfrom mm2spec.live import ok\n",
        "mm2spec/plan/formats.py": "from mm2spec.live.kafka import KafkaAdmin\n",
        "mm2spec/plan/build.py": "from mm2spec.live.kafka import KafkaAdmin\nfrom mm2spec.render import bad\n",
        "mm2spec/live/ok.py": "import sys\nsys.stderr.write('x')\n",
        "mm2spec/ops/playbooks/__init__.py": "",
        "mm2spec/ops/playbooks/runner.py": "from mm2spec.ops.modules import offsets\nfrom mm2spec.spec import bad\n",
        "mm2spec/ops/modules/offsets.py": "from mm2spec.ops import playbooks\nfrom mm2spec.ops.playbooks import runner\n",
        "mm2spec/ops/drill.py": "from mm2spec.plan import build\n",
        "spark/mm2spark/__init__.py": "",
        "spark/mm2spark/pipeline.py": "from mm2spec.mm2 import bad\nfrom mm2spec.spec.model import DesiredState\n"
                                      "from mm2spark import config\n",
        "spark/mm2spark/config.py": "from mm2spec.errors import JobConfigError\n",
    })
    assert violations(tree, downward) == [
        "mm2spec/mm2/bad.py:2: imports mm2spec.spec: layer mm2 may not import spec",
        "mm2spec/ops/drill.py:1: imports mm2spec.plan.build: layer ops may not import plan",
        "mm2spec/ops/playbooks/runner.py:1: imports mm2spec.ops.modules.offsets: layer ops/playbooks may not import ops/modules",
        "mm2spec/render/bad.py:1: imports mm2spec.cli: layer render may not import cli",
        "mm2spec/render/bad.py:2: imports mm2spec.live.ok: layer render may not import live",
        "mm2spec/spec/bad.py:1: imports mm2spec.live: layer spec may not import live",
        "spark/mm2spark/pipeline.py:2: imports mm2spec.spec.model: layer spark/mm2spark may not import spec",
    ]
    assert violations(tree, cli_only_imported_by_cli) == [
        "mm2spec/render/bad.py:1: imports mm2spec.cli: only the cli imports the cli"]
    assert violations(tree, offline) == [
        "mm2spec/plan/formats.py:1: imports mm2spec.live.kafka: only plan.build reads live clusters",
        "mm2spec/spec/bad.py:2: imports confluent_kafka: layer spec must work without a network client",
    ]
    assert violations(tree, stdlib_only) == [
        "mm2spec/mm2/bad.py:1: imports yaml: mm2 is stdlib only",
        "mm2spec/mm2/bad.py:2: imports mm2spec.spec: mm2 is stdlib only",
    ]
    assert prints(tree) == ["mm2spec/live/ok.py:2: sys.stderr.write()", "mm2spec/spec/bad.py:3: print()"]
    assert import_cycles(tree) == [["mm2spec.ops.modules.offsets", "mm2spec.ops.playbooks.runner"]]


def test_the_table_checks_catch_a_bad_table(tmp_path):
    """A row of the diagram importing its neighbour, a loop between sub-rows, a missing row, a
    cell naming no row, and the folders' docstrings drifting from the folder and the table."""
    architecture = MINI_ARCHITECTURE.replace("| ops (and what it may import) |", "| ops, ops/modules |")
    architecture = architecture.replace("| spec, live |", "| spec, live, nowhere |")
    tree = _checkout(tmp_path, {
        "mm2spec/errors.py": "", "mm2spec/components.py": "",
        "mm2spec/mm2/__init__.py": '"""Rules. May import ``mm2spec.errors`` only."""\n', "mm2spec/mm2/policy.py": "",
        "mm2spec/spec/__init__.py": '"""The model.\n\n- ``model``, ``load``: what is read\n\nMay import ``mm2``."""\n',
        "mm2spec/spec/model.py": "",
        "mm2spec/ops/__init__.py": '"""Operations.\n\n- ``playbooks``, ``modules``: the engine, the modules\n\n'
                                   'May import ``spec``, ``live`` (and ``nowhere``); never ``cli``."""\n',
        "mm2spec/ops/modules/__init__.py": '"""- ``offsets``: the offsets"""\n', "mm2spec/ops/modules/offsets.py": "",
        "mm2spec/ops/playbooks/__init__.py": '"""- ``__init__``: the engine"""\n',
        "mm2spec/cli/__init__.py": '"""The cli. May import every other layer."""\n',
        "spark/mm2spark/__init__.py": '"""- ``config``: the config\n- ``pipeline``: the queries"""\n',
        "spark/mm2spark/config.py": "", "spark/mirror_job.py": "",
    }, architecture)
    assert table_problems(tree) == [
        "row ops may import nowhere, which is no row of the table",
        "row live names nothing in the tree",
        "row render names nothing in the tree",
        "row plan names nothing in the tree",
        "mm2spec/components has no row in the table",
        "spark/mirror_job.py is in no row of the table",
        "plan may import render, on its own line of the diagram or above",
        "an import loop in the table: ops/playbooks -> ops/modules -> ops/playbooks",
    ]
    assert module_list_problems(tree) == [
        "mm2spec/mm2/__init__.py: does not list policy (\"- ``name``: what it holds\")",
        "mm2spec/spec/__init__.py: lists load, not in the folder",
        "spark/mm2spark/__init__.py: lists pipeline, not in the folder",
    ]
    assert may_import_problems(tree) == [
        "mm2spec/spec/__init__.py: says it may import mm2; the table: errors, mm2",
    ]
