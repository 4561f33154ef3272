"""The layers of ARCHITECTURE.md, checked: which subpackage may import which, and who may print.

Every import statement in the package is read (module level and inside functions alike), so a
late import cannot slip past. A rule that fails names the file, the line and the import.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mm2spec"

# Libraries that talk to a network or drive an engine.
NETWORK = ("confluent_kafka", "urllib.request", "http.client", "socket", "requests", "pulumi", "pyspark")

# layer -> the mm2spec layers it must never import ("layers call only downward"); "*": none at all.
FORBIDDEN = {
    "errors": {"*"},
    "components": {"mm2", "spec", "live", "plan", "render", "runtime", "provision", "dev", "ops", "cli"},
    "resources": {"*"},
    "mm2": {"components", "resources", "spec", "live", "plan", "render", "runtime", "provision", "dev", "ops", "cli"},
    "spec": {"live", "plan", "render", "runtime", "provision", "dev", "ops", "cli"},
    "render": {"live", "plan", "runtime", "provision", "dev", "ops", "cli"},
    "live": {"plan", "render", "runtime", "provision", "dev", "ops", "cli"},
    "plan": {"runtime", "provision", "dev", "ops", "cli"},
    "runtime": {"plan", "provision", "dev", "ops", "cli"},
    "provision": {"dev", "ops", "cli"},
    "dev": {"plan", "provision", "ops", "cli"},
    "ops": {"provision", "dev", "cli"},
    "cli": set(),
}
# Stdlib only (and the layers FORBIDDEN leaves them): the Spark job's executors import mm2 and
# errors; every layer imports these three.
STDLIB_ONLY = ("errors", "mm2", "components", "resources")
# Layers that must work offline: no network client library imported, not even late.
OFFLINE = ("spec", "mm2", "render", "errors", "components", "resources")
# Modules of plan/ that import no client library (the plan formats and the diff work offline).
OFFLINE_PLAN = ("desired", "diff", "model", "formats", "__init__")


def _layer(path: Path, package: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return parts[0]


def _modules(package: Path) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path, package: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in a file; relative imports resolved."""
    here = ".".join(("mm2spec",) + path.relative_to(package).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            found.append((node.lineno, module))
            if module == "mm2spec":  # `from mm2spec import x` imports the submodule mm2spec.x
                found += [(node.lineno, f"mm2spec.{alias.name}") for alias in node.names]
    return found


def _is(module: str, names) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def _target_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "mm2spec" and len(parts) > 1 else None


def downward(path: Path, module: str, package: Path) -> str | None:
    layer, target = _layer(path, package), _target_layer(module)
    if target is None or target == layer:
        return None
    forbidden = FORBIDDEN.get(layer, set())
    return f"layer {layer} may not import {target}" if "*" in forbidden or target in forbidden else None


def cli_only_imported_by_cli(path: Path, module: str, package: Path) -> str | None:
    if _layer(path, package) != "cli" and _target_layer(module) == "cli":
        return "only the cli imports the cli"
    return None


def offline(path: Path, module: str, package: Path) -> str | None:
    layer = _layer(path, package)
    if layer in OFFLINE and _is(module, NETWORK):
        return f"layer {layer} must work without a network client"
    if layer == "plan" and path.stem in OFFLINE_PLAN:
        if _is(module, NETWORK) or (_is(module, ["mm2spec.live"]) and module != "mm2spec.live.types"):
            return "only plan.build reads live clusters"
    return None


def stdlib_only(path: Path, module: str, package: Path) -> str | None:
    layer = _layer(path, package)
    if layer not in STDLIB_ONLY:
        return None
    top = module.split(".")[0]
    if top == "mm2spec":
        return downward(path, module, package) and f"{layer} is stdlib only"
    return None if top in sys.stdlib_module_names or top == "__future__" else f"{layer} is stdlib only"


RULES = (downward, cli_only_imported_by_cli, offline, stdlib_only)


def violations(package: Path, rule) -> list[str]:
    out = []
    for path in _modules(package):
        for line, module in _imports(path, package):
            problem = rule(path, module, package)
            if problem:
                out.append(f"{path.relative_to(package.parent)}:{line}: imports {module}: {problem}")
    return out


def prints(package: Path) -> list[str]:
    """print() / input() / sys.stdout|stderr.* outside the cli."""
    found = []
    for path in _modules(package):
        if _layer(path, package) == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("print", "input"):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {func.id}()")
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                  and isinstance(func.value.value, ast.Name) and func.value.value.id == "sys"
                  and func.value.attr in ("stdout", "stderr")):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}: sys.{func.value.attr}.{func.attr}()")
    return found


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_layer_rule(rule):
    assert violations(PACKAGE, rule) == []


def test_only_the_cli_prints():
    assert prints(PACKAGE) == []


def test_every_subpackage_says_what_it_holds_and_may_import():
    subpackages = sorted(PACKAGE.glob("*/__init__.py"))
    for init in subpackages:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert re.search(r"\bmay import\b", doc, re.IGNORECASE), \
            f"{init.relative_to(ROOT)}: the docstring must say what the layer may import"
    # Every subpackage has a rule, and every rule a subpackage (or top-level module).
    layers = {p.parent.name for p in subpackages} | {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert layers == set(FORBIDDEN)


def test_the_rules_catch_violations(tmp_path):
    """The checks are only worth something if they can fail: a package that breaks each rule."""
    package = tmp_path / "mm2spec"
    files = {
        "spec/bad.py": "from mm2spec.live import kafka\nimport confluent_kafka\nprint('x')\n",
        "mm2/bad.py": "import yaml\nfrom mm2spec import spec\nfrom mm2spec import errors\n",
        "render/bad.py": "from ..cli import main\n",
        "plan/formats.py": "from mm2spec.live.kafka import KafkaAdmin\n",
        "live/ok.py": "import sys\nsys.stderr.write('x')\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert violations(package, downward) == [
        "mm2spec/mm2/bad.py:2: imports mm2spec.spec: layer mm2 may not import spec",
        "mm2spec/render/bad.py:1: imports mm2spec.cli: layer render may not import cli",
        "mm2spec/spec/bad.py:1: imports mm2spec.live: layer spec may not import live",
    ]
    assert violations(package, cli_only_imported_by_cli) == [
        "mm2spec/render/bad.py:1: imports mm2spec.cli: only the cli imports the cli"]
    assert violations(package, offline) == [
        "mm2spec/plan/formats.py:1: imports mm2spec.live.kafka: only plan.build reads live clusters",
        "mm2spec/spec/bad.py:2: imports confluent_kafka: layer spec must work without a network client",
    ]
    assert violations(package, stdlib_only) == [
        "mm2spec/mm2/bad.py:1: imports yaml: mm2 is stdlib only",
        "mm2spec/mm2/bad.py:2: imports mm2spec.spec: mm2 is stdlib only",
    ]
    assert prints(package) == ["mm2spec/live/ok.py:2: sys.stderr.write()", "mm2spec/spec/bad.py:3: print()"]
