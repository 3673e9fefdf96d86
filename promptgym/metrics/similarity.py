"""``CosineSimilarity`` as a metric: the mean cosine similarity of label and prediction embeddings."""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.metrics.base import Metric
from promptgym.rewards.base import JsonView, RewardResult
from promptgym.rewards.builtin import CosineSimilarity as CosineSimilarityReward


@register_builtin
class CosineSimilarity(Metric):
    """Same scoring as the reward (``promptgym.rewards.CosineSimilarity``), reported as a metric.

    ``axis`` is accepted for synalinks code (the embeddings are one vector per text).
    """

    default_name = "cosine_similarity"

    @property
    def _fn_kwargs(self) -> dict[str, Any]:
        """synalinks' name for the arguments its wrapped function gets."""
        return {"axis": self.axis, "embedding_model": self.embedding_model}

    def __init__(self, embedding_model: Any = None, axis: int = -1, name: str | None = None, **masks: Any) -> None:
        self.axis = axis
        self._reward = CosineSimilarityReward(embedding_model=embedding_model)
        self.embedding_model = self._reward.embedding_model
        super().__init__(name=name, **masks)

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        return await self._reward.compute(y_true, y_pred)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "axis": self.axis, "embedding_model": serialize_object(self.embedding_model)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "CosineSimilarity":
        return cls(**{**config, "embedding_model": deserialize_object(config["embedding_model"],
                                                                      expected="embedding model")})
