"""Typed inputs and outputs of LM programs.

A ``DataModel`` is a pydantic model with a few conveniences the training
workflow relies on (``get``, ``get_json``, ``get_schema``)::

    class Question(DataModel):
        question: str = Field(description="A question")

    q = Question(question="Capital of France?")
    q.get("question")        # 'Capital of France?'
    Question.get_schema()    # the JSON schema the LM is constrained to
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
from pydantic import ConfigDict, Field

__all__ = ["DataModel", "Field", "is_data_model_class"]


class DataModel(pydantic.BaseModel):
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


def is_data_model_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)
