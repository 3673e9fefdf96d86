"""``program.fit()``: the training loop. Everything it reports flows through callbacks and events."""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
import warnings
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from promptgym.core.events import EpochEnd, Resumed, SpendCapHit, StageEnded, StageStarted, TrainBegin, TrainEnd
from promptgym.lm.spend import SpendCap, SpendCapReached, active_caps
from promptgym.lm.usage import LEDGER
from promptgym.modules.model_choice import assign_variables
from promptgym.optimizers.base import Stage
from promptgym.optimizers.kit import OptimizerContext
from promptgym.optimizers.selection import NO_VALIDATION_ADVICE, keep_if_better_than_start
from promptgym.rollouts import ExampleResult, RolloutService
from promptgym.rollouts.executor import Executor
from promptgym.runs.attempt import RunAttempt
from promptgym.training.callback import CallbackList
from promptgym.training.data import as_object_array, split_validation, validate_inputs, validate_targets
from promptgym.training.headroom import check_starting_candidate
from promptgym.training.history import History
from promptgym.stats import Evaluation, confidence_interval
from promptgym.training.logs import scored_evaluation, scored_logs, usage_logs
from promptgym.training.fit_folder import JOB_TYPE, open_run_folder, resume_point
from promptgym.training.progress import ProgressBar
from promptgym.training.run_recorder import RunRecorder
from promptgym.training.spend import RunSpend

logger = logging.getLogger("promptgym")


class UncheckedTrainingWarning(UserWarning):
    """``fit()`` had no validation data, so it could not check the trained program against the start."""


def require_compiled(program: Any, method: str) -> Any:
    if program.training_setup is None:
        raise RuntimeError(f"{method}() needs compile() first: program.compile(reward=..., optimizer=..., metrics=...)")
    return program.training_setup


@dataclass
class FitSettings:
    """``fit()``'s keyword arguments, written once: :meth:`Trainer.fit` builds them from its public signature.

    See ``Trainer.fit`` (and the README) for what each one means.
    """

    validation_split: float = 0.1
    validation_data: Any = None
    epochs: int = 1
    batch_size: int = 1
    minibatch_size: int = 4
    validation_batch_size: int = 32
    validation_freq: int = 1
    callbacks: list[Any] | None = None
    shuffle: bool = False
    seed: int = 0
    verbose: Any = 1
    max_errors: int | None = None
    initial_epoch: int = 0
    initial_step: int = 0
    executor: Executor | None = None
    max_usd: float | None = None
    budget: Any = None
    run_dir: str | Path | None = None

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> "FitSettings":
        """The settings among a call's arguments (``locals()`` of ``fit``: ``self``, ``x`` and ``y`` are left out)."""
        return cls(**{item.name: arguments[item.name] for item in fields(cls) if item.name in arguments})

    def check(self) -> None:
        for name in ("epochs", "batch_size", "minibatch_size", "validation_batch_size", "validation_freq"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.max_usd is not None and (isinstance(self.max_usd, bool) or not isinstance(self.max_usd, (int, float))
                                         or self.max_usd <= 0):
            raise ValueError(f"max_usd must be a number of dollars > 0, got {self.max_usd!r}")
        if self.budget is not None and not hasattr(self.budget, "usd"):
            raise ValueError(f"budget must be a Budget (Budget(usd=...)), got {type(self.budget).__name__}")

    def cap_usd(self, optimizer: Any) -> float | None:
        """The tightest dollar cap among ``max_usd``, ``budget=Budget(usd=...)`` and the optimizer's budget."""
        caps = [self.max_usd, getattr(self.budget, "usd", None), getattr(getattr(optimizer, "budget", None), "usd", None)]
        given = [float(cap) for cap in caps if cap is not None]
        return min(given) if given else None

    @property
    def shows_progress(self) -> bool:
        return self.verbose not in (0, False, None)


async def fit_program(program: Any, x: Any = None, y: Any = None, settings: FitSettings | None = None) -> History:
    """Train ``program`` on ``(x, y)`` as ``settings`` say; returns a :class:`History` (see ``Trainer.fit``)."""
    settings = settings or FitSettings()
    if settings.run_dir is not None:
        return await fit_in_run_folder(program, x, y, settings)
    return await FitRun(program, x, y, settings).train()


async def fit_in_run_folder(program: Any, x: Any, y: Any, settings: FitSettings) -> History:
    """``fit(run_dir=...)``: the fit with its run folder (status, events, history, checkpoints), resumed from
    its last checkpoint when it has one (:mod:`promptgym.training.fit_folder`, docs/runs.md)."""
    run, resume = open_run_folder(settings.run_dir, getattr(program, "name", None) or "fit")
    session = RunAttempt(run, None, None, job_type=JOB_TYPE, resume=resume)
    recorder = RunRecorder(run, session.events)

    def save_interrupted() -> None:
        if recorder.program is not None and recorder.program.get_compile_config() is not None:
            recorder.save_checkpoint("interrupted")

    with session.ending(on_interrupt=save_interrupted):
        if resume:
            epoch, step, checkpoint, note = resume_point(run, program)
            settings.initial_epoch, settings.initial_step = epoch, step
            session.events.emit(Resumed(from_epoch=epoch, checkpoint=checkpoint, from_step=step))
            if note:
                logger.warning("fit(run_dir=%s): %s", settings.run_dir, note)
        program.training_setup.optimizer.place_outputs(run.path / "finetune")
        settings.callbacks = [recorder, *(settings.callbacks or [])]
        history = await FitRun(program, x, y, settings).train()
        program.save(str(run.path / "best_program.json"))
    session.finish(status="completed", stopped_by=getattr(program, "stop_reason", None))
    return history


class FitRun:
    """One ``fit()`` call: its checked data, callbacks, rollouts and position, and the loop over a stage's
    epochs and steps. The optimizer runs its own stages (one, or a Sequence's) through :meth:`run_stage`:
    this is the ``StageRunner`` of :mod:`promptgym.optimizers.base`."""

    def __init__(self, program: Any, x: Any, y: Any, settings: FitSettings) -> None:
        self.program, self.settings = program, settings
        self.compiled = require_compiled(program, "fit")
        if getattr(self.compiled.reward, "placeholder", False):
            raise ValueError("fit() needs a reward to maximise: program.compile(reward=..., optimizer=...); "
                             "a program compiled without one can predict() and evaluate() its metrics")
        x_all, y_all = as_object_array(x, "x"), as_object_array(y, "y")
        if len(x_all) != len(y_all):
            raise ValueError(f"x and y have different lengths ({len(x_all)} and {len(y_all)})")
        settings.check()
        x_train, y_train, x_val, y_val = split_validation(x_all, y_all, settings.validation_split,
                                                          settings.validation_data)
        splits = {
            "train": (validate_inputs(program, x_train, "x"), validate_targets(program, y_train, "y")),
            "val": (validate_inputs(program, x_val, "validation x"), validate_targets(program, y_val, "validation y")),
        }
        self.train_size, self.val_size = len(x_train), len(x_val)
        self.initial_epoch, self.initial_step = settings.initial_epoch, settings.initial_step
        self.resume_from_backup()
        self.history = History()
        self.callbacks = CallbackList([self.history, *(settings.callbacks or [])], program)
        if settings.shows_progress:
            self.callbacks.append(ProgressBar(), program)
        self.rng = np.random.default_rng(settings.seed)
        limit = settings.max_errors if settings.max_errors is not None else max(10, self.train_size + self.val_size)
        self.rollouts = RolloutService(program, self.compiled.reward, self.compiled.metrics, splits,
                                       executor=settings.executor, emit=self.callbacks.emit, max_errors=limit,
                                       rng=self.rng, minibatch_size=settings.minibatch_size)
        self.steps = math.ceil(self.train_size / settings.batch_size)
        self.callbacks.set_params({"epochs": settings.epochs, "steps": self.steps, "batch_size": settings.batch_size,
                                   "minibatch_size": settings.minibatch_size, "verbose": settings.verbose})
        self.usage_start: dict[str, Any] = {}
        self.spend = RunSpend()
        self.cap: SpendCap | None = None
        self.current_stage: Any = None
        self.chained = False
        """A stage of a chain ran: one History with a stage column."""
        self.resumed = False

    def resume_from_backup(self) -> None:
        """BackupAndRestore: an interrupted run goes on from its backup."""
        for callback in self.settings.callbacks or []:
            resume = getattr(callback, "resume_point", None)
            point = resume(self.program) if resume is not None else None
            if point is not None:
                self.initial_epoch, self.initial_step = point
                self.compiled = self.program.training_setup
                logger.info("fit(): resuming from the backup at epoch %d, step %d", self.initial_epoch,
                            self.initial_step)

    async def train(self) -> History:
        compiled, optimizer = self.compiled, self.compiled.optimizer
        resumed = self.resumed = bool(self.initial_epoch or self.initial_step or optimizer.in_progress)
        if resumed and compiled.restored:  # resumed: the rollouts it paid for
            self.rollouts.set_state(compiled.restored.get("rollouts") or {})
        restored_spend = (compiled.restored or {}).get("spend") if resumed else None
        self.spend = RunSpend.start(restored_spend)
        compiled.rollouts, compiled.restored = self.rollouts, None
        compiled.spend = self.spend.state()
        cap_usd = self.settings.cap_usd(optimizer)
        self.cap = SpendCap(cap_usd, spent_usd=self.spend.spent_usd) if cap_usd is not None else None
        self.program.stop_reason = None
        compiled.position = {"epoch": self.initial_epoch, "step": self.initial_step}
        if not self.val_size:  # stacklevel: warn, FitRun.train, fit_program, Trainer.fit, the caller
            warnings.warn(NO_VALIDATION_ADVICE, UncheckedTrainingWarning, stacklevel=4)
        self.program.stop_training = False
        epochs = self.settings.epochs
        await self.callbacks.call("on_train_begin", {"epochs": epochs, "steps": self.steps,
                                                     "train_size": self.train_size, "val_size": self.val_size})
        await self.callbacks.emit(TrainBegin(epochs=epochs, steps=self.steps, train_size=self.train_size,
                                             val_size=self.val_size))
        self.usage_start = LEDGER.snapshot()  # what on_train_begin spends (a baseline, bootstrapping) counts in epoch 1
        try:
            with self.cap.active() if self.cap is not None else contextlib.nullcontext():
                await optimizer.run(self)
        except SpendCapReached as reached:
            await self.stop_at_cap(reached)
        caps = [self.cap] if self.cap is not None else list(active_caps())
        self.history.spend = {**self.spend.logs(), "limit_usd": caps[-1].limit_usd if caps else None,
                              "capped": self.program.stop_reason == "max_usd",
                              "peak_committed_usd": caps[-1].peak_committed_usd if caps else None,
                              "peak_in_flight": caps[-1].peak_in_flight if caps else None}
        await self.callbacks.emit(TrainEnd(history=self.history.as_rows()))
        history = self.history.history
        await self.callbacks.call("on_train_end", history and {k: v[-1] for k, v in history.items()})
        return self.history

    async def stop_at_cap(self, reached: SpendCapReached) -> None:
        """The cap stopped a call: keep the best program so far and say where a resumed run goes on.

        The step it stopped in is not counted done (``compiled.position`` is the last finished one), so a
        resumed run redoes it; its answers that did come back are reused from the response cache.
        """
        if reached.reason == "unpriced":
            raise ValueError(str(reached)) from None
        self.program.stop_training = True
        self.program.stop_reason = "max_usd"
        if self.current_stage is not None and getattr(self.current_stage, "best", None) is not None:
            assign_variables(self.program, self.current_stage.best.variables)
        self.compiled.spend = self.spend.state()
        position = self.compiled.position or {"epoch": 0, "step": 0}
        cap = self.cap or active_caps()[-1]  # fit's own, or the one around it (the CLI's, for the whole run)
        spent = cap.spent_usd
        logger.warning("fit(): stopped by max_usd=$%.4f after spending $%.4f, at epoch %d step %d (%s)",
                       cap.limit_usd, spent, position["epoch"], position["step"], reached)
        await self.callbacks.emit(SpendCapHit(limit_usd=cap.limit_usd, spent_usd=spent,
                                              epoch=int(position["epoch"]), step=int(position["step"]),
                                              message=str(reached)))

    @property
    def stop_training(self) -> bool:
        return bool(self.program.stop_training)

    async def run_stage(self, stage: Any, place: Stage | None = None) -> None:
        """One optimizer (alone, or a chain's stage at ``place``) from its ``on_train_begin`` to its kept best;
        the next stage starts at epoch 0."""
        label = place.label if place is not None else None
        if place is not None:
            self.chained = True
            await self.callbacks.emit(StageStarted(stage=place.label, index=place.index, stages=place.count,
                                                   optimizer=type(stage).__name__))
        stage_start = (LEDGER.snapshot(), time.monotonic())
        self.current_stage = stage
        stage.stage_name = label
        ctx = OptimizerContext(self.rollouts, self.callbacks.emit, self.rng, epoch=self.initial_epoch,
                               epochs=self.settings.epochs, step=self.initial_step, steps=self.steps)
        stage.build(self.program)
        await stage.on_train_begin(ctx)
        if self.settings.shows_progress and not self.resumed:
            for warning in await check_starting_candidate(stage, ctx, self.settings.minibatch_size):
                print(f"promptgym: {warning.message}", file=sys.stderr, flush=True)
        for epoch in range(self.initial_epoch, self.settings.epochs):
            await self.run_epoch(stage, ctx, epoch, label)
            if self.program.stop_training:
                break
        await stage.on_train_end(ctx)
        await keep_if_better_than_start(stage, ctx, label)
        if place is not None and place.finish is not None:
            await place.finish(ctx)  # the chain's end against its start
        assign_variables(self.program, stage.best.variables)
        if place is not None:
            await end_stage(self.callbacks, self.rollouts, stage, place.label, place.index, stage.last_check,
                            stage_start)
            self.compiled.position = {"epoch": 0, "step": 0}
        self.initial_epoch = self.initial_step = 0

    async def run_epoch(self, stage: Any, ctx: OptimizerContext, epoch: int, label: str | None) -> None:
        settings = self.settings
        ctx.epoch = epoch
        failures_start = len(self.rollouts.failure_log)
        await self.callbacks.call("on_epoch_begin", epoch, {"steps": self.steps})
        await stage.on_epoch_begin(ctx, epoch)
        order = np.random.default_rng(settings.seed + epoch).permutation(self.train_size) if settings.shuffle \
            else np.arange(self.train_size)
        train_results: list[ExampleResult] = []
        for step in range(self.initial_step if epoch == self.initial_epoch else 0, self.steps):
            batch = [int(i) for i in order[step * settings.batch_size:(step + 1) * settings.batch_size]]
            await self.run_step(stage, ctx, epoch, step, batch, train_results)
        ctx.step = 0
        await stage.on_epoch_end(ctx, epoch)
        validating = bool(self.val_size) and (epoch + 1) % settings.validation_freq == 0
        if validating:  # the epoch's validation pass shows the program fit() would return now
            await keep_if_better_than_start(stage, ctx, label)
        assign_variables(self.program, stage.best.variables)
        self.compiled.position = {"epoch": epoch + 1, "step": 0}
        epoch_logs, intervals = await self.epoch_logs(train_results, validating, label, failures_start)
        await self.callbacks.emit(EpochEnd(epoch=epoch, logs=epoch_logs, best_candidate=stage.best.id,
                                           intervals={key: value.as_dict() for key, value in intervals.items()}))
        await self.callbacks.call("on_epoch_end", epoch, epoch_logs)

    async def run_step(self, stage: Any, ctx: OptimizerContext, epoch: int, step: int, batch: list[int],
                       train_results: list[ExampleResult]) -> None:
        """One training step; its results join ``train_results`` (the epoch's, which its logs average)."""
        ctx.step = step
        await self.callbacks.call("on_train_batch_begin", step, {"size": len(batch)})
        self.rollouts.start_step()
        step_logs = await stage.train_step(ctx, batch)
        results = list(self.rollouts.train_results.values())  # what the optimizer ran on training examples
        await self.rollouts.add_metrics(results)
        train_results += results
        assign_variables(self.program, stage.best.variables)
        self.compiled.position = {"epoch": epoch, "step": step + 1}
        self.compiled.spend = self.spend.state()
        logs = {**scored_logs(train_results, self.compiled), **{k: v for k, v in step_logs.items() if k != "reward"}}
        spend = self.spend.logs()
        logs.update(cost_usd=spend["cost_usd"], unpriced_calls=spend["unpriced_calls"])
        await self.callbacks.call("on_train_batch_end", step, logs)

    async def epoch_logs(self, train_results: list[ExampleResult], validating: bool, label: str | None,
                         failures_start: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The epoch's logs (training scores, validation, usage, failures) and the validation intervals."""
        epoch_logs: dict[str, Any] = {"stage": label} if self.chained else {}
        epoch_logs.update(scored_logs(train_results, self.compiled))
        intervals: dict[str, Any] = {}
        if validating:
            validation = await validate(self.rollouts, self.callbacks, self.settings.validation_batch_size,
                                        self.compiled)
            epoch_logs.update(validation)
            intervals = validation.intervals()
            self.history.pending_intervals = intervals
        since = LEDGER.since(self.usage_start)
        epoch_logs.update(usage_logs(since))
        epoch_logs.update(self.spend.logs())
        epoch_logs["epoch_cost_usd"] = sum(usage.cost_usd for usage in since.values())
        self.compiled.spend = self.spend.state()
        self.usage_start = LEDGER.snapshot()
        epoch_logs["failures"] = len(set(self.rollouts.failure_log[failures_start:]))
        return epoch_logs, intervals


async def end_stage(callback_list: CallbackList, rollouts: RolloutService, stage: Any, label: str, index: int,
                    comparison: Any, started: tuple[dict[str, Any], float]) -> None:
    """Announce a Sequence stage's end: its best program's validation score (memoised: no call) and its check."""
    val = None
    if rollouts.size("val"):
        results = await rollouts.run("val", list(range(rollouts.size("val"))), variables=stage.best.variables)
        val = confidence_interval([result.reward for result in results]).as_dict()
    usage, began = started
    calls = sum(u.calls - u.cache_hits for u in LEDGER.since(usage).values())
    await callback_list.emit(StageEnded(stage=label, index=index, val=val,
                                        comparison=comparison.as_dict() if comparison is not None else None,
                                        lm_calls=calls, seconds=round(time.monotonic() - began, 2)))


async def validate(rollouts: RolloutService, callback_list: CallbackList, batch_size: int, compiled: Any
                   ) -> Evaluation:
    """The end-of-epoch validation pass: the current program on every validation example (reporting only)."""
    total = rollouts.size("val")
    await callback_list.call("on_test_begin", {"total": total, "in_fit": True})
    results = await rollouts.run("val", list(range(total)), variables=rollouts.program.get_variables(),
                                 with_metrics=True, window=batch_size)
    logs = scored_evaluation(results, compiled, prefix="val_")
    await callback_list.call("on_test_end", {**logs, "in_fit": True})
    return logs
