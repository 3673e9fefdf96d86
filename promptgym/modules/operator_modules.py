"""The module each data model operator becomes, and the handler that adds it to the program being built.

``a + b`` (``& | ^ ~``, ``.in_mask()``...) on symbolic data models or DataModel
classes calls :func:`promptgym.core.operators.apply`, which hands the symbolic
case to the handler registered here (importing :mod:`promptgym.modules` registers it).
"""

from __future__ import annotations

from typing import Any

from promptgym.core.operators import register_symbolic_handler
from promptgym.core.tree import flatten
from promptgym.modules.json_operation import MergeOperation
from promptgym.modules.masking import InMask, OutMask
from promptgym.modules.merging import And, Concat, Or, Xor
from promptgym.modules.module import Module, run_sync
from promptgym.modules.reshaping import Factorize, Not, Prefix, Suffix
from promptgym.modules.symbolic import SymbolicDataModel


def operation_module(op: str, name: str | None = None, description: str | None = None, **options: Any) -> Module:
    """The module that performs ``op`` (``"concat"``, ``"in_mask"``...)."""
    classes: dict[str, type[Module]] = {
        "concat": Concat, "logical_and": And, "logical_or": Or, "logical_xor": Xor, "logical_not": Not,
        "factorize": Factorize, "in_mask": InMask, "out_mask": OutMask, "prefix": Prefix, "suffix": Suffix,
    }
    return classes[op](name=name, description=description, **options)


def _symbolic_operator(op: str, operands: list[Any], name: str | None = None, **options: Any) -> Any:
    """``a + b`` (etc.) where an operand is symbolic or a DataModel class."""
    if op == "to_symbolic":  # of a DataModel class, or of a value's schema (JsonDataModel.to_symbolic_data_model)
        value = operands[0]
        if isinstance(value, type):
            return SymbolicDataModel(data_model=value, name=name)
        return SymbolicDataModel(schema=value.get_schema(), name=name)
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
