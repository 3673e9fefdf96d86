"""``promptgym.rewards``: what training maximises."""

from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.rewards.base import JsonView, Reward, RewardResult
from promptgym.rewards.builtin import CosineSimilarity, ExactMatch, LMAsJudge, MeanRewardWrapper

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
__all__ = ["CosineSimilarity", "ExactMatch", "JsonView", "LMAsJudge", "MeanRewardWrapper", "REWARDS", "Reward",
           "RewardResult", "get"]
