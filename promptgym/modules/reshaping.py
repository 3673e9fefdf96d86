"""Modules that pass data models on reshaped: ``Identity``, ``Not``, ``Factorize``, ``Prefix``, ``Suffix``."""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.core.tree import map_structure
from promptgym.modules.json_operation import UnaryOperation
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


@register_builtin
class Identity(Module):
    """Outputs its inputs unchanged (any structure: one, a list, a tuple, a dict)."""

    accepts_none = True

    async def call(self, inputs: Any, training: bool = False) -> Any:
        return inputs

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return map_structure(lambda value: SymbolicDataModel(data_model=value, name=self.name), inputs)


@register_builtin
class Not(UnaryOperation):
    """Outputs None for every input (``~x``): switches a path off. Symbolically, the same schema."""

    operation = "logical_not"


@register_builtin
class Factorize(UnaryOperation):
    """Fields sharing a base name (``answer``, ``answer_1``) become one list field (``answers``)."""

    operation = "factorize"


class _Rename(UnaryOperation):
    option = ""

    def __init__(self, value: str | None = None, name: str | None = None, description: str | None = None,
                 trainable: bool = True, **kwargs: Any) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        value = kwargs.pop(self.option, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected arguments {sorted(kwargs)}")
        if not value:
            raise ValueError(f"{type(self).__name__}() needs {self.option}= (a string)")
        setattr(self, self.option, value)

    def options(self) -> dict[str, Any]:
        return {self.option: getattr(self, self.option)}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.options()}


@register_builtin
class Prefix(_Rename):
    """Every field renamed ``<prefix>_<name>``."""

    operation = "prefix"
    option = "prefix"


@register_builtin
class Suffix(_Rename):
    """Every field renamed ``<name>_<suffix>``."""

    operation = "suffix"
    option = "suffix"
