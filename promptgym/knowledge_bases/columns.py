"""JSON schemas <-> DuckDB columns: the first property is the primary key, objects are JSON columns.

    >>> columns_for_schema({"properties": {"id": {"type": "string"}, "tags": {"type": "array",
    ...                     "items": {"type": "string"}}}})
    [('id', 'VARCHAR'), ('tags', 'VARCHAR[]')]
    >>> schema_for_columns("Doc", [("id", "VARCHAR"), ("n", "BIGINT")])["properties"]["n"]
    {'title': 'N', 'type': 'integer'}
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from promptgym.knowledge_bases.naming import column_identifier

VECTOR_KEY = "embedding"
_SCALARS = {"string": "VARCHAR", "number": "DOUBLE", "integer": "BIGINT", "boolean": "BOOLEAN"}
_DATES = {"date": "DATE", "date-time": "TIMESTAMP", "time": "TIME"}
_BACK = {"VARCHAR": {"type": "string"}, "DOUBLE": {"type": "number"}, "FLOAT": {"type": "number"},
         "BIGINT": {"type": "integer"}, "INTEGER": {"type": "integer"}, "HUGEINT": {"type": "integer"},
         "SMALLINT": {"type": "integer"}, "TINYINT": {"type": "integer"}, "UBIGINT": {"type": "integer"},
         "UINTEGER": {"type": "integer"}, "BOOLEAN": {"type": "boolean"}, "JSON": {"type": "object"},
         "DATE": {"type": "string", "format": "date"}, "TIMESTAMP": {"type": "string", "format": "date-time"},
         "TIMESTAMP WITH TIME ZONE": {"type": "string", "format": "date-time"},
         "TIME": {"type": "string", "format": "time"}}


def _resolve(spec: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property's own spec: ``$ref`` followed, the non-null branch of an ``anyOf`` (Optional) taken."""
    if "$ref" in spec:
        resolved = dict(defs.get(spec["$ref"].rsplit("/", 1)[-1], {}))
        resolved.update({key: value for key, value in spec.items() if key != "$ref"})
        spec = resolved
    if "type" not in spec and "anyOf" in spec:
        for variant in spec["anyOf"]:
            variant = _resolve(variant, defs)
            if variant.get("type") not in (None, "null") or "enum" in variant:
                return variant
    return spec


def column_type(name: str, spec: dict[str, Any], defs: dict[str, Any]) -> str:
    spec = _resolve(spec, defs)
    kind = spec.get("type") or ("string" if "enum" in spec or "const" in spec else None)
    if isinstance(kind, list):  # ["string", "null"]
        kind = next((item for item in kind if item != "null"), None)
    if kind == "string":
        return _DATES.get(spec.get("format", ""), "VARCHAR")
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "object":
        return "JSON"
    if kind == "array":
        items = _resolve(spec.get("items") or {}, defs)
        item_kind = items.get("type") or ("string" if "enum" in items else None)
        return f"{_SCALARS[item_kind]}[]" if item_kind in _SCALARS else "JSON"
    raise ValueError(f"field {name!r}: cannot store JSON schema {spec} in a column (expected a type: string, number, "
                     "integer, boolean, object or array)")


def columns_for_schema(schema: dict[str, Any], vector_key: str = VECTOR_KEY) -> list[tuple[str, str]]:
    """(column, DuckDB type) per property, in declaration order; the vector column is left to the caller."""
    properties = schema.get("properties") or {}
    if not properties:
        raise ValueError(f"data model {schema.get('title')!r} has no fields: the first field is the primary key")
    defs = schema.get("$defs") or {}
    return [(column_identifier(name), column_type(name, spec, defs)) for name, spec in properties.items()
            if column_identifier(name) != vector_key]


def schema_for_columns(title: str, columns: list[tuple[str, str]], vector_key: str = VECTOR_KEY) -> dict[str, Any]:
    """The JSON schema a table's columns describe (the vector column left out)."""
    properties: dict[str, Any] = {}
    for name, kind in columns:
        if name == vector_key:
            continue
        if kind.endswith("[]") and kind[:-2] in _BACK:
            properties[name] = {"title": name.title(), "type": "array", "items": {"type": _BACK[kind[:-2]]["type"]}}
        else:
            properties[name] = {"title": name.title(), **_BACK.get(kind, {"type": "string"})}
    return {"title": title, "type": "object", "additionalProperties": False, "required": list(properties),
            "properties": properties}


def to_column_value(value: Any, kind: str) -> Any:
    """A JSON value as DuckDB takes it: objects (and lists of them) as JSON text."""
    if kind == "JSON" and value is not None and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return value


def from_column_value(value: Any, kind: str) -> Any:
    """A stored value back as JSON: JSON text parsed, dates as ISO strings."""
    if kind == "JSON" and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    return value
