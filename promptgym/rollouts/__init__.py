"""The rollout layer: run the program on examples with given variable values (as data), score, memoise.

See docs/rollouts.md for the contract an executor (in-process, Ray) keeps.
"""

from promptgym.rollouts.executor import (
    Executor,
    InProcessExecutor,
    Outcome,
    Rollout,
    get_default_executor,
    run_rollout,
    set_default_executor,
)
from promptgym.rollouts.service import ExampleResult, RolloutService, TrainingAborted, variables_key

__all__ = ["ExampleResult", "Executor", "InProcessExecutor", "Outcome", "Rollout", "RolloutService",
           "TrainingAborted", "get_default_executor", "run_rollout", "set_default_executor", "variables_key"]
