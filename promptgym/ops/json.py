"""The JSON operations as ``async`` functions (``synalinks.ops.json``); see :mod:`promptgym.ops`."""

from __future__ import annotations

from typing import Any

from promptgym.core.operators import compute, is_symbolic
from promptgym.modules.json_operation import MergeOperation
from promptgym.modules.operator_modules import operation_module


async def _apply(op: str, operands: list[Any], name: str | None, description: str | None, **options: Any) -> Any:
    if not any(is_symbolic(value) for value in operands):
        return compute(op, operands, name=name, **options)
    module = operation_module(op, name=name, description=description, **options)
    return await module(operands if isinstance(module, MergeOperation) else operands[0])


async def concat(x1: Any, x2: Any, name: str | None = None, description: str | None = None) -> Any:
    """Both inputs' fields in one data model (names made unique with ``_1``...); None is an error."""
    return await _apply("concat", [x1, x2], name, description)


concatenate = concat


async def logical_and(x1: Any, x2: Any, name: str | None = None, description: str | None = None) -> Any:
    """Both inputs merged, or None if either is None."""
    return await _apply("logical_and", [x1, x2], name, description)


async def logical_or(x1: Any, x2: Any, name: str | None = None, description: str | None = None) -> Any:
    """The input that is not None (both merged if both are there); None if neither."""
    return await _apply("logical_or", [x1, x2], name, description)


async def logical_xor(x1: Any, x2: Any, name: str | None = None, description: str | None = None) -> Any:
    """The input that is not None if exactly one is; else None."""
    return await _apply("logical_xor", [x1, x2], name, description)


async def logical_not(x: Any, name: str | None = None, description: str | None = None) -> Any:
    """Always None (symbolically, the same schema): switches a path off."""
    return await _apply("logical_not", [x], name, description)


async def factorize(x: Any, name: str | None = None, description: str | None = None) -> Any:
    """Fields sharing a base name become one list field (``answer``, ``answer_1`` -> ``answers``)."""
    return await _apply("factorize", [x], name, description)


async def in_mask(x: Any, mask: list[str] | None = None, pattern: str | None = None, recursive: bool = True,
                  name: str | None = None, description: str | None = None) -> Any:
    """Only the fields named in ``mask`` (by base name) or matching ``pattern``."""
    return await _apply("in_mask", [x], name, description, mask=mask, pattern=pattern, recursive=recursive)


async def out_mask(x: Any, mask: list[str] | None = None, pattern: str | None = None, recursive: bool = True,
                   name: str | None = None, description: str | None = None) -> Any:
    """Every field but those named in ``mask`` (by base name) or matching ``pattern``."""
    return await _apply("out_mask", [x], name, description, mask=mask, pattern=pattern, recursive=recursive)


async def prefix(x: Any, prefix: str | None = None, name: str | None = None, description: str | None = None) -> Any:
    """Every field renamed ``<prefix>_<name>``."""
    return await _apply("prefix", [x], name, description, prefix=prefix)


async def suffix(x: Any, suffix: str | None = None, name: str | None = None, description: str | None = None) -> Any:
    """Every field renamed ``<name>_<suffix>``."""
    return await _apply("suffix", [x], name, description, suffix=suffix)
