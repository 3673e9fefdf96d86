"""Operations on data models, as functions (synalinks' ``ops``).

Each works on values (computed now) and on symbolic data models (a step is
added to the program being built); the Python operators are shortcuts::

    both = await ops.concat(x1, x2)        # x1 + x2
    either = await ops.logical_or(x1, x2)  # x1 | x2
    answer = await ops.out_mask(x, mask=["thinking"])
"""

from promptgym.ops.json import (
    concat,
    concatenate,
    factorize,
    in_mask,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    out_mask,
    prefix,
    suffix,
)
from promptgym.core.json_data_model import JsonDataModel  # noqa: E402
from promptgym.modules.symbolic import SymbolicDataModel  # noqa: E402


def convert_to_json_data_model(value):  # noqa: ANN001, ANN201
    """A DataModel instance (or JsonDataModel) as a JsonDataModel."""
    return value if isinstance(value, JsonDataModel) else JsonDataModel(data_model=value)


def convert_to_symbolic_data_model(value):  # noqa: ANN001, ANN201
    """A DataModel class, a value or a symbolic data model as a symbolic data model."""
    if isinstance(value, SymbolicDataModel):
        return value
    return SymbolicDataModel(data_model=value) if isinstance(value, type) else SymbolicDataModel(schema=value.get_schema())


__all__ = ["concat", "concatenate", "convert_to_json_data_model", "convert_to_symbolic_data_model", "factorize",
           "in_mask", "logical_and", "logical_not", "logical_or", "logical_xor", "out_mask", "prefix", "suffix"]
