"""The numbers a History row holds: mean reward and metrics of scored results, and LM usage."""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.lm.usage import PHASES
from promptgym.rollouts import ExampleResult
from promptgym.stats import Evaluation
from promptgym.training.spend import per_call_cost


def mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def usage_logs(since: dict[str, Any]) -> dict[str, int]:
    """LM calls and tokens (all phases), and calls per phase, from a ledger difference."""
    logs = {
        "lm_calls": sum(usage.calls for usage in since.values()),
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
    for metric in compiled.metrics:
        if getattr(metric, "operational", False):  # tokens, calls, cost: the counters' value now
            logs[f"{prefix}{metric.name}"] = float(metric.result())
        else:
            logs[f"{prefix}{metric.name}"] = mean([r.metrics.get(metric.name, 0.0) for r in results])
    return logs


def scored_evaluation(results: list[ExampleResult], compiled: Any, prefix: str = "") -> Evaluation:
    """:func:`scored_logs` as an :class:`Evaluation`: the same means, with the per-example scores behind them."""
    scores: dict[str, list[float]] = {}
    if not getattr(compiled.reward, "placeholder", False):  # compiled without a reward: metrics only
        scores[f"{prefix}{compiled.reward.name}"] = [r.reward for r in results]
    for metric in compiled.metrics:
        if getattr(metric, "operational", False):  # tokens, calls, cost: the counters' value now
            scores[f"{prefix}{metric.name}"] = [float(metric.result())] * len(results)
        else:
            scores[f"{prefix}{metric.name}"] = [r.metrics.get(metric.name, 0.0) for r in results]
    evaluation = Evaluation(scores, failures=[position for position, r in enumerate(results) if r.error])
    evaluation.cost = per_call_cost([r.tokens for r in results], [r.usd for r in results])  # cost beside the score
    return evaluation
