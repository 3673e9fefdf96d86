"""Modules that combine or reshape data models with the JSON operations of :mod:`promptgym.core.json_ops`.

They are the steps ``+ & | ^ ~`` and ``.in_mask()``... add to a program;
they call no model and have no variables. Two kinds:

- :class:`MergeOperation` joins several inputs (``Concat()([a, b, c])``), reading
  None as "this branch was not taken";
- :class:`UnaryOperation` reshapes each input of a (nested) structure on its own.
"""

from __future__ import annotations

from typing import Any

from promptgym.core import json_ops
from promptgym.core.operators import compute, register_symbolic_handler, to_json_value
from promptgym.core.tree import flatten, map_structure
from promptgym.modules.module import Module, run_sync
from promptgym.modules.symbolic import SymbolicDataModel


class MergeOperation(Module):
    """Joins a list of inputs into one data model; subclasses say how (see each one's table)."""

    accepts_none = True
    schema_rule = "concatenate"  # the output schema: "concatenate" every input's, or "first" input's

    async def call(self, inputs: Any, training: bool = False) -> Any:
        values = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        return self.merge(values)

    def merge(self, values: list[Any]) -> Any:
        raise NotImplementedError

    def concatenated(self, values: list[Any]) -> Any:
        """Every value's fields in one JsonDataModel (names made unique with ``_1``, ``_2``...)."""
        result = to_json_value(values[0])
        for value in values[1:]:
            result = compute("concat", [result, value], name=self.name)
        return result

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        values = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        schema = values[0].get_schema()
        if self.schema_rule == "concatenate":
            for value in values[1:]:
                schema = json_ops.concatenate_schema(schema, value.get_schema())
        return SymbolicDataModel(schema=schema, name=self.name)


class UnaryOperation(Module):
    """Applies one JSON operation to every input of a (nested) structure; None stays None."""

    accepts_none = True
    operation = ""

    def options(self) -> dict[str, Any]:
        return {}

    async def call(self, inputs: Any, training: bool = False) -> Any:
        return map_structure(lambda value: compute(self.operation, [value], name=self.name, **self.options()), inputs)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        schema_op = _SCHEMA_OPS[self.operation]
        return map_structure(
            lambda value: SymbolicDataModel(schema=schema_op(value.get_schema(), **self.options()), name=self.name),
            inputs)


_SCHEMA_OPS = {
    "factorize": json_ops.factorize_schema,
    "in_mask": json_ops.in_mask_schema,
    "out_mask": json_ops.out_mask_schema,
    "prefix": json_ops.prefix_schema,
    "suffix": json_ops.suffix_schema,
    "logical_not": lambda schema: schema,
}


def operation_module(op: str, name: str | None = None, description: str | None = None, **options: Any) -> Module:
    """The module that performs ``op`` (``"concat"``, ``"in_mask"``...)."""
    from promptgym.modules.masking import InMask, OutMask
    from promptgym.modules.merging import And, Concat, Or, Xor
    from promptgym.modules.reshaping import Factorize, Not, Prefix, Suffix

    classes: dict[str, type[Module]] = {
        "concat": Concat, "logical_and": And, "logical_or": Or, "logical_xor": Xor, "logical_not": Not,
        "factorize": Factorize, "in_mask": InMask, "out_mask": OutMask, "prefix": Prefix, "suffix": Suffix,
    }
    return classes[op](name=name, description=description, **options)


def _symbolic_operator(op: str, operands: list[Any], name: str | None = None, **options: Any) -> Any:
    """``a + b`` (etc.) where an operand is symbolic or a DataModel class."""
    if op == "to_symbolic":
        return SymbolicDataModel(data_model=operands[0], name=name)
    symbolic = [SymbolicDataModel(data_model=value) if isinstance(value, type) else value for value in operands]
    module = operation_module(op, name=name, **options)
    if not any(isinstance(value, SymbolicDataModel) and value.node is not None for value in symbolic):
        # only classes / free placeholders: a free placeholder of the resulting schema, no program step
        return run_sync(module._output_spec(symbolic if len(symbolic) > 1 else symbolic[0], training=False))
    inputs = symbolic if isinstance(module, MergeOperation) else symbolic[0]
    if any(value is None for value in flatten(inputs)):
        raise ValueError(f"{op}: an operand is None while building a program")
    return module.symbolic_call(inputs)


register_symbolic_handler(_symbolic_operator)
