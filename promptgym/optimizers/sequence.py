"""``Sequence``: optimizers run one after another in one ``fit()``, each from the previous one's best program.

    program.compile(reward="exactmatch",
                    optimizer=Sequence([KNNFewShot(), FineTune(), KNNFewShot()]))   # BetterTogether's p -> w -> p
    history = await program.fit(x, y, validation_split=0.2)
    history.history["stage"]       # ['1:KNNFewShot', '2:FineTune', '3:KNNFewShot'] (one row per stage epoch)

``fit()`` runs every stage for its ``epochs``; each stage starts from the
program the stage before left, keeps its own budget, and ends with the check
against the program it started from (:mod:`promptgym.optimizers.selection`),
so no stage, and so no chain, returns a program worse on validation than the
one it got. The state saved with the program holds the stage reached and
each stage's state: a resumed ``fit()`` goes on inside the stage it was in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.optimizers.base import Candidate, FitSizes, Optimizer, Stage, StageEstimate, StageRunner
from promptgym.optimizers.kit import Budget, OptimizerContext
from promptgym.optimizers.selection import Comparison, check_chain


@register_builtin
class Sequence(Optimizer):
    """Run ``stages`` (optimizers, names or config dicts) one after another in one ``fit()``."""

    def __init__(self, stages: list[Any], name: str | None = None, description: str | None = None) -> None:
        # a function-level import: the optimizers table lists Sequence itself
        from promptgym.optimizers import get

        if not stages:
            raise ValueError("Sequence needs at least one stage, e.g. Sequence([KNNFewShot(), FineTune()])")
        resolved = []
        for index, stage in enumerate(stages):
            try:
                resolved.append(get(stage))
            except (TypeError, ValueError) as error:
                raise ValueError(f"Sequence stage {index + 1}: {error}") from None
        if any(isinstance(stage, Sequence) for stage in resolved):
            raise ValueError("a Sequence stage cannot be a Sequence: list its stages instead")
        self.stages: list[Optimizer] = resolved
        self.stage = 0
        """The index of the stage running (or to run next): what a resumed ``fit()`` goes on from."""
        super().__init__(budget=Budget(None), name=name, description=description)

    def stage_label(self, index: int) -> str:
        return f"{index + 1}:{type(self.stages[index]).__name__}"

    # -- the optimizer protocol (optimizers.base), each part answered by the stages ------------

    async def run(self, trainer: StageRunner) -> None:
        """Each stage from the one reached (a resumed ``fit()`` goes on inside it) to the last, or to a stop."""
        first = self.stage if self.stage < len(self.stages) else 0  # a finished chain fitted again runs again
        for index in range(first, len(self.stages)):
            self.stage = index
            last = index == len(self.stages) - 1
            await trainer.run_stage(self.stages[index], Stage(self.stage_label(index), index, len(self.stages),
                                                              finish=self.check_chain if last else None))
            self.stage = index + 1
            if trainer.stop_training:
                break

    @property
    def in_progress(self) -> bool:
        return 0 < self.stage < len(self.stages)

    @property
    def stage_index(self) -> int:
        return self.stage

    def estimate(self, program: Any, sizes: FitSizes) -> list[StageEstimate]:
        return [estimate for stage in self.stages for estimate in stage.estimate(program, sizes)]

    def check_before_run(self, program: Any, x: Any, y: Any) -> list[str]:
        return [f"stage {index + 1} {line}" for index, stage in enumerate(self.stages)
                for line in stage.check_before_run(program, x, y)]

    def place_outputs(self, folder: Path) -> None:
        """Stage ``i`` writes under ``folder/stage-i``."""
        for index, stage in enumerate(self.stages):
            stage.place_outputs(Path(folder) / f"stage-{index + 1}")

    @property
    def current(self) -> Optimizer:
        return self.stages[min(self.stage, len(self.stages) - 1)]

    # the candidates and the best are the running stage's (what artifacts and callbacks read)
    @property  # type: ignore[override]
    def candidates(self) -> list[Candidate]:
        return self.current.candidates if hasattr(self, "stages") else []

    @candidates.setter
    def candidates(self, value: list[Candidate]) -> None: ...

    @property  # type: ignore[override]
    def best_id(self) -> int | None:
        return self.current.best_id if hasattr(self, "stages") else None

    @best_id.setter
    def best_id(self, value: int | None) -> None:
        if hasattr(self, "stages"):
            self.current.best_id = value

    def resolve_models(self) -> None:
        """Each stage's default models (OMEGA's, ...), as ``compile()`` resolves a lone optimizer's."""
        for stage in self.stages:
            resolve = getattr(stage, "resolve_models", None)
            if resolve is not None:
                try:
                    resolve()
                except ValueError:  # no default set yet: the stage says which call to make when it runs
                    pass

    async def check_chain(self, ctx: OptimizerContext) -> Comparison | None:
        """After the last stage: the chain's end against its start (:func:`~promptgym.optimizers.selection.check_chain`)."""
        return await check_chain(self.stages, ctx)

    def build(self, program: Any) -> None:
        self.current.build(program)
        self.built = True

    def get_state(self) -> dict[str, Any]:
        return {"stage": self.stage, "stages": [stage.get_state() for stage in self.stages]}

    def set_state(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        self.stage = int(state.get("stage", 0))
        for stage, saved in zip(self.stages, state.get("stages") or []):
            stage.set_state(saved)
        self.built = any(stage.built for stage in self.stages)

    def get_config(self) -> dict[str, Any]:
        return {"stages": [serialize_object(stage) for stage in self.stages], **self.naming_config()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Sequence":
        config = dict(config)
        config["stages"] = [deserialize_object(stage, expected="optimizer") if isinstance(stage, dict) and
                            "class_name" in stage else stage for stage in config.get("stages", [])]
        return cls(**config)
