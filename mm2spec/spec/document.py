"""YAML documents that remember where every value came from.

A DR spec is loaded into a tree of ``Node`` objects (maps, sequences, scalars), each carrying the
file, line and column it was written at. Environment overlays are merged on this tree (see
``mm2spec.spec.overlay``), so after merging every value still points at the line that set it: an error
in the ``dev`` environment points into the ``environments.dev`` block, not at the base value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Union

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


MAX_DEPTH = 64
"""Deepest nesting of lists and mappings a spec may have. A DR spec is about eight levels deep (an
overlay adds two); the limit keeps every recursive walk (composing, merging, the schema) far from
Python's recursion limit."""
MAX_NODES = 500_000
"""Most values a spec may expand to, aliases counted at every use: a spec of 50,000 topics is
50,000 values, while a YAML alias bomb (anchors referring to anchors) expands exponentially."""
MAX_INT = 2**63
"""Numbers are Java longs at most in Kafka configs; larger ones cannot mean anything here."""

_STR, _INT, _FLOAT, _BOOL, _NULL, _SEQ, _MAP = (f"tag:yaml.org,2002:{t}" for t in
                                                 ("str", "int", "float", "bool", "null", "seq", "map"))
_MERGE = "tag:yaml.org,2002:merge"
# Implicit YAML 1.1 types a spec has no use for: kept as the text written, so the schema reports a type.
_AS_TEXT = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}
_CONSTRUCT = {_INT: "construct_yaml_int", _FLOAT: "construct_yaml_float", _BOOL: "construct_yaml_bool",
              _NULL: "construct_yaml_null"}
_UNPRINTABLE_IN_VALUES = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _pos(file: str, mark: yaml.Mark) -> Position:
    return Position(file, mark.line + 1, mark.column + 1)


def printable(text: str) -> str:
    """``text`` with control, format and separator characters escaped (``\\n``, ``\\x1b``, ``\\u202e``), so
    a value echoed in a message cannot start a forged ``FILE:LINE:COL`` line or reorder the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _tag_name(tag: str) -> str:
    return printable("!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag)[:60]


class _BudgetedComposer(yaml.composer.Composer):
    """PyYAML's composer with budgets: nesting depth, and values counted through aliases.

    Sizes are computed bottom-up as nodes are composed, so an alias bomb is refused from the size it
    would expand to, without expanding it; an alias to a node that contains it has no size yet.
    Mixed with a parser (libyaml's, or PyYAML's own) and the safe resolver."""

    def start(self, file: str) -> None:
        self.file = file
        self.depth = 0
        self.sizes: dict[int, int] = {}

    def compose_node(self, parent, index):
        start = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self.sizes:
                raise SpecSyntaxError(_pos(self.file, start), "an alias refers to the value that contains it")
            return node
        if self.depth >= MAX_DEPTH:
            raise SpecSyntaxError(_pos(self.file, start),
                                  f"nested more than {MAX_DEPTH} levels deep: a DR spec is far flatter")
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        self.sizes[id(node)] = self._size(node, start)
        return node

    def _size(self, node: yaml.Node, start: yaml.Mark) -> int:
        if isinstance(node, yaml.ScalarNode):
            return 1
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
        size = 1 + sum(self.sizes[id(child)] for child in children)
        if size > MAX_NODES:
            raise SpecSyntaxError(_pos(self.file, start), f"expands to more than {MAX_NODES} values "
                                  "(YAML aliases counted at every use): write the spec out plainly")
        return size


def _key(key_node: yaml.Node, file: str) -> str:
    """A mapping key: a plain string; everything YAML would make into something else is refused."""
    where = _pos(file, key_node.start_mark)
    if key_node.tag == _MERGE:
        raise SpecSyntaxError(where, "YAML merge keys (<<) are not supported: write the values out")
    if not isinstance(key_node, yaml.ScalarNode):
        raise SpecSyntaxError(where, "a list or mapping cannot be a key: keys are names")
    if key_node.tag != _STR:
        raise SpecSyntaxError(where, f'key {printable(key_node.value)[:60]} is read as {_tag_name(key_node.tag)}, '
                              f'not a name: quote it ("{printable(key_node.value)[:60]}")')
    if not key_node.value.isprintable():
        raise SpecSyntaxError(where, f'key "{printable(key_node.value)[:60]}" holds a control character: remove it')
    return key_node.value


def _scalar(node: yaml.ScalarNode, file: str) -> Any:
    """A scalar's value: strings, finite numbers, booleans and null; other tags are refused without
    echoing the value (it may be a secret written in the wrong place)."""
    where = _pos(file, node.start_mark)
    if node.tag in (_STR, *_AS_TEXT):
        if _UNPRINTABLE_IN_VALUES.search(node.value):
            raise SpecSyntaxError(where, "the value holds a control character or an invalid code point: remove it")
        return node.value
    if node.tag not in _CONSTRUCT:
        raise SpecSyntaxError(where, f"YAML tag {_tag_name(node.tag)} is not allowed in a DR spec: "
                              "write a plain string, number, boolean or null")
    try:
        value = getattr(yaml.constructor.SafeConstructor(), _CONSTRUCT[node.tag])(node)
    except (ValueError, KeyError, TypeError, OverflowError, yaml.YAMLError):
        value = ...
    if value is ... or (isinstance(value, float) and not math.isfinite(value)) or \
            (isinstance(value, int) and not isinstance(value, bool) and abs(value) >= MAX_INT):
        raise SpecSyntaxError(where, f"not a valid {_tag_name(node.tag)[2:]}: write it plainly "
                              "(numbers must be finite and fit in 64 bits)")
    return value


def _build(node: yaml.Node, file: str) -> Node:
    pos = _pos(file, node.start_mark)
    if isinstance(node, yaml.ScalarNode):
        return Scalar(_scalar(node, file), pos)
    if node.tag not in (_SEQ, _MAP):
        raise SpecSyntaxError(pos, f"YAML tag {_tag_name(node.tag)} is not allowed in a DR spec: "
                              "write a plain list or mapping")
    if isinstance(node, yaml.SequenceNode):
        return Sequence([_build(item, file) for item in node.value], pos)
    mapping = Mapping({}, pos)
    for key_node, value_node in node.value:
        key = _key(key_node, file)
        if key in mapping.entries:
            raise SpecSyntaxError(_pos(file, key_node.start_mark), f'duplicate key "{key}"')
        mapping.entries[key] = _build(value_node, file)
        mapping.key_pos[key] = _pos(file, key_node.start_mark)
    return mapping


class _PlainComposer(_BudgetedComposer, yaml.SafeLoader):
    """PyYAML's own parser: the messages of its syntax errors are the ones users see."""

    def __init__(self, text: str, file: str):
        yaml.SafeLoader.__init__(self, text)
        self.start(file)


if yaml.__with_libyaml__:
    class _FastComposer(_BudgetedComposer, yaml._yaml.CParser, yaml.resolver.Resolver):
        """libyaml's parser (C, several times faster on a spec of thousands of topics) under the
        same budgeted composer."""

        def __init__(self, text: str, file: str):
            yaml._yaml.CParser.__init__(self, text)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self.start(file)
else:  # pragma: no cover - PyYAML built without libyaml
    _FastComposer = _PlainComposer


def _compose(text: str, file: str) -> yaml.Node | None:
    """The YAML node graph of ``text``, parsed fast; a document libyaml refuses is parsed again by
    PyYAML's own parser, whose errors say more, so every YAML problem is a SpecSyntaxError with its place."""
    try:
        return _compose_with(_FastComposer, text, file)
    except yaml.YAMLError:
        return _compose_with(_PlainComposer, text, file)


def _compose_with(composer: type, text: str, file: str) -> yaml.Node | None:
    loader = None
    try:
        loader = composer(text, file)
        return loader.get_single_node()
    except yaml.YAMLError as exc:
        if composer is _FastComposer:
            raise
        _describe_yaml_error(exc, text, file)
    finally:
        if loader is not None:
            loader.dispose()


def _describe_yaml_error(exc: yaml.YAMLError, text: str, file: str) -> NoReturn:
    """Raise the SpecSyntaxError that says where ``exc`` happened and what it is."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = _pos(file, mark) if mark else Position(file, 1, 1)
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise SpecSyntaxError(where, f"YAML syntax error: {printable(problem)}") from None
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise SpecSyntaxError(Position(file, line, column),
                              f"YAML syntax error: character U+{code:04X} is not allowed") from None
    raise SpecSyntaxError(Position(file, 1, 1), "YAML syntax error") from None


def parse(text: str, file: str = "<string>") -> Node:
    """Parse YAML text into a positioned tree; syntax errors carry their line and column.

    Only what a DR spec can hold gets through: string keys, strings, finite numbers, booleans, null,
    lists and mappings, at most ``MAX_DEPTH`` deep and ``MAX_NODES`` values (aliases expanded)."""
    root = _compose(text, file)
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
