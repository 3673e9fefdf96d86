"""``program.fit()``: the training loop. Everything it reports flows through callbacks."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from promptgym.core.events import EpochEnd, TrainBegin, TrainEnd
from promptgym.lm.usage import LEDGER, PHASES
from promptgym.training.batch import as_object_array, validate_inputs
from promptgym.training.callback import CallbackList
from promptgym.training.context import ExampleResult, TrainingContext
from promptgym.training.history import History
from promptgym.training.progress import ProgressBar
from promptgym.training.targets import validate_targets

logger = logging.getLogger("promptgym")


def require_compiled(program: Any, method: str) -> Any:
    if program.training_state is None:
        raise RuntimeError(f"{method}() needs compile() first: program.compile(reward=..., optimizer=..., metrics=...)")
    return program.training_state


def split_validation(x: np.ndarray, y: np.ndarray, validation_split: float, validation_data: Any
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if validation_data is not None:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError("validation_data must be a tuple (x_val, y_val)")
        return x, y, as_object_array(validation_data[0], "validation_data x"), as_object_array(validation_data[1], "validation_data y")
    if not 0 <= validation_split < 1:
        raise ValueError(f"validation_split must be in [0, 1), got {validation_split}")
    cut = len(x) - int(math.floor(len(x) * validation_split))
    if cut == 0:
        raise ValueError(f"validation_split={validation_split} leaves no training example out of {len(x)}")
    return x[:cut], y[:cut], x[cut:], y[cut:]


def mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def usage_logs(since: dict[str, Any]) -> dict[str, int]:
    total_calls = sum(usage.calls for usage in since.values())
    logs = {
        "lm_calls": total_calls,
        "prompt_tokens": sum(usage.prompt_tokens for usage in since.values()),
        "completion_tokens": sum(usage.completion_tokens for usage in since.values()),
    }
    for phase in PHASES:
        logs[f"lm_calls_{phase}"] = since[phase].calls if phase in since else 0
    return logs


def scored_logs(results: list[ExampleResult], compiled: Any, prefix: str = "") -> dict[str, float | None]:
    """Mean reward and metrics of ``results`` (None when there are none: an optimizer may run no training example)."""
    names = [compiled.reward.name, *(metric.name for metric in compiled.metrics)]
    if not results:
        return {f"{prefix}{name}": None for name in names}
    logs = {f"{prefix}{names[0]}": mean([r.reward for r in results])}
    for name in names[1:]:
        logs[f"{prefix}{name}"] = mean([r.metrics.get(name, 0.0) for r in results])
    return logs


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
) -> History:
    """Train; see the README for every argument. Returns a :class:`History`."""
    compiled = require_compiled(program, "fit")
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
    history = History()
    callback_list = CallbackList([history, *(callbacks or [])], program)
    if verbose not in (0, False, None):
        callback_list.append(ProgressBar(), program)
    rng = np.random.default_rng(seed)
    limit = max_errors if max_errors is not None else max(10, len(x_train) + len(x_val))
    ctx = TrainingContext(program, compiled, splits, minibatch_size, rng, callback_list, limit)
    steps = math.ceil(len(x_train) / batch_size)
    ctx.epochs, ctx.steps = epochs, steps
    optimizer = compiled.optimizer
    optimizer.build(program)
    program.stop_training = False
    await callback_list.call("on_train_begin", {"epochs": epochs, "steps": steps, "train_size": len(x_train),
                                                "val_size": len(x_val)})
    await callback_list.emit(TrainBegin(epochs=epochs, steps=steps, train_size=len(x_train), val_size=len(x_val)))
    usage_start = LEDGER.snapshot()  # what on_train_begin spends (a baseline, bootstrapping) counts in the first epoch
    await optimizer.on_train_begin(ctx)
    for epoch in range(initial_epoch, epochs):
        ctx.epoch = epoch
        await callback_list.call("on_epoch_begin", epoch, {"steps": steps})
        await optimizer.on_epoch_begin(ctx, epoch)
        order = np.random.default_rng(seed + epoch).permutation(len(x_train)) if shuffle else np.arange(len(x_train))
        train_results: list[ExampleResult] = []
        for step in range(steps):
            ctx.step = step
            batch = [int(i) for i in order[step * batch_size:(step + 1) * batch_size]]
            await callback_list.call("on_train_batch_begin", step, {"size": len(batch)})
            ctx.step_results = {}
            step_logs = await optimizer.train_step(ctx, batch)
            results = list(ctx.step_results.values())  # what the optimizer ran on training examples: no extra call
            await ctx.add_metrics(results)
            train_results += results
            program_assign(program, optimizer.best.variables)
            logs = {**scored_logs(train_results, compiled), **{k: v for k, v in step_logs.items() if k != "reward"}}
            await callback_list.call("on_train_batch_end", step, logs)
        await optimizer.on_epoch_end(ctx, epoch)
        program_assign(program, optimizer.best.variables)
        epoch_logs: dict[str, Any] = scored_logs(train_results, compiled)
        if len(x_val) and (epoch + 1) % validation_freq == 0:
            epoch_logs.update(await validate(ctx, callback_list, validation_batch_size, compiled))
        epoch_logs.update(usage_logs(LEDGER.since(usage_start)))
        usage_start = LEDGER.snapshot()
        epoch_logs["failures"] = ctx.errors
        await callback_list.emit(EpochEnd(epoch=epoch, logs=epoch_logs, best_candidate=optimizer.best.id))
        await callback_list.call("on_epoch_end", epoch, epoch_logs)
        if program.stop_training:
            break
    await optimizer.on_train_end(ctx)
    program_assign(program, optimizer.best.variables)
    await callback_list.emit(TrainEnd(history=history.as_rows()))
    await callback_list.call("on_train_end", history.history and {k: v[-1] for k, v in history.history.items()})
    return history


def program_assign(program: Any, variables: dict[str, Any]) -> None:
    by_name = {variable.name: variable for variable in program.variables}
    for name, value in variables.items():
        by_name[name].assign(value)


async def validate(ctx: TrainingContext, callback_list: CallbackList, batch_size: int, compiled: Any) -> dict[str, Any]:
    total = ctx.size("val")
    await callback_list.call("on_test_begin", {"total": total, "in_fit": True})
    results: list[ExampleResult] = []
    for batch, start in enumerate(range(0, total, batch_size)):
        indices = list(range(start, min(start + batch_size, total)))
        results += await ctx.run("val", indices, variables=ctx.program.get_variables(), with_metrics=True)
        await callback_list.call("on_test_batch_end", batch, {"done": len(results), "in_fit": True})
    logs = scored_logs(results, compiled, prefix="val_")
    await callback_list.call("on_test_end", {**logs, "in_fit": True})
    return logs
