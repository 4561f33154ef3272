"""Validation of a DR spec: JSON Schema plus semantic rules, every error at once, each with its place.

Each problem is a ``Diagnostic`` printed as ``FILE:LINE:COL: /json/pointer: message``. The position
is where the offending value was written, in the base document or in the environment overlay that
set it. The checks live in ``schema`` (structure) and ``rules`` (meaning); this module resolves the
environments, runs both checks on each and reports every problem once. Values are echoed only where
they cannot be secrets.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Iterable

from mm2spec.errors import UnknownEnvironment
from mm2spec.spec import rules, schema
from mm2spec.spec.document import Mapping, Node, Position, Sequence, locate, pointer, printable, to_plain
from mm2spec.spec.overlay import item_name, merge


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem in a spec: where it was written, which value, what is wrong and what to do."""

    file: str
    """The file the offending value was written in."""
    line: int
    """1-based line of the value (of its key, for unknown fields and inline passwords)."""
    column: int
    """1-based column, at the same place as ``line``."""
    pointer: str
    """JSON Pointer to the value in the resolved document, e.g. ``/mirrors/0/topics/2``."""
    message: str
    """What is wrong; it echoes the value only where that cannot be a secret."""
    hint: str = ""
    """What to do about it; empty when the message says it all."""
    env: str | None = None
    """The environment that alone has the problem; None when the base has it (and so every environment)."""

    @classmethod
    def at(cls, pos: Position, path: Iterable, message: str, hint: str = "") -> "Diagnostic":
        """A diagnostic whose every part prints on one line: a key or value written with a newline
        cannot forge a second ``FILE:LINE:COL`` line."""
        return cls(printable(pos.file), pos.line, pos.column, printable(pointer(list(path))), printable(message),
                   printable(hint))

    def __str__(self) -> str:
        where = f"environment {self.env}: " if self.env else ""
        text = f"{self.file}:{self.line}:{self.column}: {self.pointer}: {where}{self.message}"
        return f"{text} ({self.hint})" if self.hint else text

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column, "pointer": self.pointer,
                "message": self.message, "hint": self.hint, "environment": self.env}


def environments(root: Node) -> list[str]:
    """Names of the environments the spec defines, in file order."""
    envs = root.entries.get("environments") if isinstance(root, Mapping) else None
    return list(envs.entries) if isinstance(envs, Mapping) else []


def resolve(root: Node, env: str | None) -> Node:
    """The document for ``env``: the base with the environment's overlay merged in (no ``environments``)."""
    assert isinstance(root, Mapping)
    base = Mapping({k: v for k, v in root.entries.items() if k != "environments"}, root.pos,
                   {k: p for k, p in root.key_pos.items() if k != "environments"})
    if env is None:
        return base
    known = environments(root)
    if env not in known:
        listed = printable(", ".join(known)) if known else "none"
        raise UnknownEnvironment(f'unknown environment "{printable(env)}": the spec defines {listed}')
    overlay = root.entries["environments"].entries[env]
    merged = merge(base, overlay) if isinstance(overlay, Mapping) else base
    return merged


def validate(root: Node, env: str | None = None, all_environments: bool = False) -> list[Diagnostic]:
    """All problems of the spec for ``env`` (or of the base and, with ``all_environments``, every environment)."""
    problems: list[Diagnostic] = []
    problems += environments_problems(root)
    targets: list[str | None] = [env] if env is not None else [None]
    if env is None and all_environments:
        targets += environments(root)
    # An error the base has shows up in every environment at the same place: it is the base's and
    # is reported once, untagged. Errors only an environment has say which environment.
    base = resolve(root, None)
    base_problems = _problems(base)
    in_base = set(base_problems)
    for name in targets:
        if name is None:
            problems += base_problems
        else:
            merged = resolve(root, name)
            problems += [d if d in in_base else dataclasses.replace(d, env=name)
                         for d in _problems(merged, _unmatched_mirrors(root, name, base, merged))]
    return sorted(set(problems))


def _problems(doc: Node, unmatched: dict[int, Diagnostic] | None = None) -> list[Diagnostic]:
    """The schema's problems, then the semantic rules', of one resolved document. A mirror of
    ``unmatched`` (merged index -> its problem) is an overlay's patch of no base mirror: its one
    problem replaces what the checks say of the incomplete flow it became."""
    unmatched = unmatched or {}
    problems: list[Diagnostic] = list(unmatched.values())

    def report(path: list, message: str, hint: str = "", key: bool = False) -> None:
        if len(path) >= 2 and path[0] == "mirrors" and path[1] in unmatched:
            return
        problems.append(Diagnostic.at(locate(doc, path, key=key), path, message, hint))

    data = to_plain(doc)
    schema.check(data, report)
    rules.check(data, report)
    return problems


def environments_problems(root: Node) -> list[Diagnostic]:
    """The ``environments`` block's own problems: the schema's (a mapping of names to overlay
    mappings) and no overlay defining environments. Resolving drops the block, so the checks of the
    resolved documents never see it."""
    problems: list[Diagnostic] = []
    if not isinstance(root, Mapping) or "environments" not in root.entries:
        return problems

    def report(path: list, message: str, hint: str = "", key: bool = False) -> None:
        if path[:1] != ["environments"]:
            return  # the rest of the document is checked once resolved
        if len(path) <= 2 and message.startswith("expected object"):
            hint = hint or ("write environments as a mapping of names to overlays, e.g. dev: {mirrors: [...]}" if
                            len(path) == 1 else "an overlay is a mapping of the fields it changes, e.g. {spark: {...}}")
        problems.append(Diagnostic.at(locate(root, path, key=key), path, message, hint))

    schema.check({"environments": to_plain(root.entries["environments"])}, report)
    envs = root.entries["environments"]
    if isinstance(envs, Mapping):
        for name, overlay in envs.entries.items():
            if isinstance(overlay, Mapping) and "environments" in overlay.entries:
                problems.append(Diagnostic.at(overlay.key_pos["environments"], ["environments", name, "environments"],
                                              "an environment overlay cannot define environments"))
    return problems


def _unmatched_mirrors(root: Node, env: str, base: Node, merged: Node) -> dict[int, Diagnostic]:
    """Overlay mirrors of ``env`` that patch no base mirror and are no flow of their own either (a
    required field is missing): a misspelt name. Keyed by their index in ``merged``."""
    overlay = root.entries["environments"].entries[env]
    patches = overlay.entries.get("mirrors") if isinstance(overlay, Mapping) else None
    if not isinstance(patches, Sequence):
        return {}
    base_mirrors = base.entries.get("mirrors") if isinstance(base, Mapping) else None
    names = [n for n in (item_name(m, "mirrors") for m in getattr(base_mirrors, "items", ())) if n is not None]
    merged_mirrors = merged.entries.get("mirrors") if isinstance(merged, Mapping) else None
    at = {item.pos: i for i, item in enumerate(getattr(merged_mirrors, "items", ()))}
    required = schema.schema()["$defs"]["mirror"]["required"]
    known = set(names)
    found = {}
    for j, patch in enumerate(patches.items):
        name = item_name(patch, "mirrors")
        if (not isinstance(patch, Mapping) or name in known or all(k in patch.entries for k in required)
                or patch.pos not in at):
            continue
        path = ["environments", env, "mirrors", j] + (["name"] if "name" in patch.entries else [])
        if name is None:
            message = "this overlay mirror has no name, so it patches no mirror of the base"
        else:
            message = f"overlay mirror {schema.show(name, [])} names no mirror of the base"
        close = (difflib.get_close_matches(name, names, n=1)
                 if isinstance(name, str) and len(name) <= schema.SUGGESTED_KEYS else [])
        patch_of = f'did you mean "{printable(close[0])}"?' if close else \
            f"a patch names the base mirror it changes: {rules.listed(names)};"
        hint = f"{patch_of} a new flow needs {', '.join(required[:-1])} and {required[-1]}"
        found[at[patch.pos]] = Diagnostic.at(locate(root, path), path, message, hint)
    return found
