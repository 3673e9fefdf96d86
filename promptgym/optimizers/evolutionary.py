"""``EvolutionaryOptimizer``: what an optimizer that evolves a population of candidates is given (OMEGA's base).

The arguments shape the evolution: how parents are chosen (``selection``:
``"softmax"`` over rewards at ``selection_temperature``, ``"best"``, ``"random"``),
how creative the language model is when it mutates or crosses candidates
(``mutation_temperature``, ``crossover_temperature``), how often parents are
crossed (``merging_rate`` per epoch) and how many candidates survive
(``population_size``). :meth:`select_candidate` picks among candidate dicts
that carry a ``reward``.

synalinks' variable-level evolution step is here too (:meth:`propose_new_candidates`: choose a variable,
a parent among its best candidates, mutation or crossover, and put the child into the variable), over the
hooks of :mod:`promptgym.optimizers.variable_population`; a subclass writes the children
(:meth:`mutate_candidate`, :meth:`merge_candidate`: OMEGA's ask its language model).
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
        if not 0 <= merging_rate <= 1:
            raise ValueError(f"{owner}: merging_rate must be in [0, 1], got {merging_rate!r}")
        super().__init__(seed=seed, budget=budget, name=name, description=description,
                         population_size=population_size, sampling_temperature=sampling_temperature)
        self.language_model = language_model
        self.mutation_temperature = float(mutation_temperature)
        self.crossover_temperature = float(crossover_temperature)
        self.selection = str(selection).lower()
        self.selection_temperature = float(selection_temperature)
        self.merging_rate = float(merging_rate)

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

    # -- synalinks' variable-level evolution step -----------------------------------------------

    def choose_parent(self, best_candidates: list[dict[str, Any]]) -> dict[str, Any]:
        return self.select_candidate(best_candidates, self.variable_rng()) or best_candidates[0]

    async def select_evolving_strategy(self) -> str:
        """``"crossover"`` with probability ``merging_rate`` per epoch done (capped at 1), else ``"mutation"``."""
        return "crossover" if self.variable_rng().random() <= self.merging_rate * self.epochs_done else "mutation"

    async def propose_new_candidates(self, step: int, trainable_variables: list[Any], x: Any = None, y: Any = None,
                                     y_pred: Any = None, training: bool = False) -> None:
        """Change one variable: a parent among its best candidates (a seed candidate while it has none),
        mutated, or crossed with another best one, and the child put into the variable."""
        name = await self.select_variable_name_to_update(trainable_variables)
        strategy = await self.select_evolving_strategy()
        for variable in trainable_variables:
            if variable.name != name:
                continue
            best = variable.get("best_candidates") or []
            parent = self.select_candidate(best, self.variable_rng())
            if parent is None and variable.get("seed_candidates"):
                parent = self.pick(variable.get("seed_candidates"))
            if strategy == "crossover" and len(best) >= 2:
                other = await self.select_candidate_to_merge(step, variable)
                child = await self.merge_candidate(step, variable, parent, other, x=x, y=y, y_pred=y_pred,
                                                   training=training)
            else:  # too few to cross: mutate
                child = await self.mutate_candidate(step, variable, parent, x=x, y=y, y_pred=y_pred, training=training)
            await self.assign_candidate(variable, new_candidate=child)

    async def mutate_candidate(self, step: int, trainable_variable: Any, selected_candidate: dict[str, Any] | None,
                               x: Any = None, y: Any = None, y_pred: Any = None, training: bool = False) -> Any:
        """A mutated ``selected_candidate`` (None: no child); subclasses write it (OMEGA asks its model)."""
        raise NotImplementedError(f"{type(self).__name__} does not write mutations: subclass it (see OMEGA)")

    async def merge_candidate(self, step: int, trainable_variable: Any, current_candidate: dict[str, Any] | None,
                              other_candidate: dict[str, Any] | None, x: Any = None, y: Any = None, y_pred: Any = None,
                              training: bool = False) -> Any:
        """``current_candidate`` crossed with ``other_candidate`` (None: no child); subclasses write it."""
        raise NotImplementedError(f"{type(self).__name__} does not write crossovers: subclass it (see OMEGA)")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.naming_config(), "mutation_temperature": self.mutation_temperature,
                "crossover_temperature": self.crossover_temperature, "selection": self.selection,
                "selection_temperature": self.selection_temperature, "sampling_temperature": self.sampling_temperature,
                "merging_rate": self.merging_rate, "population_size": self.population_size}
