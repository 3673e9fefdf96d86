"""``promptgym.embedding_models``: embedding models by identifier (synalinks' ``embedding_models`` package).

    em = promptgym.embedding_models.get("local/multilingual-e5-small")
    config = promptgym.embedding_models.serialize(em)
    same = promptgym.embedding_models.deserialize(config)
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import by_identifier, custom_object_scope, deserialize_object, serialize_object
from promptgym.lm.embedding_model import EmbeddingModel


def get(identifier: Any) -> EmbeddingModel:
    """An EmbeddingModel from an instance, a model string or a ``{"class_name", "config"}`` dict."""
    return by_identifier(identifier, EmbeddingModel, "embedding model")


def serialize(model: EmbeddingModel) -> dict[str, Any]:
    return serialize_object(model)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> EmbeddingModel:
    with custom_object_scope(custom_objects or {}):
        return deserialize_object(config, expected="embedding model")


__all__ = ["EmbeddingModel", "deserialize", "get", "serialize"]
