"""The data ``fit``/``evaluate``/``predict`` take: arrays checked against the program before any LM call."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from promptgym.rewards.base import to_json


def as_object_array(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D object array (lists and arrays of DataModels accepted)."""
    if values is None:
        raise ValueError(f"{name} is required")
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1:
        return values
    array = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        array[i] = value
    return array


def validate_inputs(program: Any, x: Sequence[Any], name: str = "x") -> list[Any]:
    """Every input converted to the program's input DataModel; errors name the index and field."""
    validated = []
    for index, value in enumerate(x):
        try:
            validated.append(program.validate_input(value, index=index))
        except ValueError as error:
            raise ValueError(f"{name}[{index}]: {error}") from None
    return validated


def validate_targets(program: Any, y: Sequence[Any], name: str = "y") -> list[Any]:
    """Every target must be a DataModel/dict whose fields the program's output has."""
    model = program.output_data_model
    fields = list(model.model_fields) if model is not None else None
    for index, value in enumerate(y):
        try:
            data = to_json(value)
        except TypeError as error:
            raise ValueError(f"{name}[{index}]: {error}") from None
        if data is None:
            raise ValueError(f"{name}[{index}] is None; every example needs a target")
        if fields is not None:
            unknown = [key for key in data if key not in fields]
            if unknown:
                raise ValueError(
                    f"{name}[{index}] ({type(value).__name__}) has field {unknown[0]!r}, which the program's output "
                    f"{model.__name__} doesn't have (fields: {', '.join(fields)})"
                )
    return list(y)


def split_validation(x: np.ndarray, y: np.ndarray, validation_split: float, validation_data: Any
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_val, y_val): ``validation_data``, else the last ``validation_split`` of the data."""
    if validation_data is not None:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError("validation_data must be a tuple (x_val, y_val)")
        return x, y, as_object_array(validation_data[0], "validation_data x"), as_object_array(validation_data[1], "validation_data y")
    if not 0 <= validation_split < 1:
        raise ValueError(f"validation_split must be in [0, 1), got {validation_split}")
    cut = len(x) - int(math.floor(len(x) * validation_split))
    if cut == 0:
        raise ValueError(f"validation_split={validation_split} leaves no training example out of {len(x)}")
    return x[:cut], y[:cut], x[cut:], y[cut:]


def pack_x_y(x: Any, y: Any = None) -> tuple[Any, ...]:
    """``(x,)`` or ``(x, y)``: one batch as ``fit``/``evaluate`` read it.

    >>> pack_x_y([1, 2], [3, 4])
    ([1, 2], [3, 4])
    """
    return (x,) if y is None else (x, y)


def unpack_x_y(data: Any) -> tuple[Any, Any]:
    """``(x, y)`` of a batch: a ``(x, y)`` or ``(x,)`` tuple, or ``x`` alone (then y is None).

    >>> unpack_x_y(([1, 2],))
    ([1, 2], None)
    """
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None
    if len(data) == 1:
        return data[0], None
    if len(data) == 2:
        return data[0], data[1]
    raise ValueError(f"a batch is (x,) or (x, y), got a tuple of {len(data)} items")
