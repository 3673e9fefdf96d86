"""``promptgym.embedding_models``: embedding models by identifier (synalinks' ``embedding_models`` package).

    em = promptgym.embedding_models.get("local/multilingual-e5-small")
    config = promptgym.embedding_models.serialize(em)
    same = promptgym.embedding_models.deserialize(config)
"""

from __future__ import annotations

from promptgym.core.serialization import identifier_functions
from promptgym.lm.embedding_model import EmbeddingModel

get, serialize, deserialize = identifier_functions(EmbeddingModel, "embedding model")

__all__ = ["EmbeddingModel", "deserialize", "get", "serialize"]
