"""Nested structures of values: lists, tuples and dicts of leaves.

A program's inputs and outputs may be one value, a list, a tuple or a dict
of them (``Program(inputs={"a": x, "b": y}, ...)``); these helpers walk such
structures the same way everywhere::

    flatten({"b": 2, "a": [1, None]})            # [1, None, 2] (keys in sorted order)
    map_structure(str, (1, [2]))                  # ("1", ["2"])
    pack_as({"a": 0, "b": 0}, ["x", "y"])         # {"a": "x", "b": "y"}

Dicts are visited in sorted key order, so flattening is deterministic.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator


def is_nested(value: Any) -> bool:
    """A list, tuple or dict; a dict that is a data model's JSON view (``get_json()``) is a leaf."""
    return isinstance(value, (list, tuple, dict)) and not callable(getattr(value, "get_json", None))


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value[key] for key in sorted(value)]
    return list(value)


def _leaves(value: Any) -> Iterator[Any]:
    if is_nested(value):
        for child in _children(value):
            yield from _leaves(child)
    else:
        yield value


def flatten(structure: Any) -> list[Any]:
    """The leaves of ``structure``, depth first (a leaf alone gives ``[leaf]``)."""
    return list(_leaves(structure))


def map_structure(function: Callable[[Any], Any], structure: Any) -> Any:
    """``structure`` with ``function`` applied to every leaf."""
    return pack_as(structure, [function(leaf) for leaf in flatten(structure)])


def pack_as(structure: Any, leaves: list[Any]) -> Any:
    """The values ``leaves`` arranged like ``structure`` (the inverse of :func:`flatten`)."""
    iterator = iter(leaves)

    def build(node: Any) -> Any:
        if not is_nested(node):
            return next(iterator)
        if isinstance(node, dict):
            built = {key: build(node[key]) for key in sorted(node)}
            return {key: built[key] for key in node}
        if isinstance(node, (list, tuple)):
            items = [build(child) for child in node]
            return type(node)(items) if isinstance(node, tuple) and not hasattr(node, "_fields") else \
                (type(node)(*items) if isinstance(node, tuple) else items)
        return next(iterator)

    result = build(structure)
    if next(iterator, _END) is not _END:
        raise ValueError("pack_as: more leaves than the structure has places")
    return result


_END = object()
