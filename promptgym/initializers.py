"""``promptgym.initializers``: the value a variable starts from (synalinks' initializers).

    from promptgym.initializers import Empty

    class Instructions(promptgym.DataModel):
        instructions: list[str] = []

    variable = promptgym.Variable(initializer=Empty(data_model=Instructions))
    variable.get_json()        # {"instructions": []}

A variable also takes a plain dict (``initializer={"instructions": [...]}``)
or any callable returning one.
"""

from __future__ import annotations

import copy
from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.core.schema import default_value
from promptgym.core.serialization import deserialize_in_scope, register_builtin, serialize_object


def _json_of(data_model: Any) -> dict[str, Any]:
    """The JSON of a DataModel instance, or of a DataModel class's defaults."""
    if isinstance(data_model, type):
        return default_value(data_model)
    return data_model.get_json()


class Initializer:
    """The base of initializers: ``__call__(data_model=None)`` returns the starting JSON object.

    Subclasses implement ``__call__``; ``get_config()``/``from_config()`` save
    and rebuild them like any promptgym object.
    """

    def __init__(self, schema: dict[str, Any] | None = None, json: dict[str, Any] | None = None,
                 data_model: Any = None) -> None:
        if schema is None and data_model is not None:
            schema = data_model.get_schema()
        if json is None and data_model is not None:
            json = _json_of(data_model)
        self._schema = schema
        self._json = json

    def get_json(self) -> dict[str, Any] | None:
        return copy.deepcopy(self._json)

    def get_schema(self) -> dict[str, Any] | None:
        return self._schema

    def __call__(self, data_model: Any = None, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(data_model=None)")

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        return cls(**config)

    def clone(self) -> "Initializer":
        return type(self).from_config(self.get_config())


@register_builtin
class Empty(Initializer):
    """Starts a variable from a DataModel's defaults (or the ``json`` given with its ``schema``).

    >>> Empty(json={"instructions": []}, schema={"type": "object"})()
    {'instructions': []}
    """

    def get_config(self) -> dict[str, Any]:
        return {"schema": self._schema, "json": self._json}

    def __call__(self, data_model: Any = None, **kwargs: Any) -> dict[str, Any]:
        if data_model is not None:
            self._json = _json_of(data_model)
            self._schema = data_model.get_schema()
        if self._json is None:
            raise ValueError("Empty() needs data_model= (or json= and schema=) to say what the variable holds")
        return copy.deepcopy(self._json)


empty = Empty

INITIALIZERS = {"empty": Empty}


def get(identifier: Any) -> Initializer:
    """An initializer from an instance, a name (``"empty"``) or a config dict."""
    return get_by_identifier(identifier, INITIALIZERS, "initializer", base=Initializer)


def serialize(initializer: Initializer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}``."""
    return serialize_object(initializer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Initializer:
    """Rebuild what :func:`serialize` wrote; ``custom_objects`` maps class names to your own classes."""
    return deserialize_in_scope(config, custom_objects, expected="initializer")


__all__ = ["Empty", "INITIALIZERS", "Initializer", "deserialize", "empty", "get", "serialize"]
