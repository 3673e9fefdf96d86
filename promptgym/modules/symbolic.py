"""Symbolic data models: the placeholders the functional API wires together.

``Input(data_model=Question)`` returns one; calling a module on it returns
another that remembers which module produced it from which inputs.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from promptgym.core.data_model import DataModel, is_data_model_class

if TYPE_CHECKING:
    from promptgym.modules.module import Module

_ids = itertools.count()


class SymbolicDataModel:
    """The type of a value flowing through a program graph, and where it comes from."""

    def __init__(self, data_model: type[DataModel], producer: "Module | None" = None,
                 parents: list["SymbolicDataModel"] | None = None, name: str | None = None) -> None:
        if not is_data_model_class(data_model):
            raise TypeError(f"data_model must be a DataModel class, got {data_model!r}")
        self.data_model = data_model
        self.producer = producer
        self.parents = parents or []
        self.id = name or f"symbolic_{next(_ids)}"

    def get_schema(self) -> dict[str, Any]:
        return self.data_model.get_schema()

    def __repr__(self) -> str:
        source = self.producer.name if self.producer else "input"
        return f"<SymbolicDataModel {self.data_model.__name__} from {source}>"


def Input(data_model: type[DataModel] | None = None, schema: dict[str, Any] | None = None,
          name: str | None = None) -> SymbolicDataModel:
    """The entry point of a functional program: ``inputs = Input(data_model=Question)``."""
    if data_model is None:
        if schema is None:
            raise ValueError("Input() needs data_model= (a DataModel class) or schema= (a JSON schema)")
        from promptgym.core.schema import data_model_from_schema

        data_model = data_model_from_schema(schema)
    return SymbolicDataModel(data_model, name=name)
