"""YAML documents that remember where every value came from.

A DR spec is loaded into a tree of ``Node`` objects (maps, sequences, scalars), each carrying the
file, line and column it was written at. Environment overlays are merged on this tree (see
``mm2spec.spec.overlay``), so after merging every value still points at the line that set it: an error
in the ``dev`` environment points into the ``environments.dev`` block, not at the base value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from mm2spec.errors import SpecSyntaxError, SpecUnreadable


@dataclass(frozen=True)
class Position:
    """A place in a source file: 1-based line and column."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass
class Scalar:
    value: Any
    pos: Position


@dataclass
class Sequence:
    items: list["Node"]
    pos: Position


@dataclass
class Mapping:
    # Insertion-ordered; key positions are kept so an unknown key can be pointed at exactly.
    entries: dict[str, "Node"]
    pos: Position
    key_pos: dict[str, Position] = field(default_factory=dict)


Node = Union[Scalar, Sequence, Mapping]


def _pos(file: str, mark: yaml.Mark) -> Position:
    return Position(file, mark.line + 1, mark.column + 1)


def _build(node: yaml.Node, file: str) -> Node:
    pos = _pos(file, node.start_mark)
    if isinstance(node, yaml.MappingNode):
        mapping = Mapping({}, pos)
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise SpecSyntaxError(_pos(file, key_node.start_mark), "YAML merge keys (<<) are not supported")
            key = yaml.constructor.SafeConstructor().construct_object(key_node)
            if not isinstance(key, str):
                # JSON Schema only knows string keys; YAML would turn `1:` or `true:` into other types.
                key = str(key) if not isinstance(key, bool) else str(key).lower()
            if key in mapping.entries:
                raise SpecSyntaxError(_pos(file, key_node.start_mark), f'duplicate key "{key}"')
            mapping.entries[key] = _build(value_node, file)
            mapping.key_pos[key] = _pos(file, key_node.start_mark)
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return Sequence([_build(item, file) for item in node.value], pos)
    value = yaml.constructor.SafeConstructor().construct_object(node)
    if hasattr(value, "isoformat"):
        # Dates and timestamps: the spec has none, keep the text so the schema reports the type.
        value = node.value
    return Scalar(value, pos)


def parse(text: str, file: str = "<string>") -> Node:
    """Parse YAML text into a positioned tree; syntax errors carry their line and column."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _pos(file, mark) if mark else Position(file, 1, 1)
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise SpecSyntaxError(where, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:  # pragma: no cover - yaml raises marked errors for text input
        raise SpecSyntaxError(Position(file, 1, 1), f"YAML error: {exc}") from None
    if root is None:
        raise SpecSyntaxError(Position(file, 1, 1), "the file is empty: expected a DR spec mapping")
    tree = _build(root, file)
    if not isinstance(tree, Mapping):
        raise SpecSyntaxError(tree.pos, "expected a mapping at the top level (apiVersion, kind, clusters, ...)")
    return tree


def load_file(path: str | Path) -> Node:
    """Read and parse a spec file; a missing or unreadable file is a clear error."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecUnreadable(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpecUnreadable(f"{path}: is a directory, expected a DR spec YAML file") from None
    except UnicodeDecodeError as exc:
        raise SpecUnreadable(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SpecUnreadable(f"{path}: cannot read: {exc.strerror}") from None
    return parse(text, str(path))


def to_plain(node: Node) -> Any:
    """The tree as plain Python data (dicts, lists, scalars) for JSON Schema validation."""
    if isinstance(node, Mapping):
        return {key: to_plain(value) for key, value in node.entries.items()}
    if isinstance(node, Sequence):
        return [to_plain(item) for item in node.items]
    return node.value


def escape_pointer_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer(path: list[str | int] | tuple) -> str:
    """A JSON Pointer (RFC 6901) for a path of keys and indexes; the root is ``""`` shown as ``/``."""
    return "".join("/" + escape_pointer_token(str(part)) for part in path) or "/"


def locate(root: Node, path: list[str | int] | tuple, key: bool = False) -> Position:
    """The source position of the value at ``path`` (or of its key, with ``key=True``).

    Walks as deep as the path exists and returns the deepest position found, so an error about a
    missing child points at its parent.
    """
    node = root
    where = root.pos
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, Mapping) and isinstance(part, str) and part in node.entries:
            if last and key:
                return node.key_pos.get(part, node.entries[part].pos)
            node = node.entries[part]
        elif isinstance(node, Sequence) and isinstance(part, int) and 0 <= part < len(node.items):
            node = node.items[part]
        else:
            break
        where = node.pos
    return where
