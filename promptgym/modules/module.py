"""``Module``: the base of Generator, ChainOfThought and user modules."""

from __future__ import annotations

import collections
from typing import Any, Callable

from promptgym.core.data_model import DataModel
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.modules.variable import Variable

_name_counts: collections.Counter[str] = collections.Counter()


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def unique_name(base: str) -> str:
    """``generator``, ``generator_1``, ... (Keras-style automatic names)."""
    count = _name_counts[base]
    _name_counts[base] += 1
    return base if count == 0 else f"{base}_{count}"


class Module:
    """A step of a program. Subclasses implement ``call`` and ``output_data_model``.

    Calling a module on a :class:`SymbolicDataModel` wires it into a graph;
    calling it on a DataModel instance runs it.
    """

    def __init__(self, name: str | None = None, description: str | None = None, trainable: bool = True) -> None:
        self.name = name or unique_name(_snake(type(self).__name__))
        self.description = description
        self.trainable = trainable
        self._variables: list[Variable] = []

    # -- variables ------------------------------------------------------------------------

    def add_variable(self, name: str, value: dict[str, Any], description: str = "",
                     check: Callable[[dict[str, Any]], str | None] | None = None) -> Variable:
        variable = Variable(f"{self.name}/{name}", value, trainable=self.trainable, description=description, check=check)
        self._variables.append(variable)
        return variable

    @property
    def variables(self) -> list[Variable]:
        return list(self._variables)

    @property
    def trainable_variables(self) -> list[Variable]:
        return [variable for variable in self._variables if variable.trainable and self.trainable]

    @property
    def prompt_variable(self) -> Variable | None:
        """The variable holding this module's prompt (``{"instructions", "examples"}``), if it has one.

        Optimizers find what they may rewrite through it; a Generator returns its ``state``.
        """
        return None

    # -- calling --------------------------------------------------------------------------

    def output_data_model(self, input_data_model: type[DataModel]) -> type[DataModel]:
        raise NotImplementedError(f"{type(self).__name__} must define output_data_model()")

    def symbolic_call(self, inputs: SymbolicDataModel) -> SymbolicDataModel:
        return SymbolicDataModel(self.output_data_model(inputs.data_model), producer=self, parents=[inputs])

    async def __call__(self, inputs: Any, training: bool = False) -> Any:
        if isinstance(inputs, SymbolicDataModel):
            return self.symbolic_call(inputs)
        return await self.call(inputs, training=training)

    async def call(self, inputs: DataModel, training: bool = False) -> DataModel:
        raise NotImplementedError(f"{type(self).__name__} must define call()")

    # -- serialization --------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Module":
        return cls(**config)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"
