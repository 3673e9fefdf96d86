"""``promptgym.rewards``: what training maximises."""

from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.core.serialization import deserialize_in_scope, register_builtin, serialize_object
from promptgym.rewards.base import JsonView, NoReward, Reward, RewardResult
from promptgym.rewards.builtin import (
    BatchReward,
    BatchRewardFunctionWrapper,
    CosineSimilarity,
    ExactMatch,
    LMAsJudge,
    MeanRewardWrapper,
    RewardFunctionWrapper,
    cosine_similarity,
    exact_match,
)
from promptgym.rewards.judge_program import LMAsJudgeProgram

register_builtin(NoReward)

REWARDS = {
    "exactmatch": ExactMatch,
    "cosinesimilarity": CosineSimilarity,
    "lmasjudge": LMAsJudge,
}


def get(identifier: Any) -> Reward:
    """A reward from an instance, a name (``"exactmatch"``) or a config dict."""
    return get_by_identifier(identifier, REWARDS, "reward", base=Reward)


# ProgramAsJudge lives in promptgym.programs (it saves a program); ``import promptgym`` makes it
# promptgym.rewards.ProgramAsJudge too.
__all__ = ["BatchReward", "BatchRewardFunctionWrapper", "CosineSimilarity", "ExactMatch", "JsonView", "LMAsJudge",
           "LMAsJudgeProgram", "MeanRewardWrapper", "NoReward", "REWARDS", "Reward", "RewardFunctionWrapper", "RewardResult",
           "cosine_similarity", "exact_match", "get", "deserialize", "serialize"]


def serialize(reward: Any) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` of a reward."""
    return serialize_object(reward)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Any:
    """Rebuild a reward from :func:`serialize`'s dict (registered classes, or ``custom_objects``)."""
    return deserialize_in_scope(config, custom_objects, expected="reward")
