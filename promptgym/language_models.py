"""``promptgym.language_models``: language models by identifier (synalinks' ``language_models`` package).

    lm = promptgym.language_models.get("local/qwen2.5-coder-0.5b-instruct")
    config = promptgym.language_models.serialize(lm)
    same = promptgym.language_models.deserialize(config)
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import by_identifier, custom_object_scope, deserialize_object, serialize_object
from promptgym.lm.language_model import LanguageModel


def get(identifier: Any) -> LanguageModel:
    """A LanguageModel from an instance, a model string or a ``{"class_name", "config"}`` dict."""
    return by_identifier(identifier, LanguageModel, "language model")


def serialize(model: LanguageModel) -> dict[str, Any]:
    return serialize_object(model)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> LanguageModel:
    with custom_object_scope(custom_objects or {}):
        return deserialize_object(config, expected="language model")


__all__ = ["LanguageModel", "deserialize", "get", "serialize"]
