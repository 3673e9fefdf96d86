"""synalinks' variable-level optimizer hooks: each trainable variable keeps its own population in its
``Trainable`` fields (``seed_candidates``, ``candidates``, ``best_candidates``, ``history``,
``current_predictions``, ``predictions``, ``nb_visit``, ``cumulative_reward``), and the hooks update it in place.

promptgym's ``fit()`` keeps the population in the optimizer (``Optimizer.candidates``, scored by rollouts) and
drives ``train_step`` (:mod:`promptgym.optimizers.base`). These hooks are for code written against synalinks'
protocol: a ported optimizer whose overrides call ``super()``, or a loop that drives an optimizer over a
program's variables by hand. Every optimizer has them (the base class mixes them in)::

    optimizer = pg.optimizers.RandomFewShot(population_size=5)
    await optimizer.on_batch_begin(step, epoch, program.trainable_variables)   # a parent into each variable
    await optimizer.assign_reward_to_predictions(program.trainable_variables, rewards=[1.0, 0.0])
    await optimizer.maybe_add_candidate(step, variable, reward=0.5)
    await optimizer.on_epoch_end(epoch, program.trainable_variables)    # the variable form: keep the best

``on_epoch_end`` (and ``on_epoch_begin``) take either form: ``(ctx, epoch)`` from ``fit()``, or synalinks'
``(epoch, trainable_variables)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.core.base_models import Trainable
from promptgym.core.json_ops import out_mask_json

STATE_FIELDS = [name for name in Trainable.model_fields if name != "examples"]
"""A variable's optimizer bookkeeping: what a candidate (its value) leaves out; its examples stay."""


def value_of(candidate: dict[str, Any]) -> dict[str, Any]:
    """A candidate without its ``reward``: what a variable holds.

    >>> value_of({"instructions": "Be brief.", "reward": 0.5})
    {'instructions': 'Be brief.'}
    """
    return {key: item for key, item in candidate.items() if key != "reward"}


def by_reward(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Highest ``reward`` first (a missing reward counts as 0)."""
    return sorted(candidates, key=lambda candidate: float(candidate.get("reward") or 0.0), reverse=True)


class VariablePopulation:
    """The variable-level hooks of synalinks' ``Optimizer`` (see the module doc); the host sets
    ``population_size``, ``sampling_temperature`` and ``seed``."""

    population_size: int
    sampling_temperature: float
    seed: int | None
    _program: Any = None
    _variable_rng: np.random.Generator | None = None

    # -- the program (synalinks' trainer hands it to the optimizer) -------------------------

    def set_program(self, program: Any) -> None:
        """The program whose variables the hooks update (its ``description`` goes into OMEGA's requests)."""
        self._program = program

    @property
    def program(self) -> Any:
        return self._program

    def variable_rng(self) -> np.random.Generator:
        if self._variable_rng is None:
            self._variable_rng = np.random.default_rng(self.seed)
        return self._variable_rng

    def pick(self, items: list[Any]) -> Any:
        return items[int(self.variable_rng().integers(len(items)))]

    # -- training and epochs (the variable forms of the trainer hooks) -----------------------

    async def seed_population(self, trainable_variables: list[Any]) -> None:
        """synalinks' ``on_train_begin(trainable_variables)``: each variable's current value becomes its seed
        candidate (when it has none) and its candidate lists start empty."""
        for variable in trainable_variables:
            seeds = variable.get("seed_candidates")
            if seeds is not None and not seeds:
                variable.update({"seed_candidates": [out_mask_json(variable.get_json(), mask=STATE_FIELDS)]})
            variable.update({"candidates": [], "best_candidates": []})

    async def start_variable_epoch(self, epoch: int, trainable_variables: list[Any]) -> None:
        """synalinks' ``on_epoch_begin(epoch, trainable_variables)``: the epoch's predictions and candidates
        start empty."""
        for variable in trainable_variables:
            variable.update({"predictions": [], "candidates": []})

    async def keep_best_value(self, trainable_variables: list[Any]) -> None:
        """synalinks' ``on_train_end(trainable_variables)``: each variable takes its best candidate's value."""
        await self.on_batch_end(-1, -1, trainable_variables)

    # -- batches ----------------------------------------------------------------------------

    async def on_batch_begin(self, step: int, epoch: int, trainable_variables: list[Any]) -> None:
        """Put a parent into each variable (a seed candidate in epoch 0, else one of its best) and reset its
        per-batch signal (``nb_visit``, ``cumulative_reward``)."""
        for variable in trainable_variables:
            best = variable.get("best_candidates") or []
            seeds = variable.get("seed_candidates") or []
            if epoch != 0 and best:
                variable.update(value_of(self.choose_parent(best)))
            elif seeds:
                variable.update(dict(self.pick(seeds)))
            variable.update({"nb_visit": 0, "cumulative_reward": 0.0})

    def choose_parent(self, best_candidates: list[dict[str, Any]]) -> dict[str, Any]:
        """The best candidate a batch starts from (any one here; an EvolutionaryOptimizer draws by ``selection``)."""
        return self.pick(best_candidates)

    async def on_batch_end(self, step: int, epoch: int, trainable_variables: list[Any]) -> None:
        """Put each variable's best candidate so far (of ``candidates`` and ``best_candidates``) into it."""
        for variable in trainable_variables:
            pool = (variable.get("candidates") or []) + (variable.get("best_candidates") or [])
            if pool:
                variable.update(value_of(by_reward(pool)[0]))

    async def assign_reward_to_predictions(self, trainable_variables: list[Any], rewards: list[float] | None = None
                                           ) -> None:
        """Give this batch's unscored predictions their rewards, in order; ``nb_visit`` / ``cumulative_reward``
        become this batch's (the signal :meth:`select_variable_name_to_update` reads), unless the pass scored
        nothing for the variable (a validation pass); the predictions join ``predictions``."""
        rewards = list(rewards) if rewards else [0.0]
        for variable in trainable_variables:
            current = variable.get("current_predictions") or []
            for prediction, reward in zip([p for p in current if p.get("reward") is None], rewards):
                prediction["reward"] = reward
            scored = [p["reward"] for p in current if p.get("reward") is not None]
            if scored:
                variable.update({"nb_visit": len(scored), "cumulative_reward": float(sum(scored))})
            variable.update({"predictions": (variable.get("predictions") or []) + current,
                             "current_predictions": []})

    # -- choosing what to change ------------------------------------------------------------

    async def select_variable_name_to_update(self, trainable_variables: list[Any]) -> str:
        """The name of the variable to change next: the ones that struggled this batch (low mean reward; never
        visited first) are likelier, by a softmax at ``sampling_temperature``."""
        means = []
        for variable in trainable_variables:
            visits = variable.get("nb_visit") or 0
            means.append(100000.0 if not visits else float(variable.get("cumulative_reward") or 0.0) / visits)
        scaled = -np.asarray(means) / self.sampling_temperature
        weights = np.exp(scaled - scaled.max())
        index = int(self.variable_rng().choice(len(trainable_variables), p=weights / weights.sum()))
        return trainable_variables[index].name

    async def select_candidate_to_merge(self, step: int, trainable_variable: Any) -> dict[str, Any] | None:
        """One of the variable's best candidates (None when it has none)."""
        best = trainable_variable.get("best_candidates") or []
        return self.pick(best) if best else None

    # -- candidates -------------------------------------------------------------------------

    async def assign_candidate(self, trainable_variable: Any, new_candidate: Any = None,
                               examples: list[Any] | None = None) -> None:
        """Put ``new_candidate`` (a data model or a dict) and/or ``examples`` into the variable."""
        update = dict(as_json(new_candidate) or {})
        if examples:
            update["examples"] = examples
        if update:
            trainable_variable.update(update)

    async def maybe_add_candidate(self, step: int, trainable_variable: Any, new_candidate: Any = None,
                                  examples: list[Any] | None = None, reward: float | None = None) -> None:
        """Add ``new_candidate`` (default: the variable's current value) to ``candidates`` with ``reward``,
        unless the same value is already among its candidates or best candidates."""
        mask = [*Trainable.model_fields, "reward"]  # what a candidate is compared on: its value, not its examples
        value = out_mask_json(as_json(new_candidate) or trainable_variable.get_json(), mask=mask)
        if not examples:
            examples = trainable_variable.get("examples")
        known = (trainable_variable.get("best_candidates") or []) + (trainable_variable.get("candidates") or [])
        if any(out_mask_json(candidate, mask=mask) == value for candidate in known):
            return
        candidates = trainable_variable.get("candidates") or []
        candidates.append({**value, "examples": examples, "reward": reward or 0.0})
        trainable_variable.update({"candidates": candidates})

    # -- epochs (the variable form of on_epoch_end) -------------------------------------------

    async def survivors(self, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Which candidates stay in ``best_candidates`` (the ``population_size`` fittest; OMEGA: its DNS)."""
        return by_reward(candidates)[: self.population_size]

    async def select_population(self, epoch: int, trainable_variables: list[Any]) -> None:
        """synalinks' ``on_epoch_end(epoch, trainable_variables)``: each variable keeps its survivors as
        ``best_candidates``, takes the best one's value, and records it in ``history`` when it changed."""
        for variable in trainable_variables:
            pool = (variable.get("candidates") or []) + (variable.get("best_candidates") or [])
            if not pool:
                continue
            kept = by_reward(await self.survivors(pool))
            variable.update({"best_candidates": kept})
            best = value_of(kept[0])
            variable.update(best)
            history = variable.get("history")
            if history is not None and (not history or history[-1] != best):
                variable.update({"history": [*history, best]})


def as_json(value: Any) -> dict[str, Any] | None:
    """A data model's JSON, a dict as it is, None for None."""
    if value is None:
        return None
    return value.get_json() if callable(getattr(value, "get_json", None)) else dict(value)
