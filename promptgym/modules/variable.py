"""Trainable variables: the JSON texts and examples an optimizer evolves."""

from __future__ import annotations

import copy
from typing import Any


class Variable:
    """A named JSON object owned by a module.

    A Generator's variable holds exactly ``{"instructions": str, "examples": [...]}``;
    each example is ``{"inputs": {...}, "outputs": {...}}``.
    """

    def __init__(self, name: str, value: dict[str, Any], trainable: bool = True, description: str = "",
                 data_model: Any = None) -> None:
        self.name = name
        self._value = copy.deepcopy(value)
        self.trainable = trainable
        self.description = description
        self.data_model = data_model  # the DataModel class the value follows, when the module said so

    @property
    def json(self) -> dict[str, Any]:
        """The value itself (synalinks' name; mutating it changes the variable)."""
        return self.value

    def get_schema(self) -> dict[str, Any]:
        """The value's JSON schema: its DataModel's, or one inferred from the value."""
        if self.data_model is not None:
            return self.data_model.get_schema()
        from promptgym.core.schema import schema_of_value

        return schema_of_value(self.value, title=self.name.rsplit("/", 1)[-1])

    @property
    def value(self) -> dict[str, Any]:
        return self._value

    def assign(self, value: dict[str, Any]) -> None:
        """Replace the whole value (a deep copy, so callers can't alias it)."""
        if not isinstance(value, dict):
            raise TypeError(f"variable {self.name!r}: expected a JSON object, got {type(value).__name__}")
        self._value = copy.deepcopy(value)

    def get(self, key: str, default: Any = None) -> Any:
        return self._value.get(key, default)

    def get_json(self) -> dict[str, Any]:
        return copy.deepcopy(self._value)

    def __repr__(self) -> str:
        return f"Variable(name={self.name!r}, trainable={self.trainable})"
