"""Group-normalised advantages (GRPO): each rollout is compared with the other rollouts of its seed.

    group_advantages([1.0, 0.0, 0.5, 0.5])      # [1.2244, -1.2244, 0.0, 0.0]
    group_advantages([1.0, 1.0, 1.0])           # None: no signal, the group is left out

advantage_i = (reward_i - mean) / (std + eps), ``std`` the sample standard deviation of the group (as TRL's
GRPOTrainer), or only ``reward_i - mean`` without ``scale``. A group whose rewards are all equal says
nothing about which rollout was better: every advantage would be 0, so it is reported and skipped.
"""

from __future__ import annotations

import math
from typing import Sequence

EPSILON = 1e-4
SIGNAL_TOLERANCE = 1e-9


def group_spread(rewards: Sequence[float]) -> float:
    """The sample standard deviation of a group's rewards (0 for fewer than two)."""
    if len(rewards) < 2:
        return 0.0
    mean = sum(rewards) / len(rewards)
    return math.sqrt(sum((reward - mean) ** 2 for reward in rewards) / (len(rewards) - 1))


def group_advantages(rewards: Sequence[float], scale: bool = True) -> list[float] | None:
    """The advantages of one group's rollouts, or None when the group carries no signal.

    >>> [round(a, 4) for a in group_advantages([1.0, 0.0, 0.5, 0.5])]
    [1.2244, -1.2244, 0.0, 0.0]
    >>> group_advantages([0.3, 0.3]) is None
    True
    """
    if len(rewards) < 2 or max(rewards) - min(rewards) <= SIGNAL_TOLERANCE:
        return None
    mean = sum(rewards) / len(rewards)
    divisor = group_spread(rewards) + EPSILON if scale else 1.0
    return [(reward - mean) / divisor for reward in rewards]
