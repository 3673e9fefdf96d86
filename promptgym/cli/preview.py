"""The resolved-job preview shown before a run starts, with an LM-call estimate."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from promptgym.cli.build import RunPlan
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.secrets import Masker
from promptgym.lm.usage import Usage, cost_samples, usage_scope
from promptgym.modules.variable import variable_values
from promptgym.optimizers.base import FitSizes, StageEstimate
from promptgym.optimizers.kit import trainable_prompts
from promptgym.programs.program import Program
from promptgym.training.headroom import check_headroom
from promptgym.training.spend import estimate_cost, format_usd


def generator_count(program: Program) -> int:
    """How many LM-calling steps one program run makes (modules with a trainable prompt)."""
    return max(1, len(trainable_prompts(program)))


def fit_sizes(job: RunPlan) -> FitSizes:
    """What the job's fit() will see: the training and validation sizes (validation_split held out of train)."""
    training, sizes = job.config.training, job.data.sizes()
    train, val = sizes["train"], sizes["validation"]
    if not val and job.config.data:
        val = int(math.floor(train * job.config.data.validation_split))
        train -= val
    return FitSizes(train=train, val=val, epochs=training.epochs, batch_size=training.batch_size,
                    minibatch_size=training.minibatch_size, calls_per_run=generator_count(job.program))


def stage_calls(estimate: StageEstimate, sizes: FitSizes, budget: int | None) -> tuple[int, int]:
    """(training-run calls, candidate-scoring calls) of one stage; the few-shot loop where it gives no number:
    every training example each epoch, two candidates on one validation minibatch per step, within its budget."""
    steps = math.ceil(sizes.train / sizes.batch_size) if sizes.train else 0
    runs = estimate.training_runs if estimate.training_runs is not None else sizes.epochs * sizes.train
    training_runs = runs * sizes.calls_per_run
    if estimate.lm_calls is not None:
        return training_runs, int(estimate.lm_calls)
    scoring = sizes.epochs * steps * 2 * min(sizes.minibatch_size, sizes.val or sizes.train) * sizes.calls_per_run
    if budget is not None:  # the few-shot loop stops at its budget of program runs
        training_runs = min(training_runs, budget * sizes.calls_per_run)
        scoring = min(scoring, budget * sizes.calls_per_run - training_runs)
    return training_runs, scoring


def estimate_lm_calls(job: RunPlan) -> dict[str, int]:
    """An upper bound on LM calls, by part (cached calls cost nothing and are not subtracted).

    Each stage of the optimizer gives its own numbers (``Optimizer.estimate``); where it gives none, the
    few-shot loop is assumed (:func:`stage_calls`).
    """
    training, sizes = job.config.training, fit_sizes(job)
    estimates = job.optimizer.estimate(job.program, sizes)
    budget = job.optimizer.budget.limit if len(estimates) == 1 else None
    calls = [stage_calls(estimate, sizes, budget) for estimate in estimates]
    eval_size = job.data.sizes()["test"] or sizes.val or sizes.train
    parts = {
        "headroom check": min(training.minibatch_size, sizes.val or sizes.train) * sizes.calls_per_run,
        "training runs": sum(runs for runs, _ in calls),
        "candidate scoring": sum(scoring for _, scoring in calls),
        "validation": (training.epochs // training.validation_freq) * sizes.val * sizes.calls_per_run,
        "baseline + final evaluation": (2 if training.evaluate_baseline else 1) * eval_size * sizes.calls_per_run,
    }
    parts["total"] = sum(parts.values())
    return parts


def stage_estimates(job: RunPlan) -> list[tuple[str, str]]:
    """A row per stage of a chain, or one for a lone optimizer with more to say than model calls (FineTune's
    SFT steps): what it will cost."""
    sizes = fit_sizes(job)
    estimates = job.optimizer.estimate(job.program, sizes)
    if len(estimates) == 1 and not estimates[0].note:
        return []
    rows = []
    for index, estimate in enumerate(estimates):
        runs, scoring = stage_calls(estimate, sizes, None)
        text = (f"{estimate.optimizer}: <= {runs + scoring} LM calls (check against its start on {sizes.val} "
                "validation examples included)" + (f"; {estimate.note}" if estimate.note else ""))
        rows.append((f"stage {index + 1}" if len(estimates) > 1 else "weights", text))
    return rows


def optimizer_description(job: RunPlan) -> str:
    config = job.optimizer.get_config() if hasattr(job.optimizer, "get_config") else {}
    budget = {k: v for k, v in config.items() if "budget" in k or "calls" in k}
    text = f"{type(job.optimizer).__name__} {json.dumps(config, default=str)}"
    return text + (f" (budget: {budget})" if budget else "")


def sizes_description(job: RunPlan) -> str:
    """``train 9, validation 3 (held out of the 12 training examples: validation_split=0.25), test 0``."""
    sizes = dict(job.data.sizes())
    split = job.config.data.validation_split if job.config.data else 0.0
    held = int(math.floor(sizes["train"] * split)) if split and not sizes["validation"] else 0
    if not held:
        return ", ".join(f"{k} {v}" for k, v in sizes.items())
    return (f"train {sizes['train'] - held}, validation {held} (held out of the {sizes['train']} training examples: "
            f"validation_split={split}), test {sizes['test']}")


def scorer_description(scorer: Any) -> str:
    """``ExactMatch {"in_mask": ["answer"]}``: the class and its configuration, not just its name."""
    config = scorer.get_config() if hasattr(scorer, "get_config") else {}
    shown = {key: value for key, value in config.items() if key != "name" and value not in (None, [], {})}
    return type(scorer).__name__ + (f" {json.dumps(shown, default=str)}" if shown else "")


def preview_rows(job: RunPlan, masker: Masker, execution: ExecutionSpec | None = None) -> list[tuple[str, str]]:
    config = job.config
    data = config.data
    source = "-" if data is None else data.dataset or data.train or data.task_url or "-"
    program = config.program
    program_source = ("task app policy" if program is None else program.path or program.factory
                      or f"declarative {program.generator.kind if program.generator else ''}")
    estimate = estimate_lm_calls(job)
    rows = [
        ("job", f"{config.job.type} '{config.job.name}' (seed {config.job.seed})"),
        ("model", config.model.name + (f" @ {config.model.api_base}" if config.model.api_base else "")),
        ("program", f"{program_source} -> {job.program.name}, {generator_count(job.program)} prompt(s)"),
        ("data", f"{data.source if data else '-'}: {source}"),
        ("sizes", sizes_description(job)),
        ("reward", scorer_description(job.reward)),
        *([("metrics", ", ".join(scorer_description(metric) for metric in job.metrics))] if job.metrics else []),
        ("optimizer", optimizer_description(job)),
        *stage_estimates(job),
        ("training", ", ".join(f"{k}={v}" for k, v in config.training.model_dump().items() if v is not None)),
        ("est. LM calls", f"<= {estimate['total']} (" + ", ".join(f"{k} {v}" for k, v in estimate.items() if k != "total")
         + "); cached calls are free"),
    ]
    if execution is not None:
        rows.append(("runs on", execution.describe()))
    return [(key, masker.mask(value)) for key, value in rows]


def print_preview(job: RunPlan, masker: Masker, console: Console | None = None,
                  execution: ExecutionSpec | None = None) -> None:
    table = Table(title="Resolved job", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in preview_rows(job, masker, execution):
        table.add_row(key, value)
    (console or Console()).print(table)


def print_checks_before_run(job: RunPlan, console: Console | None = None) -> list[str]:
    """The optimizer's slow checks before the run (FineTune times one SFT step: it loads the base model), printed.

    Raises the optimizer's error (a model it cannot train, no labels) before the run starts.
    """
    lines = job.optimizer.check_before_run(job.program, job.data.x_train, job.data.y_train)
    for line in lines:
        (console or Console()).print(line, markup=False, soft_wrap=True)
    return lines


def validation_sample(job: RunPlan) -> tuple[Any, Any]:
    """The validation examples fit() will use: the validation data, else the validation_split tail of train."""
    data = job.data
    if data.x_val is not None and len(data.x_val):
        return data.x_val, data.y_val
    split = job.config.data.validation_split if job.config.data else 0.0
    cut = len(data.x_train) - int(math.floor(len(data.x_train) * split))
    return data.x_train[cut:], data.y_train[cut:]


def with_demonstrations(job: RunPlan) -> dict[str, Any] | None:
    """The program's prompts holding as many labelled demonstrations as the optimizer shows at most (None: it
    shows none), so the preview can price a candidate's calls too."""
    most = int(getattr(getattr(job.optimizer, "demos", None), "nb_max_examples", 0) or 0)
    x, y = job.data.x_train[:most], job.data.y_train[:most]
    if not most or not len(x):
        return None
    values = {}
    for prompt in trainable_prompts(job.program):
        if prompt.answer_fields is None:
            continue
        current = job.program.get_variables()[prompt.variable]
        examples = [{"inputs": inputs.get_json(), "outputs": {key: value for key, value in target.get_json().items()
                                                             if key in prompt.answer_fields}}
                    for inputs, target in zip(x, y)]
        values[prompt.variable] = {**current, "examples": examples}
    return values or None


def cost_estimate_line(job: RunPlan, prices: list[float], usage: Usage, seconds: float) -> str:
    """``est. cost: $0.42 (95% interval ...)`` from the headroom check's calls; what ``[budget] max_usd`` makes of it."""
    if usage.unpriced_calls:
        return (f"est. cost: unknown: {usage.unpriced_calls} of the {len(prices)} timed calls were of a model with no "
                "price (give [prices] or [model] price in the config; docs/cost.md)")
    estimate = estimate_cost(prices, estimate_lm_calls(job)["total"], seconds)
    if estimate is None:
        return "est. cost: no timed call to go on"
    line = f"est. cost: {estimate.describe()}; every call priced like the program's own"
    cap = job.config.budget.max_usd
    if cap is not None:
        if estimate.high_usd <= cap:
            line += f"; within max_usd={format_usd(cap)}"
        else:
            line += (f"; max_usd={format_usd(cap)} will likely stop it early"
                     f" (at about {min(100, 100 * cap / max(estimate.usd, 1e-12)):.0f}% of the estimate)")
    return line


def print_cost_estimate(job: RunPlan, prices: list[float], usage: Usage, seconds: float, masker: Masker,
                        console: Console) -> None:
    console.print(masker.mask(cost_estimate_line(job, prices, usage, seconds)), markup=False, soft_wrap=True)


def print_headroom(job: RunPlan, masker: Masker, console: Console | None = None) -> list[Any]:
    """Score the starting program on one validation minibatch and print what is worth knowing; the warnings."""
    import asyncio

    console = console or Console()
    x_val, y_val = validation_sample(job)
    size = min(job.config.training.minibatch_size, len(x_val))
    if not size:
        return []
    job.program.compile(reward=job.reward, optimizer=job.optimizer, metrics=job.metrics)
    started = time.perf_counter()
    with cost_samples() as prices, usage_scope() as usage:
        evaluation, warnings = asyncio.run(check_headroom(job.program, x_val, y_val, size, job.optimizer))
        demonstrated = with_demonstrations(job)
        if demonstrated:  # the calls with demonstrations a candidate will carry: they are dearer
            with variable_values(demonstrated):
                asyncio.run(job.program.evaluate(x_val[:size], y_val[:size], batch_size=max(1, size), verbose=0))
    seconds = time.perf_counter() - started
    reward = job.reward.name
    console.print(masker.mask(f"headroom check: the starting program scores {evaluation.describe(reward)} "
                              f"on {size} validation examples ({len(evaluation.failures)} failed); "
                              "training reruns them from the response cache"), markup=False, soft_wrap=True)
    print_cost_estimate(job, prices, usage, seconds, masker, console)
    for warning in warnings:
        console.print(masker.mask(f"warning: {warning.message}"), style="yellow", markup=False, soft_wrap=True)
    return warnings
