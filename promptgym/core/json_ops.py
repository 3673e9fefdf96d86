"""Operations on JSON objects and their JSON schemas, side by side.

Programs that join branches need data models that no class declares: two
answers concatenated, a document without its ``text`` field. Each operation
here comes as a pair, one on the schema (what a symbolic value will look
like) and one on the JSON (the value itself), and the two always agree on
the field names they produce::

    concatenate_json({"answer": "a"}, {"answer": "b"})  # {"answer": "a", "answer_1": "b"}
    factorize_json({"answer": "a", "answer_1": "b"})     # {"answers": ["a", "b"]}
    out_mask_json({"thinking": "...", "answer": "b"}, mask=["thinking"])  # {"answer": "b"}

Field names made unique by a numeric suffix (``answer_1``) keep their *base
name* (``answer``): masks and factorization look at base names, so a mask on
``answer`` also applies to ``answer_1``.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Callable

_SUFFIX = re.compile(r"_(\d+)$")


def base_name(key: str) -> str:
    """``answer_2`` -> ``answer`` (the name before a numeric suffix)."""
    return _SUFFIX.sub("", key)


def unique_key(key: str, taken: Any) -> str:
    """``key``, or ``<base>_<n>`` with the smallest n not in ``taken``."""
    if key not in taken:
        return key
    base = base_name(key)
    n = 1
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def title_of(key: str) -> str:
    """The title pydantic gives a field named ``key`` (``final_answer`` -> ``Final Answer``)."""
    return " ".join(part.capitalize() for part in key.split("_") if part)


def plural(word: str) -> str:
    """English plural of a field name: ``query`` -> ``queries``, ``answer`` -> ``answers``."""
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    return word + "s"


def _renamed_property(prop: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    prop = dict(prop)
    if old != new and prop.get("title") == title_of(old):
        prop["title"] = title_of(new)
    return prop


# -- concatenation --------------------------------------------------------------------------


def _concatenated_keys(keys1: list[str], keys2: list[str]) -> list[tuple[str, str]]:
    """For each key of the second object, the name it gets next to the first's keys."""
    taken = set(keys1)
    renamed = []
    for key in keys2:
        new = unique_key(key, taken)
        taken.add(new)
        renamed.append((key, new))
    return renamed


def concatenate_json(json1: dict[str, Any], json2: dict[str, Any]) -> dict[str, Any]:
    """Every field of both objects; a name already used gets a numeric suffix."""
    result = dict(json1)
    for old, new in _concatenated_keys(list(json1), list(json2)):
        result[new] = json2[old]
    return result


def concatenate_schema(schema1: dict[str, Any], schema2: dict[str, Any]) -> dict[str, Any]:
    """The schema of :func:`concatenate_json` of two objects of these schemas (title: the first's)."""
    properties1 = schema1.get("properties", {})
    properties2 = schema2.get("properties", {})
    required2 = set(schema2.get("required", []))
    properties = {key: copy.deepcopy(value) for key, value in properties1.items()}
    required = [key for key in schema1.get("required", []) if key in properties]
    for old, new in _concatenated_keys(list(properties1), list(properties2)):
        properties[new] = _renamed_property(copy.deepcopy(properties2[old]), old, new)
        if old in required2:
            required.append(new)
    result: dict[str, Any] = {}
    defs = {**copy.deepcopy(schema2.get("$defs", {})), **copy.deepcopy(schema1.get("$defs", {}))}
    if defs:
        result["$defs"] = defs
    result.update({"additionalProperties": False, "properties": properties, "required": required,
                   "title": schema1.get("title") or schema2.get("title") or "DataModel", "type": "object"})
    return result


# -- factorization --------------------------------------------------------------------------


def _factor_groups(keys: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(base_name(key), []).append(key)
    return groups


def factorize_json(json: dict[str, Any]) -> dict[str, Any]:
    """Fields sharing a base name (``answer``, ``answer_1``) become one list (``answers``)."""
    result: dict[str, Any] = {}
    for base, keys in _factor_groups(list(json)).items():
        if len(keys) == 1:
            result[keys[0]] = json[keys[0]]
            continue
        values: list[Any] = []
        for key in keys:
            values.extend(json[key] if isinstance(json[key], list) and base_name(key) != key else [json[key]])
        result[plural(base)] = values
    return result


def factorize_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of :func:`factorize_json`: a group of fields becomes an array of the first one's type."""
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    new_properties: dict[str, Any] = {}
    new_required: list[str] = []
    for base, keys in _factor_groups(list(properties)).items():
        if len(keys) == 1:
            new_properties[keys[0]] = copy.deepcopy(properties[keys[0]])
            if keys[0] in required:
                new_required.append(keys[0])
            continue
        item = {key: value for key, value in copy.deepcopy(properties[keys[0]]).items() if key != "title"}
        name = plural(base)
        new_properties[name] = {"items": item, "title": title_of(name), "type": "array"}
        new_required.append(name)
    return {**{key: copy.deepcopy(value) for key, value in schema.items() if key not in ("properties", "required")},
            "properties": new_properties, "required": new_required}


# -- masks ----------------------------------------------------------------------------------


def _matcher(mask: list[str] | None, pattern: str | None) -> Callable[[str], bool]:
    names = set(mask or [])
    regex = re.compile(pattern) if pattern else None

    def matches(key: str) -> bool:
        base = base_name(key)
        return key in names or base in names or bool(regex and (regex.search(base) or regex.search(key)))

    return matches


def _mask_json(value: Any, keep: Callable[[str], bool], recursive: bool, top: bool = True) -> Any:
    if isinstance(value, dict):
        kept = {key: item for key, item in value.items() if keep(key)} if top or recursive else dict(value)
        if recursive:
            kept = {key: _mask_json(item, keep, recursive, top=False) for key, item in kept.items()}
        return kept
    if isinstance(value, list) and recursive:
        return [_mask_json(item, keep, recursive, top=False) for item in value]
    return value


def _mask_schema(schema: dict[str, Any], keep: Callable[[str], bool], recursive: bool) -> dict[str, Any]:
    result = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        if "properties" not in node:
            return
        node["properties"] = {key: value for key, value in node["properties"].items() if keep(key)}
        if "required" in node:
            node["required"] = [key for key in node["required"] if key in node["properties"]]
        if recursive:
            for value in node["properties"].values():
                visit(value)
                if isinstance(value.get("items"), dict):
                    visit(value["items"])

    visit(result)
    if recursive:
        for definition in result.get("$defs", {}).values():
            visit(definition)
    return result


def in_mask_json(json: dict[str, Any], mask: list[str] | None = None, pattern: str | None = None,
                 recursive: bool = True) -> dict[str, Any]:
    """Only the top-level fields named in ``mask`` (or matching ``pattern``), by base name, kept whole.

    ``recursive`` is accepted for synalinks' signature; a kept field keeps everything inside it.
    """
    matches = _matcher(mask, pattern)
    return {key: value for key, value in json.items() if matches(key)}


def in_mask_schema(schema: dict[str, Any], mask: list[str] | None = None, pattern: str | None = None,
                   recursive: bool = True) -> dict[str, Any]:
    """The schema of :func:`in_mask_json`."""
    matches = _matcher(mask, pattern)
    result = copy.deepcopy(schema)
    result["properties"] = {key: value for key, value in schema.get("properties", {}).items() if matches(key)}
    result["required"] = [key for key in schema.get("required", []) if key in result["properties"]]
    return result


def out_mask_json(json: dict[str, Any], mask: list[str] | None = None, pattern: str | None = None,
                  recursive: bool = True) -> dict[str, Any]:
    """Every field except those named in ``mask`` (or matching ``pattern``), by base name; nested too."""
    matches = _matcher(mask, pattern)
    return _mask_json(json, lambda key: not matches(key), recursive)


def out_mask_schema(schema: dict[str, Any], mask: list[str] | None = None, pattern: str | None = None,
                    recursive: bool = True) -> dict[str, Any]:
    """The schema of :func:`out_mask_json`."""
    matches = _matcher(mask, pattern)
    return _mask_schema(schema, lambda key: not matches(key), recursive)


# -- renaming -------------------------------------------------------------------------------


def _rename_schema(schema: dict[str, Any], rename: Callable[[str], str]) -> dict[str, Any]:
    result = copy.deepcopy(schema)
    result["properties"] = {rename(key): _renamed_property(value, key, rename(key))
                            for key, value in schema.get("properties", {}).items()}
    result["required"] = [rename(key) for key in schema.get("required", [])]
    return result


def prefix_json(json: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``{"answer": ..}`` -> ``{"<prefix>_answer": ..}``."""
    return {f"{prefix}_{key}": value for key, value in json.items()}


def prefix_schema(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    return _rename_schema(schema, lambda key: f"{prefix}_{key}")


def suffix_json(json: dict[str, Any], suffix: str) -> dict[str, Any]:
    """``{"answer": ..}`` -> ``{"answer_<suffix>": ..}``."""
    return {f"{key}_{suffix}": value for key, value in json.items()}


def suffix_schema(schema: dict[str, Any], suffix: str) -> dict[str, Any]:
    return _rename_schema(schema, lambda key: f"{key}_{suffix}")


# -- comparison -----------------------------------------------------------------------------


def standardize_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in the form promptgym stores (every object schema states ``type``)."""
    result = copy.deepcopy(schema)
    if "properties" in result:
        result.setdefault("type", "object")
    return result


def is_schema_equal(schema1: dict[str, Any], schema2: dict[str, Any]) -> bool:
    """Same fields with the same types (titles and descriptions aside)."""

    def shape(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: shape(value) for key, value in node.items() if key not in ("title", "description")}
        if isinstance(node, list):
            return [shape(value) for value in node]
        return node

    return shape(schema1.get("properties", {})) == shape(schema2.get("properties", {}))


def contains_schema(schema: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether every field of ``other`` is a field of ``schema``."""
    return set(other.get("properties", {})) <= set(schema.get("properties", {}))


def inline_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``$ref`` replaced by the definition it points to (no ``$defs`` left).

    Recursive definitions are left as references (with their ``$defs``).
    """
    defs = schema.get("$defs", {})

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref", "")
            if reference.startswith("#/$defs/"):
                name = reference.split("/")[-1]
                if name in seen or name not in defs:
                    return dict(node)
                extra = {key: value for key, value in node.items() if key != "$ref"}
                return {**resolve(defs[name], (*seen, name)), **extra}
            return {key: resolve(value, seen) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [resolve(value, seen) for value in node]
        return node

    result = resolve(schema, ())
    if "$ref" in json_dumps(result):
        result["$defs"] = copy.deepcopy(defs)
    return result


def json_dumps(value: Any) -> str:
    import json

    return json.dumps(value)


def dynamic_enum(schema: dict[str, Any], prop: str, labels: list[str], description: str | None = None,
                 inline: bool = True) -> dict[str, Any]:
    """``schema`` with property ``prop`` constrained to one of ``labels`` (inline, or as a ``$defs`` entry)."""
    result = copy.deepcopy(schema)
    title = prop.title().replace("_", "")
    enum = {"enum": list(labels), "title": title, "type": "string", **({"description": description} if description else {})}
    if inline:
        result.setdefault("properties", {})[prop] = enum
    else:
        result = {"$defs": {**result.pop("$defs", {}), title: enum}, **result}
        result.setdefault("properties", {})[prop] = {"$ref": f"#/$defs/{title}"}
    return result


def dynamic_enum_array(schema: dict[str, Any], prop: str, labels: list[str], description: str | None = None,
                       inline: bool = True) -> dict[str, Any]:
    """``schema`` with the array property ``prop``'s items constrained to ``labels``."""
    result = copy.deepcopy(schema)
    title = prop.title().replace("_", "")
    if inline:
        items: dict[str, Any] = {"type": "string", "enum": list(labels)}
    else:
        enum = {"enum": list(labels), "title": title, "type": "string",
                **({"description": description} if description else {})}
        result = {"$defs": {**result.pop("$defs", {}), title: enum}, **result}
        items = {"$ref": f"#/$defs/{title}"}
    for node in [result, *result.get("$defs", {}).values()]:
        if prop in node.get("properties", {}):
            node["properties"][prop] = {**node["properties"][prop], "type": "array", "items": items,
                                        **({"description": description} if description else {})}
            return result
    raise ValueError(f"dynamic_enum_array: the schema has no property {prop!r}")
