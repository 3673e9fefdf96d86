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
from promptgym.core.operators import compute, to_json_value
from promptgym.core.tree import map_structure
from promptgym.modules.module import Module
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
