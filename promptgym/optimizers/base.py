"""The optimizer protocol shared by RandomFewShot, Greedy, OMEGA, GEPA, MIPRO, FineTune and Sequence, and its kit.

``fit()`` hands the optimizer its run: ``await optimizer.run(trainer)``. A lone
optimizer runs as one stage (the base class's ``run``); ``Sequence`` runs each of
its stages in turn, through the same call. ``trainer`` is a
:class:`StageRunner`: ``await trainer.run_stage(optimizer, stage)`` trains one
optimizer to its kept best, and ``trainer.stop_training`` says the run was
stopped (an early stop, a spend cap). Inside a stage the trainer calls, in order::

    build(program)                      once, before the first fit
    await on_train_begin(ctx)
    for each epoch:
        await on_epoch_begin(ctx, epoch)
        for each training batch:
            logs = await train_step(ctx, batch_indices)    # propose, score, select
        await on_epoch_end(ctx, epoch)
    await on_train_end(ctx)

Before a run, the CLI asks three more things of the same protocol (each stage of
a Sequence answers for itself):

- ``estimate(program, sizes)``: a :class:`StageEstimate` per stage (model calls,
  training runs, a note such as FineTune's SFT steps) for the preview;
- ``check_before_run(program, x, y)``: the slow checks worth making before paying
  for a run (FineTune times one SFT step: it loads the model), as lines to show;
- ``place_outputs(folder)``: where the optimizer writes what it makes (FineTune:
  its SFT runs), inside the run folder.

``ctx`` is an :class:`~promptgym.optimizers.kit.OptimizerContext`. The
optimizer keeps every candidate it scored (``candidates``), the current best
(``best``), and its state (``get_state`` / ``set_state``), which
``program.save()`` stores so training can resume. The base class gives every
optimizer the same kit: a :class:`~promptgym.optimizers.kit.Budget`
(``self.budget``; :meth:`Optimizer.score` charges it), pacing over the
trainer's steps (:meth:`Optimizer.share`), a random generator whose state is
saved with the optimizer's (:meth:`Optimizer.start_rng`), and the program's
prompt states (``self.prompts``). docs/writing_an_optimizer.md shows a complete
prompt optimizer and a complete weight optimizer built on it.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, Sequence

import numpy as np

from promptgym.core.events import CandidateAccepted
from promptgym.lm.usage import LEDGER
from promptgym.modules.model_choice import assign_variables
from promptgym.optimizers.kit import Budget, OptimizerContext, TrainablePrompt, trainable_prompts, variable_owners
from promptgym.optimizers.variable_population import VariablePopulation
from promptgym.rollouts import ExampleResult


@dataclass
class Candidate:
    """A set of variable values and every score it earned, by split and example."""

    id: int
    variables: dict[str, Any]
    parent: int | None = None
    origin: str = "initial"
    epoch: int = 0
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    def record(self, results: list[ExampleResult]) -> None:
        for result in results:
            self.scores.setdefault(result.split, {})[str(result.index)] = result.reward

    def mean(self, split: str, indices: list[int] | None = None) -> float | None:
        scores = self.scores.get(split, {})
        keys = [str(i) for i in indices] if indices is not None else list(scores)
        values = [scores[k] for k in keys if k in scores]
        return float(np.mean(values)) if values else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Stage:
    """Where an optimizer runs in a chain: ``label`` ``"2:FineTune"``, ``index`` 1 of ``count`` 3."""

    label: str
    index: int
    count: int
    finish: Callable[[Any], Awaitable[Any]] | None = None
    """What the chain checks after this (its last) stage, with the stage's context, before its best is placed."""


class StageRunner(Protocol):
    """What ``Optimizer.run`` is handed: the trainer (``fit()``'s run), which trains one optimizer at a time."""

    @property
    def stop_training(self) -> bool:
        """The run was stopped (early stopping, a spend cap): no further stage should start."""

    async def run_stage(self, optimizer: "Optimizer", stage: Stage | None = None) -> None:
        """Train ``optimizer`` from its ``on_train_begin`` to its kept best (``stage``: its place in a chain)."""


@dataclass(frozen=True)
class FitSizes:
    """What a fit will see, for the estimates made before it starts (the CLI preview)."""

    train: int
    val: int
    epochs: int
    batch_size: int
    minibatch_size: int
    calls_per_run: int = 1
    """Model calls one program run makes (its Generators)."""


@dataclass(frozen=True)
class StageEstimate:
    """One stage's cost before it runs. ``None``: the optimizer gives no number, the preview assumes the few-shot
    loop (every training example each epoch; two candidates on one validation minibatch a step)."""

    optimizer: str
    lm_calls: int | None = None
    """Program runs it scores beyond the training runs (candidates, its checks on validation)."""
    training_runs: int | None = None
    """Program runs on training examples."""
    note: str = ""
    """Anything else it will cost (FineTune: SFT steps)."""


def lm_calls_since(snapshot: dict[str, Any]) -> int:
    """Model calls made (all phases) since ``snapshot``, not counting response-cache hits."""
    return sum(usage.calls - usage.cache_hits for usage in LEDGER.since(snapshot).values())


class Optimizer(VariablePopulation):
    """Base class: candidates, the best one, the kit, and the saved state; and synalinks' variable-level hooks
    (:mod:`promptgym.optimizers.variable_population`), with its ``population_size`` (the most candidates a
    variable keeps there) and ``sampling_temperature`` (how the variable to change is drawn)."""

    def __init__(self, seed: int | None = None, budget: Budget | None = None, name: str | None = None,
                 description: str | None = None, population_size: int = 10,
                 sampling_temperature: float = 0.3) -> None:
        if isinstance(population_size, bool) or not isinstance(population_size, int) or population_size < 1:
            raise ValueError(f"{type(self).__name__}: population_size must be an integer >= 1, got "
                             f"{population_size!r}")
        if isinstance(sampling_temperature, bool) or not isinstance(sampling_temperature, (int, float)) \
                or sampling_temperature <= 0:
            raise ValueError(f"{type(self).__name__}: sampling_temperature must be > 0 (it divides the scores of "
                             f"a softmax), got {sampling_temperature!r}")
        self.population_size = population_size
        self._sampling_temperature = float(sampling_temperature)
        self.seed = seed
        self.name = name or "".join(f"_{c.lower()}" if c.isupper() and i and not type(self).__name__[i - 1].isupper()
                                    else c.lower() for i, c in enumerate(type(self).__name__))
        self.description = description
        self.budget = budget or Budget()
        self.candidates: list[Candidate] = []
        self.best_id: int | None = None
        self.epochs_done = 0
        self.built = False
        self.prompts: list[TrainablePrompt] = []
        self.owners: dict[str, str] = {}
        """The module that owns each variable, by variable name."""
        self.stage_name: str | None = None
        """The Sequence stage this optimizer runs as (``"2:FineTune"``), set by ``fit()``; None alone."""
        self.last_check: Any = None
        """The latest validation check against the start (a ``selection.Comparison``; None before one)."""
        self.checked: dict[int, Any] = {}
        """Validation checks against the start already made, by candidate id (see ``optimizers.selection``)."""
        self._ids = itertools.count()
        self._rng: np.random.Generator | None = None
        self._rng_state: dict[str, Any] | None = None
        self._seed_used: int | None = None

    @property  # type: ignore[override]
    def sampling_temperature(self) -> float:
        """The softmax temperature at which the variable to change is drawn (synalinks' argument)."""
        return self._sampling_temperature

    @sampling_temperature.setter
    def sampling_temperature(self, value: float) -> None:
        self._sampling_temperature = float(value)

    # -- lifecycle ------------------------------------------------------------------------

    def build(self, program: Any) -> None:
        """Find the program's prompt states; remember its starting variables as the first candidate."""
        self.set_program(program)
        self.prompts = trainable_prompts(program)
        self.owners = variable_owners(program)
        if self.built:
            return
        start = self.add_candidate(self.trainable_values(program), origin="initial")
        self.best_id = start.id
        self.built = True

    async def run(self, trainer: StageRunner) -> None:
        """Train the program: a lone optimizer is one stage (``Sequence`` runs its stages, in turn, here)."""
        await trainer.run_stage(self)

    @property
    def in_progress(self) -> bool:
        """Its saved state puts it inside a run that is not over (a Sequence past its first stage): a resumed
        ``fit()`` goes on without the checks made at a run's start."""
        return False

    @property
    def stage_index(self) -> int:
        """The stage its saved state is in (a Sequence's current stage; 0 for a lone optimizer): a resumed
        ``fit()`` keeps the history rows of the stages before it."""
        return 0

    def estimate(self, program: Any, sizes: FitSizes) -> list[StageEstimate]:
        """What its run will cost, per stage (one here); override to give numbers."""
        return [StageEstimate(type(self).__name__)]

    def check_before_run(self, program: Any, x: Any, y: Any) -> list[str]:
        """Slow checks worth making before a run is paid for, as lines to show (none here); raise ValueError
        for a run that cannot work."""
        return []

    def place_outputs(self, folder: Path) -> None:
        """Write what it makes (beyond the program's variables) under ``folder`` (nothing here)."""

    # ``ctx`` is fit()'s OptimizerContext; anything else is synalinks' variable form of the same hook
    # (``on_epoch_end(epoch, trainable_variables)``, see optimizers.variable_population)

    async def on_train_begin(self, ctx: OptimizerContext) -> None:
        if not isinstance(ctx, OptimizerContext):
            await self.seed_population(ctx)

    async def on_epoch_begin(self, ctx: OptimizerContext, epoch: int) -> None:
        if not isinstance(ctx, OptimizerContext):
            await self.start_variable_epoch(ctx, epoch)  # type: ignore[arg-type]

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        raise NotImplementedError

    async def on_epoch_end(self, ctx: OptimizerContext, epoch: int) -> None:
        if not isinstance(ctx, OptimizerContext):
            await self.select_population(ctx, epoch)  # type: ignore[arg-type]
            return
        self.epochs_done += 1

    async def on_train_end(self, ctx: OptimizerContext) -> None:
        if not isinstance(ctx, OptimizerContext):
            await self.keep_best_value(ctx)

    # -- the kit: prompt states -----------------------------------------------------------

    def prompt(self, variable: str) -> TrainablePrompt | None:
        """The prompt state held by ``variable`` (None if it is not one)."""
        return next((state for state in self.prompts if state.variable == variable), None)

    def module_of(self, variable: str) -> str:
        """The name of the module that owns ``variable``."""
        return self.owners[variable]

    # -- the kit: budget, pacing, randomness ----------------------------------------------

    async def score(self, ctx: OptimizerContext, candidate: Candidate, split: str, indices: Sequence[int]
                    ) -> list[ExampleResult]:
        """Run and score ``candidate`` on ``indices``; only new (not memoised) rollouts are charged."""
        pending = len(ctx.rollouts.pending(split, indices, candidate.variables))
        snapshot = LEDGER.snapshot() if self.budget.unit == "lm_calls" else None
        results = await ctx.rollouts.run(split, list(indices), variables=candidate.variables)
        self.budget.charge(rollouts=pending, lm_calls=lm_calls_since(snapshot) if snapshot is not None else 0)
        candidate.record(results)
        return results

    def affordable(self, ctx: OptimizerContext, split: str, indices: Sequence[int], *programs: Candidate
                   ) -> list[int]:
        """The longest prefix of ``indices`` on which every one of ``programs`` can still be scored.

        Memoised scores cost nothing, so they never count against the budget.
        """
        runs, kept = 0, []
        for index in indices:
            runs += sum(len(ctx.rollouts.pending(split, [index], program.variables)) for program in programs)
            if not self.budget.affordable(runs):
                break
            kept.append(index)
        return kept

    def share(self, ctx: OptimizerContext, left: float | None = None) -> float:
        """An equal share, for this step, of ``left`` (default: the budget left) over the fit's steps left."""
        return (self.budget.remaining if left is None else left) / ctx.steps_left

    def start_rng(self, ctx: OptimizerContext) -> np.random.Generator:
        """The optimizer's own generator: seeded once (its seed, else one drawn from the trainer's),
        continuing from the saved state after a resume."""
        if self._rng is None:
            if self.seed is not None:
                seed = self.seed
            elif self._rng_state is not None:  # resumed: the saved state replaces the seed; draw nothing
                seed = self._seed_used or 0
            else:
                seed = int(ctx.rng.integers(2**31))
            self._seed_used = seed
            self._rng = np.random.default_rng(seed)
            if self._rng_state is not None:
                self._rng.bit_generator.state = self._rng_state
        return self._rng

    # -- candidates -----------------------------------------------------------------------

    @staticmethod
    def trainable_values(program: Any) -> dict[str, Any]:
        return {variable.name: variable.get_json() for variable in program.trainable_variables}

    def add_candidate(self, variables: dict[str, Any], parent: int | None = None, origin: str = "proposed") -> Candidate:
        candidate = Candidate(next(self._ids), copy.deepcopy(variables), parent, origin, self.epochs_done)
        self.candidates.append(candidate)
        return candidate

    def find(self, variables: dict[str, Any]) -> Candidate | None:
        for candidate in self.candidates:
            if candidate.variables == variables:
                return candidate
        return None

    def get_candidate(self, candidate_id: int) -> Candidate:
        for candidate in self.candidates:
            if candidate.id == candidate_id:
                return candidate
        raise KeyError(f"no candidate {candidate_id}")

    @property
    def start(self) -> Candidate:
        """The program the optimizer started from (its first ``"initial"`` candidate): always a candidate."""
        if not self.candidates:
            raise RuntimeError("the optimizer is not built yet: call program.fit() first")
        return next((c for c in self.candidates if c.origin == "initial"), self.candidates[0])

    @property
    def best(self) -> Candidate:
        if self.best_id is None:
            raise RuntimeError("the optimizer is not built yet: call program.fit() first")
        return self.get_candidate(self.best_id)

    async def accept(self, ctx: OptimizerContext, candidate: Candidate, reason: str) -> None:
        self.best_id = candidate.id
        await ctx.emit(CandidateAccepted(candidate=candidate.id, parent=candidate.parent, reason=reason))

    def load_candidate(self, program: Any, candidate_id: int | None = None) -> dict[str, Any]:
        """Assign a candidate's variables (default: the best) to ``program``; returns them.

        >>> # optimizer.load_candidate(program, 3)
        """
        candidate = self.best if candidate_id is None else self.get_candidate(candidate_id)
        assign_variables(program, candidate.variables, f"candidate {candidate.id}")
        return candidate.variables

    def export_candidates(self) -> list[dict[str, Any]]:
        """Every candidate with its variables, scores and parent (for artifacts)."""
        return [candidate.as_dict() for candidate in self.candidates]

    # -- state ----------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Candidates, the best, the random generator and the subclass's own state (``get_extra_state``)."""
        rng = self._rng.bit_generator.state if self._rng is not None else self._rng_state
        return {
            "epochs_done": self.epochs_done,
            "best_id": self.best_id,
            "candidates": [candidate.as_dict() for candidate in self.candidates],
            "rng": json.loads(json.dumps(rng)) if rng is not None else None,
            "seed_used": self._seed_used,
            "extra": self.get_extra_state(),
        }

    def set_state(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        extra = state.get("extra") or {}
        self.epochs_done = int(state.get("epochs_done", 0))
        self.candidates = [Candidate(**item) for item in state.get("candidates", [])]
        self.best_id = state.get("best_id")
        self._ids = itertools.count(max((c.id for c in self.candidates), default=-1) + 1)
        self.built = bool(self.candidates)
        self._rng, self._rng_state = None, state.get("rng") or extra.get("rng")
        seed_used = state.get("seed_used", extra.get("seed_used"))
        self._seed_used = int(seed_used) if seed_used is not None else None
        self.set_extra_state(extra)

    def get_extra_state(self) -> dict[str, Any]:
        """A subclass's own state (saved with the program)."""
        return {}

    def set_extra_state(self, state: dict[str, Any]) -> None: ...

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def naming_config(self) -> dict[str, Any]:
        """``name`` / ``description`` for the optimizers that take them (synalinks' arguments)."""
        return {"name": self.name, "description": self.description}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Optimizer":
        return cls(**config)
