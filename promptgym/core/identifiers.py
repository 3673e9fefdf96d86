"""Keras-style identifiers: instances, case-insensitive strings, or config dicts.

    get_by_identifier("random_few_shot", OPTIMIZERS, "optimizer")   # -> RandomFewShot()
    get_by_identifier({"class_name": "Mean", "config": {}}, METRICS, "metric")
"""

from __future__ import annotations

from typing import Any, Callable

from promptgym.core.serialization import deserialize_object, resolve


def normalize_identifier(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "").replace(" ", "")


def get_by_identifier(identifier: Any, table: dict[str, Callable[..., Any]], kind: str,
                      base: type | None = None) -> Any:
    """Resolve ``identifier`` against ``table`` (normalized name -> factory)."""
    if base is not None and isinstance(identifier, base):
        return identifier
    if isinstance(identifier, str):
        key = normalize_identifier(identifier)
        if key not in table:
            raise ValueError(f"unknown {kind} {identifier!r}; valid names: {', '.join(sorted(table))}")
        return table[key]()
    if isinstance(identifier, dict):
        if "class_name" not in identifier:
            raise ValueError(f"a {kind} config dict needs 'class_name' (and optionally 'config'), got keys {sorted(identifier)}")
        key = normalize_identifier(identifier["class_name"])
        if key in table and isinstance(table[key], type):
            return table[key].from_config(identifier.get("config", {}))  # type: ignore[attr-defined]
        resolve(identifier["class_name"], expected=kind)
        return deserialize_object(identifier, expected=kind)
    if base is not None:
        raise TypeError(f"{kind} must be a {base.__name__}, a name or a config dict, got {type(identifier).__name__}")
    return identifier
