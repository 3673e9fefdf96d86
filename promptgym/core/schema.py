"""Operations on JSON schemas and DataModel classes.

Saved programs store the JSON schema of every DataModel; loading rebuilds the
classes from the schema (:func:`data_model_from_schema`), so a file never
needs to name Python code.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, Optional, Union

import pydantic

from promptgym.core.data_model import DataModel, Field

DEFAULT_MAX_STRING_LENGTH = 400


def bounded_schema(schema: dict[str, Any], max_string_length: int = DEFAULT_MAX_STRING_LENGTH) -> dict[str, Any]:
    """A copy of ``schema`` where every unbounded string gets ``maxLength``.

    Constrained decoding guarantees valid JSON, not sensible content: a small
    model can ramble inside a string until ``max_tokens``. A bound makes the
    grammar close the string.
    """
    result = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" and "enum" not in node and "maxLength" not in node:
                node["maxLength"] = max_string_length
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(result)
    return result


_CONSTRAINTS = {"minLength": "min_length", "maxLength": "max_length", "minimum": "ge", "maximum": "le",
                "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}
_SIMPLE_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def _python_type(prop: dict[str, Any], defs: dict[str, Any], name: str) -> Any:
    if "$ref" in prop:
        ref = prop["$ref"].split("/")[-1]
        if ref not in defs:
            raise ValueError(f"schema field {name!r}: unresolved reference {prop['$ref']!r}")
        return data_model_from_schema(defs[ref], defs=defs)
    if "enum" in prop:
        return Literal[tuple(prop["enum"])]  # type: ignore[misc]
    if "const" in prop:
        return Literal[prop["const"]]  # type: ignore[misc]
    for key in ("anyOf", "oneOf"):
        if key in prop:
            options = [_python_type(option, defs, name) for option in prop[key]]
            # Union[...], not `|`: on DataModel classes `|` is synalinks' symbolic "or", not a type union.
            return Union[tuple(options)] if len(options) > 1 else options[0]  # type: ignore[return-value]
    kind = prop.get("type")
    if kind == "array":
        return list[_python_type(prop.get("items", {}), defs, name)]  # type: ignore[misc]
    if kind == "object":
        if "properties" in prop:
            return data_model_from_schema(prop, defs=defs)
        return dict[str, Any]
    if isinstance(kind, list):
        options = [_SIMPLE_TYPES.get(k, Any) for k in kind]
        union = options[0]
        for option in options[1:]:
            union = union | option
        return union
    if kind is None:
        return Any
    if kind not in _SIMPLE_TYPES:
        raise ValueError(f"schema field {name!r}: unsupported type {kind!r}")
    return _SIMPLE_TYPES[kind]


def python_type_of_schema(schema: dict[str, Any]) -> Any:
    """The Python type (for pydantic) of any JSON ``schema``: a DataModel for an object, a union for ``anyOf``...

    >>> python_type_of_schema({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    typing.Union[str, int]
    """
    return _python_type(schema, schema.get("$defs", {}), schema.get("title") or "(root)")


def data_model_from_schema(
    schema: dict[str, Any], name: str | None = None, defs: dict[str, Any] | None = None
) -> type[DataModel]:
    """A DataModel class equivalent to a JSON object ``schema``.

    >>> Answer = data_model_from_schema({"title": "Answer", "type": "object",
    ...     "properties": {"answer": {"type": "string", "description": "Final answer"}},
    ...     "required": ["answer"]})
    >>> Answer(answer="8").get("answer")
    '8'
    """
    defs = {**(defs or {}), **schema.get("$defs", {})}
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for field_name, prop in schema.get("properties", {}).items():
        python_type = _python_type(prop, defs, field_name)
        extra = {pydantic_name: prop[key] for key, pydantic_name in _CONSTRAINTS.items() if key in prop}
        if field_name in required:
            fields[field_name] = (python_type, Field(description=prop.get("description"), **extra))
        else:
            default = prop.get("default", [] if prop.get("type") == "array" else None)
            fields[field_name] = (
                Optional[python_type],
                Field(default=default, description=prop.get("description"), **extra),
            )
    model_name = name or schema.get("title") or "DataModel"
    model = pydantic.create_model(model_name, __base__=DataModel, **fields)  # type: ignore[call-overload]
    if schema.get("description"):
        model.__doc__ = schema["description"]
    return model


def with_leading_field(
    data_model: type[DataModel], field_name: str, description: str, max_length: int | None = None
) -> type[DataModel]:
    """``data_model`` with one more string field placed first (ChainOfThought's ``thinking``)."""
    if field_name in data_model.model_fields:
        return data_model
    extra = {"max_length": max_length} if max_length else {}
    fields: dict[str, Any] = {field_name: (str, Field(description=description, **extra))}
    for name, info in data_model.model_fields.items():
        fields[name] = (info.annotation, info)
    return pydantic.create_model(data_model.__name__, __base__=DataModel, **fields)  # type: ignore[call-overload]


def check_mask(fields: list[str], in_mask: list[str] | None, out_mask: list[str] | None, where: str) -> None:
    """Raise if a mask names a field that the data model doesn't have."""
    for mask_name, mask in (("in_mask", in_mask), ("out_mask", out_mask)):
        for field_name in mask or []:
            if field_name not in fields:
                raise ValueError(
                    f"{where}: {mask_name} names field {field_name!r}, which does not exist; "
                    f"fields are {', '.join(fields) or 'none'}"
                )


def apply_mask(data: dict[str, Any], in_mask: list[str] | None = None, out_mask: list[str] | None = None) -> dict[str, Any]:
    """Keep only ``in_mask`` fields (if given), then drop ``out_mask`` fields."""
    kept = {key: value for key, value in data.items() if in_mask is None or key in in_mask}
    return {key: value for key, value in kept.items() if not out_mask or key not in out_mask}


def serialize_data_model(data_model: type[DataModel]) -> dict[str, Any]:
    """``{"name": ..., "schema": ...}``: enough to rebuild the class without its code."""
    return {"name": data_model.__name__, "schema": data_model.get_schema()}


def deserialize_data_model(data: dict[str, Any]) -> type[DataModel]:
    return data_model_from_schema(data["schema"], name=data.get("name"))


def describe_fields(data_model: type[DataModel]) -> str:
    """One line per field: ``- answer (string): Final answer``."""
    return describe_schema_fields(data_model.get_schema())


def describe_schema_fields(schema: dict[str, Any]) -> str:
    """:func:`describe_fields` for a JSON schema."""
    return "\n".join(f"- {field.name} ({field.kind})" + (f": {field.description}" if field.description else "")
                     for field in schema_fields(schema))


class SchemaField(pydantic.BaseModel):
    """One top-level field of a JSON schema, as a prompt describes it."""

    name: str
    kind: str
    description: str | None = None
    type: str | None = None
    choices: list[Any] | None = None


def schema_fields(schema: dict[str, Any]) -> list[SchemaField]:
    """The top-level fields of ``schema``, references resolved.

    >>> [field.kind for field in schema_fields({"properties": {"n": {"type": "integer"}, "c": {"enum": ["a", "b"]}}})]
    ['integer', 'one of "a", "b"']
    """
    defs = schema.get("$defs", {})
    fields = []
    for name, prop in schema.get("properties", {}).items():
        if "$ref" in prop:
            prop = {**defs.get(prop["$ref"].split("/")[-1], {}), **{k: v for k, v in prop.items() if k != "$ref"}}
        if "enum" in prop:
            kind = "one of " + ", ".join(json_literal(value) for value in prop["enum"])
        elif prop.get("type") == "array":
            kind = f"list of {prop.get('items', {}).get('type', 'values')}"
        else:
            kind = str(prop.get("type", "value"))
        fields.append(SchemaField(name=name, kind=kind, description=prop.get("description"), type=prop.get("type"),
                                  choices=prop.get("enum")))
    return fields


def json_literal(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def default_value(data_model: type[DataModel]) -> dict[str, Any]:
    """The JSON of ``data_model``'s defaults (fields without a default are left out)."""
    import pydantic_core

    values = {name: info.get_default(call_default_factory=True)
              for name, info in data_model.model_fields.items() if not info.is_required()}
    return pydantic_core.to_jsonable_python(values)


def schema_of_value(value: Any, title: str = "Value") -> dict[str, Any]:
    """A JSON schema a JSON value follows (types inferred from the value itself)."""
    def of(item: Any) -> dict[str, Any]:
        if isinstance(item, bool):
            return {"type": "boolean"}
        if isinstance(item, int):
            return {"type": "integer"}
        if isinstance(item, float):
            return {"type": "number"}
        if isinstance(item, str):
            return {"type": "string"}
        if isinstance(item, list):
            return {"type": "array", "items": of(item[0]) if item else {}}
        if isinstance(item, dict):
            return {"type": "object", "properties": {key: of(val) for key, val in item.items()}}
        return {}

    return {"title": title, **of(value)}
