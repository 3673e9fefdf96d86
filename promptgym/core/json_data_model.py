"""``JsonDataModel``: a value that carries its own JSON schema.

What operations on data models return (two answers concatenated, an input
without some field): no Python class declares their shape, so the value
keeps its schema next to its JSON::

    both = JsonDataModel(data_model=Answer(answer="Paris")) + Answer(answer="Lyon")
    both.get_json()                      # {"answer": "Paris", "answer_1": "Lyon"}
    list(both.get_schema()["properties"])  # ["answer", "answer_1"]

It reads like a DataModel instance (``get``, ``get_json``, ``[key]``,
``keys()``, ``in``) and takes the same operators.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pydantic

from promptgym.core.operators import DataModelOperators, JsonOperations, to_symbolic


class JsonDataModel(DataModelOperators, JsonOperations):
    """A JSON object and its schema.

    Args:
        json: the value (a dict).
        schema: its JSON schema.
        data_model: instead of both, a DataModel instance (or a DataModel class with ``json=``).
        name: an optional name (the step that produced it).
    """

    def __init__(self, json: dict[str, Any] | None = None, schema: dict[str, Any] | None = None,
                 data_model: Any = None, name: str | None = None) -> None:
        if data_model is not None:
            if isinstance(data_model, JsonDataModel):
                schema, json = data_model.get_schema(), data_model.get_json() if json is None else json
            elif isinstance(data_model, pydantic.BaseModel):
                schema = type(data_model).model_json_schema() if not hasattr(data_model, "get_schema") \
                    else data_model.get_schema()
                json = data_model.model_dump(mode="json") if json is None else json
            elif isinstance(data_model, type) and issubclass(data_model, pydantic.BaseModel):
                if json is None:
                    raise ValueError(
                        f"Couldn't get the JSON data from {data_model.__name__}: it is a class; pass an instance, "
                        "or json= with the value")
                schema = data_model.model_json_schema()
            else:
                raise TypeError(f"data_model must be a DataModel (class or instance), got {type(data_model).__name__}")
        if schema is None:
            raise ValueError("JsonDataModel needs schema= (with json=) or data_model=")
        if json is not None and not isinstance(json, dict):
            raise TypeError(f"json must be a dict, got {type(json).__name__}")
        self._schema = copy.deepcopy(schema)
        self._json = copy.deepcopy(json) if json is not None else {}
        self.name = name

    # -- reading --------------------------------------------------------------------------

    def get_json(self) -> dict[str, Any]:
        return copy.deepcopy(self._json)

    def get_schema(self) -> dict[str, Any]:
        return copy.deepcopy(self._schema)

    def get(self, key: str, default: Any = None) -> Any:
        return self._json.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def keys(self) -> list[str]:
        return list(self._json)

    def values(self) -> list[Any]:
        return list(self._json.values())

    def items(self) -> list[tuple[str, Any]]:
        return list(self._json.items())

    def update(self, values: dict[str, Any]) -> None:
        self._json.update(values)

    def __contains__(self, other: Any) -> bool:
        """``"answer" in value`` (a field), or ``other in value`` (all of other's fields)."""
        if isinstance(other, str):
            return other in self._schema.get("properties", self._json)
        return set(other.get_schema().get("properties", {})) <= set(self._schema.get("properties", {}))

    def prettify_json(self) -> str:
        return json.dumps(self._json, indent=2, ensure_ascii=False)

    def prettify_schema(self) -> str:
        return json.dumps(self._schema, indent=2, ensure_ascii=False)

    def to_json_data_model(self, name: str | None = None) -> "JsonDataModel":
        return self if name is None else JsonDataModel(json=self._json, schema=self._schema, name=name)

    def to_symbolic_data_model(self, name: str | None = None) -> Any:
        """A free symbolic data model of this value's schema (a placeholder for a program being built)."""
        return to_symbolic(self, name=name)

    def clone(self, name: str | None = None) -> "JsonDataModel":
        return JsonDataModel(json=self._json, schema=self._schema, name=name or self.name)

    def to_data_model(self) -> Any:
        """The value as an instance of a DataModel class built from the schema."""
        # circle: core.schema builds on core.data_model, which imports this module at its top
        from promptgym.core.schema import data_model_from_schema

        return data_model_from_schema(self._schema).model_validate(self._json)

    def get_nested_entity(self, key: str) -> "JsonDataModel | None":
        """The object at ``key`` with its own schema, if it is an entity (it has a ``label``); else None."""
        value = self._json.get(key)
        if not isinstance(value, dict) or "label" not in value:
            return None
        return JsonDataModel(json=value, schema=self._nested_schema(key, value["label"]), name=key)

    def get_nested_entity_list(self, key: str) -> list["JsonDataModel"]:
        """The entities in the list at ``key``, each with its schema."""
        values = self._json.get(key) or []
        return [JsonDataModel(json=value, schema=self._nested_schema(key, value.get("label"), item=True), name=key)
                for value in values if isinstance(value, dict)]

    def _nested_schema(self, key: str, label: Any, item: bool = False) -> dict[str, Any]:
        """The schema named like the entity's label in ``$defs``, else the field's declared one."""
        defs = self._schema.get("$defs", {})
        if isinstance(label, str) and label in defs:
            schema = copy.deepcopy(defs[label])
        else:
            declared = self._schema.get("properties", {}).get(key, {})
            declared = declared.get("items", declared) if item else declared
            reference = declared.get("$ref", "").split("/")[-1]
            schema = copy.deepcopy(defs.get(reference, declared))
        used = {name: copy.deepcopy(value) for name, value in defs.items() if f"#/$defs/{name}" in json.dumps(schema)}
        return {**schema, "$defs": used} if used else schema

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonDataModel):
            return self._json == other._json and self._schema == other._schema
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<JsonDataModel schema={self._schema}, json={self._json}>"
