"""Records as the knowledge modules see them: JsonDataModels (a DataModel instance is converted)."""

from __future__ import annotations

from typing import Any

from promptgym.core.json_data_model import JsonDataModel
from promptgym.modules.symbolic import SymbolicDataModel


def as_json_data_model(value: Any) -> JsonDataModel:
    return value if isinstance(value, JsonDataModel) else JsonDataModel(data_model=value)


def value_name(value: Any) -> str | None:
    """The name a JsonDataModel or symbolic data model carries (a DataModel's ``name`` may be a field: not read)."""
    return value.name if isinstance(value, (JsonDataModel, SymbolicDataModel)) else None
