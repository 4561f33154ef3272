"""Per-environment overlays: JSON Merge Patch (RFC 7386) on positioned trees, lists of named items by name.

Merging happens on ``mm2spec.spec.document`` nodes, not on plain dicts, so every merged value keeps the
source position of whichever document (base or overlay) set it.
"""

from __future__ import annotations

import copy

from mm2spec.spec.document import Mapping, Node, Scalar, Sequence


def item_name(node: Node, list_key: str | None) -> str | None:
    """The name a list item merges by: its ``name``, or for mirrors the default ``<source>-to-<target>``."""
    if not isinstance(node, Mapping):
        return None
    name = node.entries.get("name")
    if isinstance(name, Scalar) and isinstance(name.value, str):
        return name.value
    if list_key == "mirrors":
        source, target = node.entries.get("source"), node.entries.get("target")
        if isinstance(source, Scalar) and isinstance(target, Scalar):
            return f"{source.value}-to-{target.value}"
    return None


def _is_named_list(node: Node, list_key: str | None) -> bool:
    return (
        isinstance(node, Sequence)
        and bool(node.items)
        and all(item_name(item, list_key) is not None for item in node.items)
    )


def merge(target: Node | None, patch: Node, list_key: str | None = None) -> Node | None:
    """RFC 7386 merge of ``patch`` over ``target``; returns None when the patch deletes the value.

    Exception to RFC 7386 (the DR spec's rule for environments): when both sides are lists whose
    items all have names, items merge by name (an overlay entry patches the base entry of the same
    name, new names are appended) instead of the overlay list replacing the base list.
    """
    if isinstance(patch, Scalar) and patch.value is None:
        return None
    if isinstance(patch, Mapping):
        result = Mapping({}, patch.pos, {})
        if isinstance(target, Mapping):
            result = Mapping(dict(target.entries), target.pos, dict(target.key_pos))
        for key, value in patch.entries.items():
            merged = merge(result.entries.get(key), value, list_key=key)
            if merged is None:
                result.entries.pop(key, None)
                result.key_pos.pop(key, None)
            else:
                result.entries[key] = merged
                result.key_pos[key] = patch.key_pos.get(key, value.pos)
        return result
    if (
        isinstance(patch, Sequence)
        and isinstance(target, Sequence)
        and _is_named_list(patch, list_key)
        and _is_named_list(target, list_key)
    ):
        items = list(target.items)
        index = {item_name(item, list_key): i for i, item in enumerate(items)}
        for item in patch.items:
            name = item_name(item, list_key)
            if name in index:
                items[index[name]] = merge(items[index[name]], item)
            else:
                index[name] = len(items)
                items.append(_strip_nulls(item))
        return Sequence(items, target.pos)
    return _strip_nulls(patch)


def _strip_nulls(node: Node) -> Node:
    """A value that is added (not merged) keeps no null members: RFC 7386 drops them too."""
    if isinstance(node, Mapping):
        kept = {k: _strip_nulls(v) for k, v in node.entries.items() if not (isinstance(v, Scalar) and v.value is None)}
        return Mapping(kept, node.pos, {k: p for k, p in node.key_pos.items() if k in kept})
    return copy.copy(node)
