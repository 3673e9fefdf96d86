"""The ``+ & | ^ ~`` operators of data models, and the same operations as methods.

On values (DataModel instances, :class:`JsonDataModel`, ``None``) they
compute the result now, following synalinks' table:

| a    | b    | a + b  | a & b  | a \\| b | a ^ b |
|------|------|--------|--------|---------|-------|
| data | data | merged | merged | merged  | None  |
| data | None | error  | None   | a       | a     |
| None | data | error  | None   | b       | b     |
| None | None | error  | None   | None    | None  |

and ``~a`` is always None. On symbolic data models (or DataModel classes)
they add a step to the program being built instead; the modules layer
registers that handler (core does not know about modules).
"""

from __future__ import annotations

from typing import Any, Callable

from promptgym.core import json_ops

SymbolicHandler = Callable[..., Any]
_symbolic_handler: SymbolicHandler | None = None

BINARY = ("concat", "logical_and", "logical_or", "logical_xor")


def register_symbolic_handler(handler: SymbolicHandler) -> None:
    """``handler(op_name, operands, **options)`` builds the symbolic result (set by promptgym.modules)."""
    global _symbolic_handler
    _symbolic_handler = handler


def is_symbolic(value: Any) -> bool:
    """A symbolic data model, or a DataModel class (a type, not a value)."""
    # circle: DataModel and JsonDataModel inherit the operator mixins of this module (see is_symbolic, compute)
    from promptgym.core.data_model import is_data_model_class

    return bool(getattr(value, "_promptgym_symbolic", False)) or is_data_model_class(value)


def _symbolic(op: str, operands: list[Any], **options: Any) -> Any:
    if _symbolic_handler is None:
        raise RuntimeError("symbolic data model operations need promptgym.modules: `import promptgym` first")
    return _symbolic_handler(op, operands, **options)


def to_symbolic(data_model: Any, name: str | None = None) -> Any:
    """A free symbolic data model of a DataModel class (built by the modules layer)."""
    return _symbolic("to_symbolic", [data_model], name=name)


def to_json_value(value: Any) -> Any:
    """A value as a JsonDataModel (None stays None)."""
    from promptgym.core.json_data_model import JsonDataModel  # circle: JsonDataModel inherits this module's mixins

    if value is None or isinstance(value, JsonDataModel):
        return value
    return JsonDataModel(data_model=value)


def _merge(a: Any, b: Any, name: str | None = None) -> Any:
    from promptgym.core.json_data_model import JsonDataModel  # circle: JsonDataModel inherits this module's mixins

    return JsonDataModel(json=json_ops.concatenate_json(a.get_json(), b.get_json()),
                         schema=json_ops.concatenate_schema(a.get_schema(), b.get_schema()), name=name)


def compute(op: str, operands: list[Any], name: str | None = None, **options: Any) -> Any:
    """The value of ``op`` on concrete operands (``None`` allowed where the table allows it)."""
    values = [to_json_value(value) for value in operands]
    if op in BINARY:
        a, b = values
        if op == "concat":
            if a is None or b is None:
                raise ValueError(f"Received x1={a} and x2={b}: concatenation needs two data models")
            return _merge(a, b, name)
        if op == "logical_and":
            return _merge(a, b, name) if a is not None and b is not None else None
        if op == "logical_or":
            if a is not None and b is not None:
                return _merge(a, b, name)
            return a if a is not None else b
        return (a if b is None else b if a is None else None)
    (x,) = values
    if op == "logical_not" or x is None:
        return None
    from promptgym.core.json_data_model import JsonDataModel  # circle: JsonDataModel inherits this module's mixins

    json_op, schema_op = _UNARY[op]
    return JsonDataModel(json=json_op(x.get_json(), **options), schema=schema_op(x.get_schema(), **options), name=name)


_UNARY: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "factorize": (json_ops.factorize_json, json_ops.factorize_schema),
    "in_mask": (json_ops.in_mask_json, json_ops.in_mask_schema),
    "out_mask": (json_ops.out_mask_json, json_ops.out_mask_schema),
    "prefix": (json_ops.prefix_json, json_ops.prefix_schema),
    "suffix": (json_ops.suffix_json, json_ops.suffix_schema),
}


def apply(op: str, *operands: Any, **options: Any) -> Any:
    """``op`` on operands: symbolic if any operand is, else computed now."""
    if any(is_symbolic(value) for value in operands):
        return _symbolic(op, list(operands), **options)
    return compute(op, list(operands), **options)


class DataModelOperators:
    """``+ & | ^ ~`` for values and symbolic data models alike."""

    def __add__(self, other: Any) -> Any:
        return apply("concat", self, other)

    def __radd__(self, other: Any) -> Any:
        return apply("concat", other, self)

    def __and__(self, other: Any) -> Any:
        return apply("logical_and", self, other)

    def __rand__(self, other: Any) -> Any:
        return apply("logical_and", other, self)

    def __or__(self, other: Any) -> Any:
        return apply("logical_or", self, other)

    def __ror__(self, other: Any) -> Any:
        return apply("logical_or", other, self)

    def __xor__(self, other: Any) -> Any:
        return apply("logical_xor", self, other)

    def __rxor__(self, other: Any) -> Any:
        return apply("logical_xor", other, self)

    def __invert__(self) -> Any:
        return apply("logical_not", self)


class JsonOperations:
    """The JSON operations as methods (on JsonDataModel, SymbolicDataModel and DataModel classes)."""

    def factorize(self) -> Any:
        """Fields sharing a base name (``answer``, ``answer_1``) become one list (``answers``)."""
        return apply("factorize", self)

    def in_mask(self, mask: list[str] | None = None, pattern: str | None = None, recursive: bool = True) -> Any:
        """Only the fields named in ``mask`` (base names, so ``answer`` keeps ``answer_1`` too)."""
        return apply("in_mask", self, mask=mask, pattern=pattern, recursive=recursive)

    def out_mask(self, mask: list[str] | None = None, pattern: str | None = None, recursive: bool = True) -> Any:
        """Every field but those named in ``mask``."""
        return apply("out_mask", self, mask=mask, pattern=pattern, recursive=recursive)

    def prefix(self, prefix: str) -> Any:
        return apply("prefix", self, prefix=prefix)

    def suffix(self, suffix: str) -> Any:
        return apply("suffix", self, suffix=suffix)
