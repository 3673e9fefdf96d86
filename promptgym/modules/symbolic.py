"""Symbolic data models: the placeholders the functional API wires together.

``Input(data_model=Question)`` returns one; calling a module on symbolic
values returns new ones, each remembering the call (:class:`CallNode`) that
produces it. A program walks those calls back from its outputs.

A symbolic data model holds a JSON schema; ``.data_model`` is the DataModel
class (the one it was made from, or one built from the schema). The
``+ & | ^ ~`` operators and ``.factorize()``, ``.in_mask()``... add steps to
the program being built::

    answers = await Generator(data_model=Answer, language_model=lm)(inputs)
    checked = await Generator(data_model=Answer, language_model=lm)(inputs)
    both = answers + checked        # a Concat step: fields answer, answer_1
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Protocol

from promptgym.core import json_ops
from promptgym.core.data_model import DataModel, is_data_model_class
from promptgym.core.operators import DataModelOperators, JsonOperations
from promptgym.core.schema import data_model_from_schema
from promptgym.core.tree import flatten



class Module(Protocol):
    """The module a call node records (a ``promptgym.modules.module.Module``, which imports this file: named
    here by the shape the graph reads, so the two files do not need each other)."""

    name: str

_ids = itertools.count()


@dataclass(eq=False)
class CallNode:
    """One call of a module on symbolic inputs: what the functional graph is made of."""

    module: "Module"
    inputs: Any                      # nested structure of SymbolicDataModels (and constants)
    outputs: Any = None              # nested structure of SymbolicDataModels

    @property
    def parents(self) -> list["SymbolicDataModel"]:
        return [leaf for leaf in flatten(self.inputs) if isinstance(leaf, SymbolicDataModel)]


class SymbolicDataModel(DataModelOperators, JsonOperations):
    """The schema of a value flowing through a program graph, and the call that produces it.

    Args:
        data_model: a DataModel class (or another symbolic data model, copied).
        schema: a JSON schema, instead of ``data_model``.
        name: an optional name.
    """

    _promptgym_symbolic = True

    def __init__(self, data_model: Any = None, schema: dict[str, Any] | None = None, name: str | None = None,
                 node: CallNode | None = None) -> None:
        self._data_model_class: type[DataModel] | None = None
        if isinstance(data_model, SymbolicDataModel):
            schema, self._data_model_class = data_model.get_schema(), data_model._data_model_class
        elif data_model is not None:
            if not is_data_model_class(data_model):
                raise TypeError(f"data_model must be a DataModel class, got {data_model!r}")
            self._data_model_class = data_model
            schema = data_model.get_schema()
        if schema is None:
            raise ValueError("You should specify at least one argument between `data_model` or `schema`")
        self._schema = json_ops.standardize_schema(schema)
        self.name = name
        self.node = node
        self.id = f"symbolic_{next(_ids)}"

    @property
    def data_model(self) -> type[DataModel]:
        """The DataModel class of this placeholder (built from the schema when it had none)."""
        if self._data_model_class is None:
            self._data_model_class = data_model_from_schema(self._schema, name=self._schema.get("title"))
        return self._data_model_class

    def get_schema(self) -> dict[str, Any]:
        return json_ops.standardize_schema(self._schema)

    def prettify_schema(self) -> str:
        """The JSON schema, indented (for printing)."""
        import json

        return json.dumps(self.get_schema(), indent=2, ensure_ascii=False)

    def keys(self) -> list[str]:
        return list(self._schema.get("properties", {}))

    @property
    def producer(self) -> "Module | None":
        """The module whose call produces this value (None for a free placeholder)."""
        return self.node.module if self.node is not None else None

    @property
    def parents(self) -> list["SymbolicDataModel"]:
        return self.node.parents if self.node is not None else []

    def __contains__(self, other: Any) -> bool:
        """``"answer" in x`` (a field), or ``y in x`` (all of y's fields)."""
        if isinstance(other, str):
            return other in self._schema.get("properties", {})
        return json_ops.contains_schema(self._schema, other.get_schema())

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<SymbolicDataModel schema={self._schema}, name={self.name}>"

    def clone(self, name: str | None = None) -> "SymbolicDataModel":
        """The same placeholder (schema and DataModel class) under another name (``clone_<name>`` by default)."""
        clone = SymbolicDataModel(schema=self._schema, name=name or f"clone_{self.name}")
        clone._data_model_class = self._data_model_class
        return clone


def is_symbolic_data_model(value: Any) -> bool:
    return isinstance(value, SymbolicDataModel)


def any_symbolic(structure: Any) -> bool:
    """Whether a (nested) value holds a symbolic data model."""
    return any(isinstance(leaf, SymbolicDataModel) for leaf in flatten(structure))


def Input(data_model: type[DataModel] | None = None, schema: dict[str, Any] | None = None,
          name: str | None = None) -> SymbolicDataModel:
    """The entry point of a functional program: ``inputs = Input(data_model=Question)``."""
    # circle: an InputModule outputs the symbolic data model defined here (Keras' Input/InputLayer)
    from promptgym.modules.input_module import InputModule

    if data_model is None and schema is None:
        raise ValueError("Input() needs data_model= (a DataModel class) or schema= (a JSON schema)")
    return InputModule(data_model=data_model, schema=schema, name=name).output
