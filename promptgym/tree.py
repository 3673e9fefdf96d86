"""``promptgym.tree`` (synalinks' ``synalinks.tree``): walking nested lists, tuples and dicts of values.

>>> from promptgym import tree
>>> tree.flatten({"b": 2, "a": [1, None]})
[1, None, 2]
>>> tree.map_structure(str, (1, [2]))
('1', ['2'])
>>> tree.pack_sequence_as({"a": 0, "b": 0}, ["x", "y"])
{'a': 'x', 'b': 'y'}
"""

from __future__ import annotations

from typing import Any

from promptgym.core.tree import flatten, is_nested, map_structure, pack_as

pack_sequence_as = pack_as


def assert_same_structure(a: Any, b: Any) -> None:
    """Raise ValueError when ``a`` and ``b`` are not nested the same way (their leaves may differ)."""
    def shape(node: Any) -> Any:
        if isinstance(node, dict):
            return ("dict", tuple(sorted(node)), tuple(shape(node[key]) for key in sorted(node)))
        if isinstance(node, (list, tuple)):
            return ("sequence", tuple(shape(child) for child in node))
        return "leaf"

    if shape(a) != shape(b):
        raise ValueError(f"the two structures differ: {a!r} and {b!r}")


def lists_to_tuples(structure: Any) -> Any:
    """``structure`` with every list turned into a tuple."""
    if isinstance(structure, dict):
        return {key: lists_to_tuples(value) for key, value in structure.items()}
    if isinstance(structure, (list, tuple)):
        return tuple(lists_to_tuples(value) for value in structure)
    return structure


__all__ = ["assert_same_structure", "flatten", "is_nested", "lists_to_tuples", "map_structure", "pack_sequence_as"]
