"""Every field of the DR spec's JSON Schema, and values of every other type to put there.

The semantic rules, overlay merging and the commands run on documents the schema has already
refused (every problem is reported at once), so each must take any shape at any field: a mapping
where a string belongs, an int where a list belongs. ``field_paths`` lists each field once, read
from the schema itself so a new field is covered the day it is added; ``TYPE_CHANGES`` are the
values put there (``tests/unit/test_fuzz.py`` and ``test_rules_any_shape.py``).
"""

from __future__ import annotations

from functools import lru_cache

from mm2spec.spec.schema import schema

TYPE_CHANGES = [{"k": "v"}, {}, {"k": {"x": [1]}}, ["x"], [], [{"k": 1}], [7, None], 7, -1, 0, 2.5, "x", "", None,
                True, False]
"""A mapping, a list, an int, a float, a string, null and a bool, empty and not, with other types inside."""

ALIASES = {("clusters",): "primary"}
"""The name a free-form mapping's entry gets (clusters by alias); other maps get "x"."""
MAX_DEPTH = 8


def _resolved(node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


@lru_cache(maxsize=1)
def field_paths() -> tuple[tuple, ...]:
    """Every field path of the schema (list items at index 0, map entries under one name), parents
    before children; ``environments`` excluded (an overlay is every other path under environments/ENV)."""
    found: list[tuple] = []

    def walk(node: dict, prefix: tuple) -> None:
        node = _resolved(node)
        if not isinstance(node, dict) or len(prefix) > MAX_DEPTH:
            return
        children = [(key, sub) for key, sub in node.get("properties", {}).items()]
        entry = node.get("additionalProperties")
        if isinstance(entry, dict):  # a map: clusters by alias, configs by key
            children.append((ALIASES.get(prefix, "x"), entry))
        if isinstance(node.get("items"), dict):
            children.append((0, node["items"]))
        for combined in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(combined, []):
                walk(sub, prefix)
        for key, sub in children:
            path = prefix + (key,)
            if path == ("environments",):
                continue
            if path not in found:
                found.append(path)
            walk(sub, path)

    walk(schema(), ())
    return tuple(found)


def put(tree: dict, path: tuple, value) -> bool:
    """Set ``path`` in ``tree`` to ``value`` (None too: null, not a deletion), making what is missing on
    the way (a list where the next part is an index, else a mapping) or a scalar there; False when the
    path runs through a list at an index past its end."""
    node = tree
    for part, following in zip(path[:-1], path[1:]):
        fresh = [] if isinstance(following, int) else {}
        if isinstance(node, dict) and not isinstance(part, int):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = fresh
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part <= len(node):
            if part == len(node):
                node.append(fresh)
            elif not isinstance(node[part], (dict, list)):
                node[part] = fresh
            node = node[part]
        else:
            return False
    last = path[-1]
    if isinstance(node, dict) and not isinstance(last, int):
        node[last] = value
    elif isinstance(node, list) and isinstance(last, int) and last <= len(node):
        node[last:last + 1] = [value]
    else:
        return False
    return True
