"""``promptgym.rewards``: what training maximises."""

from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.core.serialization import register_builtin
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
           "cosine_similarity", "exact_match", "get"]
