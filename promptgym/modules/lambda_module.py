"""``Lambda``: a Python function as a program step (no model call, no variables).

    async def uppercase(inputs):
        return {"query": inputs.get("query").upper()}

    outputs = await Lambda(function=uppercase, data_model=Query)(inputs)

The function takes the step's input (a data model) and returns a dict, a
DataModel, a JsonDataModel or None; ``data_model=`` (or ``schema=``) says what
it returns. A saved program names the function: register it with
``@register_synalinks_serializable()`` so loading can find it (no code is
read from the file).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import pydantic

from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import register_builtin, registered_name, resolve
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


@register_builtin
class Lambda(Module):
    """Runs ``function(inputs)``; see the module docstring."""

    def __init__(self, function: Callable[[Any], Any] | None = None, data_model: Any = None,
                 schema: dict[str, Any] | None = None, name: str | None = None, description: str | None = None,
                 trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        if not callable(function):
            raise TypeError(f"Lambda(function=...) needs a callable, got {function!r}")
        if data_model is None and schema is None:
            raise ValueError("Lambda() needs data_model= or schema= to say what the function returns")
        self.function = function
        self.schema = schema if schema is not None else data_model.get_schema()

    async def call(self, inputs: Any, training: bool = False) -> Any:
        result = self.function(inputs)
        if inspect.isawaitable(result):
            result = await result
        if result is None or isinstance(result, JsonDataModel):
            return result
        if isinstance(result, dict):
            return JsonDataModel(json=result, schema=self.schema, name=self.name)
        if isinstance(result, pydantic.BaseModel):
            return JsonDataModel(json=result.model_dump(mode="json"), schema=self.schema, name=self.name)
        raise TypeError(f"{self.name}: the function returned {type(result).__name__}; "
                        "expected a dict, a DataModel, a JsonDataModel or None")

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return SymbolicDataModel(schema=self.schema, name=self.name)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "function": registered_name(self.function), "schema": self.schema}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Lambda":
        config = dict(config)
        config["function"] = resolve(config["function"], expected="Lambda function")
        return cls(**config)
