"""The optimizer protocol shared by RandomFewShot, Greedy, OMEGA, GEPA and MIPRO.

The trainer calls, in order::

    build(program)                      once, before the first fit
    await on_train_begin(ctx)
    for each epoch:
        await on_epoch_begin(ctx, epoch)
        for each training batch:
            logs = await train_step(ctx, batch_indices)    # propose, score, select
        await on_epoch_end(ctx, epoch)
    await on_train_end(ctx)

``ctx`` is a :class:`~promptgym.training.context.TrainingContext`. The
optimizer keeps every candidate it scored (``candidates``), the current best
variables (``best``), and its own state (``get_state`` / ``set_state``),
which ``program.save()`` stores so training can resume.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from promptgym.core.events import CandidateAccepted
from promptgym.training.context import ExampleResult, TrainingContext


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


class Optimizer:
    """Base class: bookkeeping of candidates, the best one, and the saved state."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self.candidates: list[Candidate] = []
        self.best_id: int | None = None
        self.epochs_done = 0
        self.built = False
        self._ids = itertools.count()

    # -- lifecycle ------------------------------------------------------------------------

    def build(self, program: Any) -> None:
        """Remember the program's starting variables as the first candidate."""
        if self.built:
            return
        start = self.add_candidate(self.trainable_values(program), origin="initial")
        self.best_id = start.id
        self.built = True

    async def on_train_begin(self, ctx: TrainingContext) -> None: ...

    async def on_epoch_begin(self, ctx: TrainingContext, epoch: int) -> None: ...

    async def train_step(self, ctx: TrainingContext, batch: list[int]) -> dict[str, float]:
        raise NotImplementedError

    async def on_epoch_end(self, ctx: TrainingContext, epoch: int) -> None:
        self.epochs_done += 1

    async def on_train_end(self, ctx: TrainingContext) -> None: ...

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
    def best(self) -> Candidate:
        if self.best_id is None:
            raise RuntimeError("the optimizer is not built yet: call program.fit() first")
        return self.get_candidate(self.best_id)

    async def score(self, ctx: TrainingContext, candidate: Candidate, split: str, indices: list[int]) -> list[ExampleResult]:
        results = await ctx.run(split, indices, variables=candidate.variables)
        candidate.record(results)
        return results

    async def accept(self, ctx: TrainingContext, candidate: Candidate, reason: str) -> None:
        self.best_id = candidate.id
        await ctx.emit(CandidateAccepted(candidate=candidate.id, parent=candidate.parent, reason=reason))

    # -- state ----------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        return {
            "epochs_done": self.epochs_done,
            "best_id": self.best_id,
            "candidates": [candidate.as_dict() for candidate in self.candidates],
            "extra": self.get_extra_state(),
        }

    def set_state(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        self.epochs_done = int(state.get("epochs_done", 0))
        self.candidates = [Candidate(**item) for item in state.get("candidates", [])]
        self.best_id = state.get("best_id")
        self._ids = itertools.count(max((c.id for c in self.candidates), default=-1) + 1)
        self.built = bool(self.candidates)
        self.set_extra_state(state.get("extra") or {})

    def get_extra_state(self) -> dict[str, Any]:
        return {}

    def set_extra_state(self, state: dict[str, Any]) -> None: ...

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Optimizer":
        return cls(**config)

    def export_candidates(self) -> list[dict[str, Any]]:
        """Every candidate with its variables, scores and parent (for artifacts)."""
        return [candidate.as_dict() for candidate in self.candidates]
