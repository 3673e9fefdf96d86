"""``EvolutionaryOptimizer``: what an optimizer that evolves a population of candidates is given (OMEGA's base).

The arguments shape the evolution: how parents are chosen (``selection``:
``"softmax"`` over rewards at ``selection_temperature``, ``"best"``, ``"random"``),
how creative the language model is when it mutates or crosses candidates
(``mutation_temperature``, ``crossover_temperature``), how often parents are
crossed (``merging_rate`` per epoch) and how many candidates survive
(``population_size``). :meth:`select_candidate` picks among candidate dicts
that carry a ``reward``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.optimizers.base import Optimizer
from promptgym.optimizers.dns import SELECTIONS, selection_probabilities
from promptgym.optimizers.kit import OptimizerContext


def check_positive(owner: str, **values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{owner}: {name} must be > 0 (it divides the scores of a softmax), got {value!r}; "
                             "use a small value such as 0.1 for near-greedy behaviour")


class EvolutionaryOptimizer(Optimizer):
    """The evolution's arguments and parent selection; subclasses (OMEGA) do the evolving."""

    def __init__(self, language_model: Any = None, mutation_temperature: float = 0.3,
                 crossover_temperature: float = 0.3, selection: str = "softmax", selection_temperature: float = 0.3,
                 merging_rate: float = 0.02, population_size: int = 10, sampling_temperature: float = 0.3,
                 name: str | None = None, description: str | None = None, seed: int | None = None,
                 budget: Any = None) -> None:
        owner = type(self).__name__
        check_positive(owner, mutation_temperature=mutation_temperature, crossover_temperature=crossover_temperature,
                       selection_temperature=selection_temperature, sampling_temperature=sampling_temperature)
        if str(selection).lower() not in SELECTIONS:
            raise ValueError(f"{owner}: unknown selection {selection!r}; expected one of {', '.join(map(repr, SELECTIONS))}")
        if not isinstance(population_size, int) or population_size < 1:
            raise ValueError(f"{owner}: population_size must be an integer >= 1, got {population_size!r}")
        if not 0 <= merging_rate <= 1:
            raise ValueError(f"{owner}: merging_rate must be in [0, 1], got {merging_rate!r}")
        super().__init__(seed=seed, budget=budget, name=name, description=description)
        self.language_model = language_model
        self.mutation_temperature = float(mutation_temperature)
        self.crossover_temperature = float(crossover_temperature)
        self.selection = str(selection).lower()
        self.selection_temperature = float(selection_temperature)
        self.sampling_temperature = float(sampling_temperature)
        self.merging_rate = float(merging_rate)
        self.population_size = population_size

    def select_candidate(self, candidates: list[dict[str, Any]], rng: np.random.Generator | None = None
                         ) -> dict[str, Any] | None:
        """A candidate (a dict with a ``reward``) chosen by ``selection``; None from an empty list."""
        if not candidates:
            return None
        rewards = [float(candidate.get("reward") or 0.0) for candidate in candidates]
        probabilities = selection_probabilities(rewards, self.selection, self.selection_temperature)
        return candidates[int((rng or np.random.default_rng(self.seed)).choice(len(candidates), p=probabilities))]

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        raise NotImplementedError(f"{type(self).__name__} holds the evolution's settings; train with OMEGA")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.naming_config(), "mutation_temperature": self.mutation_temperature,
                "crossover_temperature": self.crossover_temperature, "selection": self.selection,
                "selection_temperature": self.selection_temperature, "sampling_temperature": self.sampling_temperature,
                "merging_rate": self.merging_rate, "population_size": self.population_size}
