"""``mm2spec promote``: what promoting a spec from one environment to another means for the target.

Two lists, both per field of the spec (mirrors keyed by name, not index):

- **intended**: where the two environments differ because an environment overlay sets the value.
  These differences stay after promotion; they are the overlays doing their job (e.g. tasksMax).
- **carried**: what the target environment gets from this promotion: its desired state in the new
  spec against its desired state in the baseline (the spec it runs today: ``--baseline FILE`` or
  ``git:REV``, by default ``git:HEAD`` when the spec is tracked by git).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mm2spec.spec.document import Mapping, Node, Position, Sequence, load_file, parse
from mm2spec.errors import BaselineUnavailable, UnknownEnvironment
from mm2spec.spec.overlay import item_name
from mm2spec.spec.secrets import MASKED, is_sensitive_key, literal_secrets, mask
from mm2spec.spec.load import load_valid
from mm2spec.spec.validate import resolve


@dataclass(frozen=True)
class Difference:
    """One field that differs. ``old``/``new`` are None when the field is absent on that side."""

    path: str
    """The field, by a readable path: mapping keys, and named list items (mirrors) by name, e.g.
    ``/mirrors/primary-to-dr/tasksMax``; a list of values (topics) is one field."""
    old: Any
    """``from_env``'s value (intended) or the baseline's (carried); None when absent there."""
    new: Any
    """``to_env``'s value in the spec being promoted; None when absent there."""
    old_pos: Position | None
    """Where ``old`` was written; None when absent."""
    new_pos: Position | None
    """Where ``new`` was written; None when absent."""
    set_at: Position | None = None
    """For an intended difference: the overlay line that sets it."""


@dataclass(frozen=True)
class Promotion:
    """The result of comparing environments (intended) and baseline vs new spec (carried)."""

    spec: str
    """The spec file being promoted."""
    from_env: str
    """The environment promoted from (e.g. staging)."""
    to_env: str
    """The environment promoted to (e.g. prod)."""
    baseline: str | None
    """How the baseline was named (``git:HEAD``, ``git:REV`` or a file); None when there is none."""
    intended: tuple[Difference, ...]
    """Where ``from_env`` and ``to_env`` differ because an overlay sets the value: these stay."""
    carried: tuple[Difference, ...]
    """What ``to_env`` gets: its desired state in the baseline (old) against the new spec (new).
    Empty without a baseline."""

    @property
    def has_changes(self) -> bool:
        return bool(self.carried)


def _leaves(node: Node, path: str = "") -> dict[str, tuple[Any, Position]]:
    """Every scalar (and empty container) by a readable path; named list items by name."""
    if isinstance(node, Mapping):
        if not node.entries:
            return {path or "/": ({}, node.pos)}
        out: dict[str, tuple[Any, Position]] = {}
        for key, child in node.entries.items():
            out.update(_leaves(child, f"{path}/{key}"))
        return out
    if isinstance(node, Sequence):
        named = [item_name(i, path.rsplit("/", 1)[-1]) for i in node.items]
        if node.items and all(named):
            out = {}
            for name, item in zip(named, node.items):
                out.update(_leaves(item, f"{path}/{name}"))
            return out
        # Lists of values (topics, bootstrap servers) compare as one value: order is meaning.
        from mm2spec.spec.document import to_plain
        return {path: (to_plain(node), node.pos)}
    return {path: (node.value, node.pos)}


def _diff(old: dict, new: dict) -> list[Difference]:
    """The fields that differ, compared as written and kept masked: the baseline is any older spec,
    never validated, so it may hold a secret anywhere (and a YAML alias may copy one to any key)."""
    known = set().union(*(literal_secrets(leaf[0]) for leaves in (old, new) for path, leaf in leaves.items()
                          if any(is_sensitive_key(part) for part in path.split("/"))))
    diffs = []
    for path in sorted(set(old) | set(new)):
        o, n = old.get(path), new.get(path)
        if (o[0] if o else None) != (n[0] if n else None):
            diffs.append(Difference(path, _masked(path, o[0] if o else None, known),
                                    _masked(path, n[0] if n else None, known), o[1] if o else None, n[1] if n else None))
    return diffs


def _masked(path: str, value: Any, known: set) -> Any:
    """``value`` as promote may show it: hidden under a sensitive key at any depth, whatever its shape,
    and wherever it repeats a value written under one (``secrets.mask``)."""
    *parents, field = path.split("/")
    if value is not None and any(is_sensitive_key(part) for part in parents):
        return MASKED
    return mask(field, value, known)


def _key_positions(node: Node, path: str = "", out: dict | None = None) -> dict[str, Position]:
    """Where each mapping key (by readable path) was written: an overlay that deletes a field with
    null still sets its parent key, so a deletion is traced to the overlay through its ancestors."""
    out = {} if out is None else out
    if isinstance(node, Mapping):
        for key, child in node.entries.items():
            out[f"{path}/{key}"] = node.key_pos.get(key, child.pos)
            _key_positions(child, f"{path}/{key}", out)
    elif isinstance(node, Sequence):
        named = [item_name(i, path.rsplit("/", 1)[-1]) for i in node.items]
        if node.items and all(named):
            for name, item in zip(named, node.items):
                out[f"{path}/{name}"] = item.pos
                _key_positions(item, f"{path}/{name}", out)
    return out


def _nearest(path: str, keys: dict[str, Position]) -> Position | None:
    while path:
        if path in keys:
            return keys[path]
        path = path.rsplit("/", 1)[0]
    return None


def _overlay_lines(root: Node, env: str) -> tuple[str, int, int] | None:
    """(file, first line, last line) of ``environments.<env>`` in the file."""
    envs = root.entries.get("environments") if isinstance(root, Mapping) else None
    if not isinstance(envs, Mapping) or env not in envs.entries:
        return None
    overlay = envs.entries[env]
    lines = [p.line for p in _positions(overlay)] + [envs.key_pos[env].line]
    return envs.key_pos[env].file, min(lines), max(lines)


def _positions(node: Node):
    yield node.pos
    if isinstance(node, Mapping):
        yield from node.key_pos.values()
        for child in node.entries.values():
            yield from _positions(child)
    elif isinstance(node, Sequence):
        for child in node.items:
            yield from _positions(child)


def _in(pos: Position | None, span) -> bool:
    return pos is not None and span is not None and pos.file == span[0] and span[1] <= pos.line <= span[2]


def load_baseline(spec: str, baseline: str | None) -> tuple[Node | None, str | None]:
    """The baseline document and how it was named; ``git:HEAD`` by default when the spec is tracked."""
    if baseline is None:
        try:
            subprocess.run(["git", "ls-files", "--error-unmatch", Path(spec).name], cwd=Path(spec).parent or ".",
                           check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            return None, None
        baseline = "git:HEAD"
    if baseline.startswith("git:"):
        rev = baseline[4:]
        if not rev.strip():
            # git show :PATH would read the index: the staged spec, not any revision the target runs.
            raise BaselineUnavailable(f"baseline {baseline}: names no revision; write git:REV, e.g. git:HEAD "
                                      "or git:origin/main")
        try:
            top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=Path(spec).resolve().parent,
                                 check=True, capture_output=True, text=True).stdout.strip()
            relative = Path(spec).resolve().relative_to(top)
            text = subprocess.run(["git", "show", f"{rev}:{relative.as_posix()}"], cwd=top,
                                  check=True, capture_output=True, text=True).stdout
        except (OSError, ValueError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            raise BaselineUnavailable(f"baseline {baseline}: cannot read {spec} at that revision: {detail.strip()}") from None
        return parse(text, f"{spec}@{rev}"), baseline
    return load_file(baseline), baseline


def promote(spec: str, from_env: str, to_env: str, baseline: str | None = None) -> Promotion:
    """Compare ``from_env`` with ``to_env`` (intended) and the baseline's ``to_env`` with the new one (carried)."""
    root = load_valid(spec, from_env, to_env)
    from_doc, to_doc = resolve(root, from_env), resolve(root, to_env)
    source, target = _leaves(from_doc), _leaves(to_doc)
    spans = (_overlay_lines(root, from_env), _overlay_lines(root, to_env))
    keys = (_key_positions(from_doc), _key_positions(to_doc))

    def overlay_position(d: Difference) -> Position | None:
        places = [d.old_pos or _nearest(d.path, keys[0]), d.new_pos or _nearest(d.path, keys[1])]
        return next((place for place in places for span in spans if _in(place, span)), None)

    intended = [dataclasses.replace(d, set_at=overlay_position(d)) for d in _diff(source, target)
                if overlay_position(d) is not None]
    base_root, named = load_baseline(spec, baseline)
    carried: list[Difference] = []
    if base_root is not None:
        try:
            before = _leaves(resolve(base_root, to_env))
        except UnknownEnvironment:
            before = {}  # the environment is new in this spec: everything is carried
        carried = _diff(before, target)
    return Promotion(spec, from_env, to_env, named, tuple(intended), tuple(carried))


def _show(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value)


def to_text(p: Promotion) -> str:
    lines = [f"mm2spec promote: {p.spec} from {p.from_env} to {p.to_env}", ""]
    lines.append(f"Differences the overlays intend ({len(p.intended)}): they stay after promotion")
    for d in p.intended:
        where = d.set_at
        lines.append(f"  {d.path}: {p.from_env} {_show(d.old)}, {p.to_env} {_show(d.new)}  ({where})")
    lines.append("")
    if p.baseline is None:
        lines.append(f"No baseline: pass --baseline FILE or --baseline git:REV to see what {p.to_env} gets.")
    else:
        lines.append(f"Changes promotion carries to {p.to_env} (against {p.baseline}) ({len(p.carried)}):")
        for d in p.carried:
            symbol = "+" if d.old is None else "-" if d.new is None else "~"
            lines.append(f"  {symbol} {d.path}: {_show(d.old)} -> {_show(d.new)}")
        if not p.carried:
            lines.append(f"  none: {p.to_env} already has this spec")
    return "\n".join(lines) + "\n"


def to_markdown(p: Promotion) -> str:
    lines = [f"### mm2spec promote: `{p.from_env}` → `{p.to_env}`", ""]
    if p.baseline is None:
        lines.append(f"_No baseline given: pass `--baseline git:REV` to see what `{p.to_env}` gets._")
    elif p.carried:
        lines += [f"**{len(p.carried)} change(s) carried to `{p.to_env}`** (against `{p.baseline}`):", "",
                  "| field | before | after |", "|---|---|---|"]
        lines += [f"| `{d.path}` | `{_show(d.old)}` | `{_show(d.new)}` |" for d in p.carried]
    else:
        lines.append(f"**No changes for `{p.to_env}`** (against `{p.baseline}`).")
    lines += ["", f"<details><summary>{len(p.intended)} difference(s) the overlays intend</summary>", "",
              f"| field | {p.from_env} | {p.to_env} |", "|---|---|---|"]
    lines += [f"| `{d.path}` | `{_show(d.old)}` | `{_show(d.new)}` |" for d in p.intended]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def to_json(p: Promotion) -> str:
    def rows(diffs):
        return [{"path": d.path, "old": d.old, "new": d.new} for d in diffs]

    return json.dumps({"formatVersion": "mm2spec-promote/v1", "spec": p.spec, "from": p.from_env, "to": p.to_env,
                       "baseline": p.baseline, "intended": rows(p.intended), "carried": rows(p.carried),
                       "hasChanges": p.has_changes}, indent=2) + "\n"
