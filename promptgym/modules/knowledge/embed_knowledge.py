"""``EmbedKnowledge``: add an ``embedding`` vector to each record, from the fields a mask keeps.

    inputs = Input(data_model=Document)
    outputs = await EmbedKnowledge(embedding_model=em, in_mask=["text"])(inputs)
    # program(Document(...)) -> the document's fields and "embedding": [...]
"""

from __future__ import annotations

import copy
from typing import Any

from promptgym.core.base_models import Embedding, EmbeddingRequest
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import register_builtin, serialize_object, with_objects
from promptgym.core.tree import flatten, map_structure, pack_as
from promptgym.embedding_models import get as get_embedding_model
from promptgym.modules.knowledge.values import as_json_data_model, value_name
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel

EMBEDDING_FIELD = Embedding.get_schema()["properties"]["embedding"]


def embedding_text(values: dict[str, Any], in_mask: list[str] | None, out_mask: list[str] | None) -> str:
    """The text embedded for a record: the kept fields' values, space-separated (synalinks' rule)."""
    if out_mask:
        values = {key: value for key, value in values.items() if key not in out_mask}
    elif in_mask:
        values = {key: value for key, value in values.items() if key in in_mask}
    return " ".join(str(leaf) for leaf in flatten(list(values.values())) if leaf not in (None, ""))


def with_embedding(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    schema.setdefault("properties", {})["embedding"] = copy.deepcopy(EMBEDDING_FIELD)
    return schema


@register_builtin
class EmbedKnowledge(Module):
    """Embed each input record (``in_mask``: fields to use; ``out_mask``: fields to leave out); one batched call."""

    def __init__(self, *, embedding_model: Any = None, in_mask: list[str] | None = None,
                 out_mask: list[str] | None = None, name: str | None = None, description: str | None = None,
                 trainable: bool = False) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        self.embedding_model = get_embedding_model(embedding_model) if embedding_model is not None else None
        self.in_mask = in_mask
        self.out_mask = out_mask

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None
        if self.embedding_model is None:
            raise ValueError(f"EmbedKnowledge {self.name!r} has no embedding_model")
        leaves = [None if leaf is None else as_json_data_model(leaf) for leaf in flatten(inputs)]
        pending = [leaf for leaf in leaves if leaf is not None and not leaf.get_json().get("embedding")]
        vectors: dict[int, list[float]] = {}
        if pending:
            texts = [embedding_text(leaf.get_json(), self.in_mask, self.out_mask) for leaf in pending]
            result = await self.embedding_model(EmbeddingRequest(texts=texts))
            for leaf, vector in zip(pending, result.get("embeddings") or []):
                vectors[id(leaf)] = [float(value) for value in vector]

        def embed(leaf: Any) -> Any:
            if leaf is None:
                return None
            json = leaf.get_json()
            json["embedding"] = vectors.get(id(leaf), json.get("embedding"))
            return JsonDataModel(json=json, schema=with_embedding(leaf.get_schema()),
                                 name="embedded_" + (value_name(leaf) or self.name))

        return pack_as(inputs, [embed(leaf) for leaf in leaves])

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return map_structure(lambda spec: SymbolicDataModel(schema=with_embedding(spec.get_schema()),
                                                            name="embedded_" + (value_name(spec) or self.name)), inputs)

    def get_config(self) -> dict[str, Any]:
        return {"embedding_model": serialize_object(self.embedding_model) if self.embedding_model else None,
                "in_mask": self.in_mask, "out_mask": self.out_mask, **super().get_config()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "EmbedKnowledge":
        return cls(**with_objects(config, embedding_model="embedding model"))
