"""Generic data models synalinks programs use: inputs/outputs pairs, predictions, embeddings, trainable state.

``Trainable`` is the base of a custom module's trainable variable (the
fields an optimizer reads: ``examples``, ``predictions``...); subclass it
with your own fields and ``self.add_variable(data_model=MyState)``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional, Union

from promptgym.core.data_model import DataModel, Field


__all__ = [
    "Embedding",
    "EmbeddingRequest",
    "Embeddings",
    "GenericIO",
    "GenericInputs",
    "GenericOutputs",
    "GenericResult",
    "Instructions",
    "Prediction",
    "Stamp",
    "Trainable",
    "is_embedded",
    "is_embedding",
    "is_embeddings",
    "is_instructions",
    "is_prediction",
    "is_stamped",
    "is_trainable",
]


class GenericInputs(DataModel):
    inputs: dict[str, Any] = Field(default_factory=dict, description="The inputs")


class GenericOutputs(DataModel):
    outputs: dict[str, Any] = Field(default_factory=dict, description="The outputs")


class GenericIO(DataModel):
    inputs: dict[str, Any] = Field(default_factory=dict, description="The inputs")
    outputs: dict[str, Any] = Field(default_factory=dict, description="The outputs")


class GenericResult(DataModel):
    result: list[Any] = Field(default_factory=list, description="The result")


class Stamp(DataModel):
    created_at: Optional[datetime] = Field(default=None, description="When it was created")


class EmbeddingRequest(DataModel):
    texts: Union[str, list[str]] = Field(description="The texts to embed")


class Embedding(DataModel):
    embedding: list[float] = Field(default_factory=list, description="A vector")


class Embeddings(DataModel):
    embeddings: list[list[float]] = Field(default_factory=list, description="One vector per text")


class Prediction(GenericIO):
    reward: Optional[float] = Field(default=None, description="The reward it earned")


class Trainable(DataModel):
    """The state a trainable variable carries for an optimizer."""

    examples: list[Prediction] = Field(default_factory=list, description="Few-shot examples")
    current_predictions: list[Prediction] = Field(default_factory=list, description="This batch's predictions")
    predictions: list[Prediction] = Field(default_factory=list, description="Predictions seen so far")
    seed_candidates: list[Any] = Field(default_factory=list, description="Starting candidates")
    candidates: list[Any] = Field(default_factory=list, description="Candidates")
    best_candidates: list[Any] = Field(default_factory=list, description="The best candidates")
    history: list[Any] = Field(default_factory=list, description="Past values")
    nb_visit: int = Field(default=0, description="How often it was selected")
    cumulative_reward: float = Field(default=0.0, description="Reward summed over its visits")


class Instructions(Trainable):
    instructions: Optional[str] = Field(default=None, description="The instructions")


def _has(value: Any, fields: set[str]) -> bool:
    schema = value.get_schema() if callable(getattr(value, "get_schema", None)) else {}
    return fields <= set(schema.get("properties", {}))


def is_embedding(value: Any) -> bool:
    return _has(value, {"embedding"})


def is_embeddings(value: Any) -> bool:
    return _has(value, {"embeddings"})


def is_embedded(value: Any) -> bool:
    return is_embedding(value)


def is_prediction(value: Any) -> bool:
    return _has(value, {"inputs", "outputs", "reward"})


def is_trainable(value: Any) -> bool:
    return value is None or _has(value, set(Trainable.model_fields)) or _has(value, {"instructions"}) \
        or _has(value, {"examples"})


def is_instructions(value: Any) -> bool:
    return _has(value, {"instructions"})


def is_stamped(value: Any) -> bool:
    return _has(value, {"created_at"})
