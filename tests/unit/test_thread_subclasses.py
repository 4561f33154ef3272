"""A ``threading.Thread`` subclass must not assign the names Thread keeps for itself: ``self._stop =
Event()`` replaced Thread's ``_stop()`` method, which ``join()`` calls when it sees the thread end,
so stopping the Spark job's offset-sync tail raised "'Event' object is not callable" half-way
through a flow's stop (the checkpoints thread and the offset syncs' flush were skipped)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Thread's own attributes (methods and state) a subclass could shadow by assignment.
THREAD_NAMES = {name for name in vars(threading.Thread) if name.startswith("_") and not name.startswith("__")} | {
    "_target", "_name", "_args", "_kwargs", "_daemonic", "_ident", "_native_id", "_tstate_lock", "_started",
    "_is_stopped", "_initialized", "_stderr", "_invoke_excepthook"}


def _thread_subclasses(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base) in ("threading.Thread", "Thread")
                                                  for base in node.bases):
            yield node


def test_no_thread_subclass_shadows_threads_own_attributes():
    found = []
    for path in sorted([*ROOT.glob("mm2spec/**/*.py"), *ROOT.glob("spark/**/*.py"), *ROOT.glob("tests/**/*.py"),
                        *ROOT.glob("benchmarks/*.py")]):
        for cls in _thread_subclasses(ast.parse(path.read_text(), str(path))):
            for node in ast.walk(cls):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
                for target in targets:
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "self" and target.attr in THREAD_NAMES):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {cls.name}: self.{target.attr}")
    assert not found, "assignments that shadow threading.Thread's own attributes:\n" + "\n".join(found)


def test_the_check_finds_the_bug_it_is_for():
    tree = ast.parse("import threading\nclass T(threading.Thread):\n    def __init__(self):\n"
                     "        self._stop = threading.Event()\n")
    [cls] = _thread_subclasses(tree)
    assigned = [n.targets[0].attr for n in ast.walk(cls) if isinstance(n, ast.Assign)]
    assert assigned == ["_stop"] and "_stop" in THREAD_NAMES
