"""Checking ``y`` against the program's output before any LM call."""

from __future__ import annotations

from typing import Any, Sequence

from promptgym.rewards.base import to_json


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
