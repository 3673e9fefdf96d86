"""``program.export_sft_data()``: a trained program's successful runs as chat JSONL for fine-tuning.

    report = await program.export_sft_data(x_train, y_train, "distilled.jsonl", min_reward=1.0)
    report.rows, report.kept, report.below_reward, report.failed

Each labelled example runs through the rollout layer and is scored with the compiled reward; for
every example that earns at least ``min_reward``, each Generator step of its run becomes one
conversation: the messages that Generator sends (system prompt, then the input) and the answer it
gave. A ``FunctionCallingAgent`` step becomes one tool-calling conversation in the OpenAI form
(assistant ``tool_calls`` with JSON-string arguments, ``tool`` results, the answer) with its
``tools`` list in the row. By default the few-shot demonstrations are left out of the messages, so the rows teach a model
to answer *without* them: fine-tune on the file, then run the same program on the tuned model with its
demonstrations removed (``with_demonstrations=True`` keeps them, exactly as sent).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_text
from promptgym.core.deprecation import renamed_names
from promptgym.optimizers.finetune import step_conversation
from promptgym.rollouts import RolloutService
from promptgym.rollouts.executor import Executor
from promptgym.training.data import as_object_array, validate_inputs, validate_targets
from promptgym.training.fit import require_compiled


@dataclass
class SFTDataReport:
    """What ``export_sft_data`` wrote: rows per Generator, and why examples were left out."""

    path: Path
    rows: int
    kept: int
    below_reward: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    rows_per_module: dict[str, int] = field(default_factory=dict)
    mean_reward: float = 0.0

    def __str__(self) -> str:
        return (f"{self.rows} rows from {self.kept} examples (reward >= threshold) into {self.path}; "
                f"{len(self.below_reward)} below the threshold, {len(self.failed)} failed")


async def step_row(program: Any, step: Any, with_demonstrations: bool) -> dict[str, Any] | None:
    """One JSONL row for a step: ``{"messages"}``, or for an agent ``{"messages", "tools"}`` with OpenAI ``tool_calls``."""
    module = program.get_module(step.module)
    if callable(getattr(module, "sft_conversation", None)):
        examples = await module.tool_calls_generator.demonstrations(step.inputs) if with_demonstrations else []
        return module.sft_conversation(step.inputs, step.outputs, examples)
    conversation = await step_conversation(program, step, with_demonstrations)
    return None if conversation is None else {"messages": conversation}


def check_min_reward(min_reward: Any) -> float:
    """``min_reward`` as a float, or ValueError: it must be a finite number in [0, 1], the range rewards score in.

    >>> check_min_reward(0.5)
    0.5
    """
    if isinstance(min_reward, bool) or not isinstance(min_reward, (int, float)) or not math.isfinite(min_reward) \
            or not 0.0 <= min_reward <= 1.0:
        raise ValueError(f"min_reward: expected a number between 0 and 1 (rewards score in [0, 1]), got {min_reward!r}")
    return float(min_reward)


async def export_sft_data(program: Any, x: Any, y: Any, path: str | Path, min_reward: float = 1.0,
                          with_demonstrations: bool = False, batch_size: int = 32,
                          executor: Executor | None = None) -> SFTDataReport:
    """Write the conversations of the runs that earned ``min_reward``; returns counts (see the module doc).

    Raises ValueError for a ``min_reward`` that is not a number in [0, 1] (NaN compares false with every
    reward, so it would keep every run, wrong answers included) and for a ``path`` that is a directory.
    """
    check_min_reward(min_reward)
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory: give the JSONL file to write")
    compiled = require_compiled(program, "export_sft_data")
    xs, ys = as_object_array(x, "x"), as_object_array(y, "y")
    if len(xs) != len(ys):
        raise ValueError(f"x and y have different lengths ({len(xs)} and {len(ys)})")
    splits = {"train": (validate_inputs(program, xs, "x"), validate_targets(program, ys, "y"))}
    rollouts = RolloutService(program, compiled.reward, [], splits, executor=executor, max_errors=len(xs) + 1)
    results = await rollouts.run("train", list(range(len(xs))), window=batch_size)
    conversations: list[dict[str, Any]] = []
    report = SFTDataReport(path=Path(path), rows=0, kept=0)
    for index, result in enumerate(results):
        if result.error:
            report.failed[index] = result.error
            continue
        if result.reward < min_reward:
            report.below_reward.append(index)
            continue
        report.kept += 1
        for step in result.trace.steps if result.trace else []:
            conversation = await step_row(program, step, with_demonstrations)
            if conversation is not None:
                conversations.append(conversation)
                report.rows_per_module[step.module] = report.rows_per_module.get(step.module, 0) + 1
    report.rows = len(conversations)
    report.mean_reward = sum(result.reward for result in results) / len(results) if results else 0.0
    atomic_write_text(report.path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in conversations))
    return report


# "export" is an artifact for another stack (prompts, a merged model); this is a report on written training data.
__getattr__ = renamed_names(__name__, {"SFTExport": "SFTDataReport"}, globals())
