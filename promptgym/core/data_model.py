"""Typed inputs and outputs of LM programs.

A ``DataModel`` is a pydantic model with a few conveniences the training
workflow relies on (``get``, ``get_json``, ``get_schema``)::

    class Question(DataModel):
        question: str = Field(description="A question")

    q = Question(question="Capital of France?")
    q.get("question")        # 'Capital of France?'
    Question.get_schema()    # the JSON schema the LM is constrained to

Data models combine with ``+ & | ^ ~`` (see :mod:`promptgym.core.operators`):
on instances the result is a :class:`JsonDataModel` value; on classes it is a
symbolic data model, a placeholder for a program being built.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
from pydantic import ConfigDict, Field

from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.operators import DataModelOperators, JsonOperations, apply, is_symbolic, to_symbolic

__all__ = ["DataModel", "Field", "is_data_model_class", "is_meta_class"]


def _is_operand(value: Any) -> bool:
    return is_symbolic(value) or isinstance(value, (JsonDataModel, pydantic.BaseModel))


class DataModelMeta(type(pydantic.BaseModel), JsonOperations):  # type: ignore[misc]
    """Operators on DataModel *classes*: ``Query + Answer`` is a symbolic data model.

    ``Answer | None`` stays a type annotation (``Optional[Answer]``): ``|``
    acts as a data model operator only between data models.
    """

    def __add__(cls, other: Any) -> Any:
        return apply("concat", cls, other) if _is_operand(other) else NotImplemented

    def __radd__(cls, other: Any) -> Any:
        return apply("concat", other, cls) if _is_operand(other) else NotImplemented

    def __and__(cls, other: Any) -> Any:
        return apply("logical_and", cls, other) if _is_operand(other) else NotImplemented

    def __rand__(cls, other: Any) -> Any:
        return apply("logical_and", other, cls) if _is_operand(other) else NotImplemented

    def __or__(cls, other: Any) -> Any:
        return apply("logical_or", cls, other) if _is_operand(other) else super().__or__(other)

    def __ror__(cls, other: Any) -> Any:
        return apply("logical_or", other, cls) if _is_operand(other) else super().__ror__(other)

    def __xor__(cls, other: Any) -> Any:
        return apply("logical_xor", cls, other) if _is_operand(other) else NotImplemented

    def __rxor__(cls, other: Any) -> Any:
        return apply("logical_xor", other, cls) if _is_operand(other) else NotImplemented

    def __invert__(cls) -> Any:
        return apply("logical_not", cls)

    def __contains__(cls, other: Any) -> bool:
        """``"answer" in Answer`` (a field), or ``Query in QueryAndAnswer`` (all of its fields)."""
        fields = cls.get_schema().get("properties", {})  # type: ignore[attr-defined]
        if isinstance(other, str):
            return other in fields
        return set(other.get_schema().get("properties", {})) <= set(fields)


class DataModel(pydantic.BaseModel, DataModelOperators, metaclass=DataModelMeta):
    """Base class of every typed input and output."""

    model_config = ConfigDict(extra="forbid")

    def get(self, key: str, default: Any = None) -> Any:
        """Field value by name, like ``dict.get``."""
        return getattr(self, key, default) if key in type(self).model_fields else default

    def get_json(self) -> dict[str, Any]:
        """The JSON-compatible dict of this instance."""
        return self.model_dump(mode="json")

    def prettify_json(self) -> str:
        return json.dumps(self.get_json(), indent=2, ensure_ascii=False)

    @classmethod
    def get_schema(cls) -> dict[str, Any]:
        """The JSON schema of this class, computed once per class (treat it as read-only)."""
        cached = cls.__dict__.get("_promptgym_schema")
        if cached is None:
            cached = cls.model_json_schema()
            setattr(cls, "_promptgym_schema", cached)
        return cached

    def __getitem__(self, key: str) -> Any:
        return self.get_json()[key]

    def keys(self) -> list[str]:
        return list(type(self).model_fields)

    def values(self) -> list[Any]:
        return list(self.get_json().values())

    def items(self) -> list[tuple[str, Any]]:
        return list(self.get_json().items())

    def __contains__(self, other: Any) -> bool:
        """``"answer" in value`` (a field), or ``other in value`` (all of other's fields)."""
        fields = type(self).get_schema().get("properties", {})
        if isinstance(other, str):
            return other in fields
        return set(other.get_schema().get("properties", {})) <= set(fields)

    @classmethod
    def prettify_schema(cls) -> str:
        return json.dumps(cls.get_schema(), indent=2, ensure_ascii=False)

    def to_json_data_model(self, name: str | None = None) -> Any:
        """This value as a :class:`JsonDataModel` (its JSON and its class's schema)."""
        return JsonDataModel(json=self.get_json(), schema=type(self).get_schema(), name=name)

    def get_nested_entity(self, key: str) -> Any:
        """The object at ``key`` as a JsonDataModel with its schema, if it has a ``label``; else None."""
        return self.to_json_data_model().get_nested_entity(key)

    def get_nested_entity_list(self, key: str) -> list[Any]:
        return self.to_json_data_model().get_nested_entity_list(key)

    @classmethod
    def to_symbolic_data_model(cls, name: str | None = None) -> Any:
        """A symbolic data model of this class (a placeholder for a program being built)."""
        return to_symbolic(cls, name=name)


def is_data_model_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)


def is_meta_class(obj: Any) -> bool:
    """True for a DataModel class (synalinks' name), False for an instance."""
    return is_data_model_class(obj)
