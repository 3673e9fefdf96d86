"""``program.fit()``: the training loop. Everything it reports flows through callbacks and events."""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from typing import Any

import numpy as np

from promptgym.core.events import EpochEnd, StageEnded, StageStarted, TrainBegin, TrainEnd
from promptgym.lm.usage import LEDGER
from promptgym.modules.model_choice import MODELS_KEY, assign_models
from promptgym.optimizers.kit import OptimizerContext
from promptgym.optimizers.selection import NO_VALIDATION_ADVICE, keep_if_better_than_start
from promptgym.rollouts import ExampleResult, RolloutService
from promptgym.rollouts.executor import Executor
from promptgym.training.callback import CallbackList
from promptgym.training.data import as_object_array, split_validation, validate_inputs, validate_targets
from promptgym.training.headroom import check_starting_candidate
from promptgym.training.history import History
from promptgym.stats import Evaluation, confidence_interval
from promptgym.training.logs import scored_evaluation, scored_logs, usage_logs
from promptgym.training.progress import ProgressBar

logger = logging.getLogger("promptgym")


class UncheckedTrainingWarning(UserWarning):
    """``fit()`` had no validation data, so it could not check the trained program against the start."""


def require_compiled(program: Any, method: str) -> Any:
    if program.training_state is None:
        raise RuntimeError(f"{method}() needs compile() first: program.compile(reward=..., optimizer=..., metrics=...)")
    return program.training_state


async def fit_program(
    program: Any,
    x: Any = None,
    y: Any = None,
    validation_split: float = 0.1,
    validation_data: Any = None,
    epochs: int = 1,
    batch_size: int = 1,
    minibatch_size: int = 4,
    validation_batch_size: int = 32,
    validation_freq: int = 1,
    callbacks: list[Any] | None = None,
    shuffle: bool = False,
    seed: int = 0,
    verbose: Any = 1,
    max_errors: int | None = None,
    initial_epoch: int = 0,
    initial_step: int = 0,
    executor: Executor | None = None,
) -> History:
    """Train; see the README for every argument. Returns a :class:`History`."""
    compiled = require_compiled(program, "fit")
    if getattr(compiled.reward, "placeholder", False):
        raise ValueError("fit() needs a reward to maximise: program.compile(reward=..., optimizer=...); "
                         "a program compiled without one can predict() and evaluate() its metrics")
    x_all, y_all = as_object_array(x, "x"), as_object_array(y, "y")
    if len(x_all) != len(y_all):
        raise ValueError(f"x and y have different lengths ({len(x_all)} and {len(y_all)})")
    for name, value in (("epochs", epochs), ("batch_size", batch_size), ("minibatch_size", minibatch_size),
                        ("validation_batch_size", validation_batch_size), ("validation_freq", validation_freq)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    x_train, y_train, x_val, y_val = split_validation(x_all, y_all, validation_split, validation_data)
    splits = {
        "train": (validate_inputs(program, x_train, "x"), validate_targets(program, y_train, "y")),
        "val": (validate_inputs(program, x_val, "validation x"), validate_targets(program, y_val, "validation y")),
    }
    for callback in callbacks or []:  # BackupAndRestore: an interrupted run goes on from its backup
        resume = getattr(callback, "resume_point", None)
        point = resume(program) if resume is not None else None
        if point is not None:
            initial_epoch, initial_step = point
            compiled = program.training_state
            logger.info("fit(): resuming from the backup at epoch %d, step %d", initial_epoch, initial_step)
    history = History()
    callback_list = CallbackList([history, *(callbacks or [])], program)
    if verbose not in (0, False, None):
        callback_list.append(ProgressBar(), program)
    rng = np.random.default_rng(seed)
    limit = max_errors if max_errors is not None else max(10, len(x_train) + len(x_val))
    rollouts = RolloutService(program, compiled.reward, compiled.metrics, splits, executor=executor,
                              emit=callback_list.emit, max_errors=limit, rng=rng, minibatch_size=minibatch_size)
    optimizer = compiled.optimizer
    stages: list[Any] = list(getattr(optimizer, "stages", None) or [optimizer])
    chained = stages[0] is not optimizer  # an optimizers.Sequence: one History, a stage column
    first_stage = getattr(optimizer, "stage", 0) if chained else 0
    if first_stage >= len(stages):  # a finished chain fitted again runs again
        first_stage = 0
    if (initial_epoch or initial_step or first_stage) and compiled.restored:  # resumed: the rollouts it paid for
        rollouts.set_state(compiled.restored.get("rollouts") or {})
    compiled.rollouts, compiled.restored = rollouts, None
    compiled.position = {"epoch": initial_epoch, "step": initial_step}
    if not len(x_val):
        warnings.warn(NO_VALIDATION_ADVICE, UncheckedTrainingWarning, stacklevel=3)
    steps = math.ceil(len(x_train) / batch_size)
    program.stop_training = False
    await callback_list.call("on_train_begin", {"epochs": epochs, "steps": steps, "train_size": len(x_train),
                                                "val_size": len(x_val)})
    await callback_list.emit(TrainBegin(epochs=epochs, steps=steps, train_size=len(x_train), val_size=len(x_val)))
    usage_start = LEDGER.snapshot()  # what on_train_begin spends (a baseline, bootstrapping) counts in the first epoch
    resumed = bool(initial_epoch or initial_step or first_stage)
    for index in range(first_stage, len(stages)):
        stage = stages[index]
        label = optimizer.stage_label(index) if chained else None
        if chained:
            optimizer.stage = index
            await callback_list.emit(StageStarted(stage=label, index=index, stages=len(stages),
                                                  optimizer=type(stage).__name__))
        stage_start = (LEDGER.snapshot(), time.monotonic())
        stage.stage_name = label
        ctx = OptimizerContext(rollouts, callback_list.emit, rng, epoch=initial_epoch, epochs=epochs,
                               step=initial_step, steps=steps)
        stage.build(program)
        await stage.on_train_begin(ctx)
        if verbose not in (0, False, None) and not resumed:
            for warning in await check_starting_candidate(stage, ctx, minibatch_size):
                print(f"promptgym: {warning.message}", file=sys.stderr, flush=True)
        for epoch in range(initial_epoch, epochs):
            ctx.epoch = epoch
            failures_start = len(rollouts.failure_log)
            await callback_list.call("on_epoch_begin", epoch, {"steps": steps})
            await stage.on_epoch_begin(ctx, epoch)
            order = np.random.default_rng(seed + epoch).permutation(len(x_train)) if shuffle else np.arange(len(x_train))
            train_results: list[ExampleResult] = []
            for step in range(initial_step if epoch == initial_epoch else 0, steps):
                ctx.step = step
                batch = [int(i) for i in order[step * batch_size:(step + 1) * batch_size]]
                await callback_list.call("on_train_batch_begin", step, {"size": len(batch)})
                rollouts.start_step()
                step_logs = await stage.train_step(ctx, batch)
                results = list(rollouts.train_results.values())  # what the optimizer ran on training examples
                await rollouts.add_metrics(results)
                train_results += results
                program_assign(program, stage.best.variables)
                compiled.position = {"epoch": epoch, "step": step + 1}
                logs = {**scored_logs(train_results, compiled), **{k: v for k, v in step_logs.items() if k != "reward"}}
                await callback_list.call("on_train_batch_end", step, logs)
            ctx.step = 0
            await stage.on_epoch_end(ctx, epoch)
            validating = bool(len(x_val)) and (epoch + 1) % validation_freq == 0
            if validating:  # the epoch's validation pass shows the program fit() would return now
                await keep_if_better_than_start(stage, ctx, label)
            program_assign(program, stage.best.variables)
            compiled.position = {"epoch": epoch + 1, "step": 0}
            epoch_logs: dict[str, Any] = {"stage": label} if chained else {}
            epoch_logs.update(scored_logs(train_results, compiled))
            intervals = {}
            if validating:
                validation = await validate(rollouts, callback_list, validation_batch_size, compiled)
                epoch_logs.update(validation)
                intervals = validation.intervals()
                history.pending_intervals = intervals
            epoch_logs.update(usage_logs(LEDGER.since(usage_start)))
            usage_start = LEDGER.snapshot()
            epoch_logs["failures"] = len(set(rollouts.failure_log[failures_start:]))
            await callback_list.emit(EpochEnd(epoch=epoch, logs=epoch_logs, best_candidate=stage.best.id,
                                              intervals={key: value.as_dict() for key, value in intervals.items()}))
            await callback_list.call("on_epoch_end", epoch, epoch_logs)
            if program.stop_training:
                break
        await stage.on_train_end(ctx)
        await keep_if_better_than_start(stage, ctx, label)
        program_assign(program, stage.best.variables)
        if chained:
            await end_stage(callback_list, rollouts, stage, label, index, stage.last_check, stage_start)
            optimizer.stage = index + 1
            compiled.position = {"epoch": 0, "step": 0}
        initial_epoch = initial_step = 0
        if program.stop_training:
            break
    await callback_list.emit(TrainEnd(history=history.as_rows()))
    await callback_list.call("on_train_end", history.history and {k: v[-1] for k, v in history.history.items()})
    return history


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


def program_assign(program: Any, variables: dict[str, Any]) -> None:
    """Give ``program`` a candidate's variable values (and the models it names, see ``modules.model_choice``)."""
    by_name = {variable.name: variable for variable in program.variables}
    for name, value in variables.items():
        if name == MODELS_KEY:
            assign_models(program, value)
        else:
            by_name[name].assign(value)


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
