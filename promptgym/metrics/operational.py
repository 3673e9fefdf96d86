"""Operational metrics: what a program's models spent (tokens, calls, latency, cost) and how often it ran.

    metric = TotalTokens()
    metric.bind_program(program)      # compile(metrics=[...]) does it for you
    await program(x)
    metric.result()                   # tokens of the program's language models since bind_program()

They read the usage counters promptgym keeps anyway (``lm.usage``), so they
add no work. Before ``bind_program`` they report 0. Compiled on a program,
History reports their value at the end of each epoch / evaluation.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.lm.usage import Usage
from promptgym.metrics.base import Metric


def _walk(module: Any, seen: set[int]) -> list[Any]:
    found = []
    for child in [*getattr(module, "modules", []), *getattr(module, "submodules", [])]:
        if id(child) not in seen:
            seen.add(id(child))
            found += [child, *_walk(child, seen)]
    return found


def language_models(program: Any, attribute: str = "language_model") -> list[Any]:
    """Every distinct model of ``program``'s modules (nested ones and fallbacks included)."""
    models: dict[int, Any] = {}
    for module in _walk(program, {id(program)}):
        model = getattr(module, attribute, None)
        while model is not None and id(model) not in models:
            models[id(model)] = model
            model = getattr(model, "fallback", None)
    return list(models.values())


class OperationalMetric(Metric):
    """Reads counters of a bound program; ``value(usage, program)`` says which."""

    operational = True
    model_attribute = "language_model"
    direction = "down"

    def __init__(self, name: str | None = None, **masks: Any) -> None:
        super().__init__(name=name, **masks)
        self.program: Any = None
        self._baseline: tuple[Usage, int, float] = (Usage(), 0, 0.0)

    def _counters(self) -> tuple[Usage, int, float]:
        usage = Usage()
        if self.program is None:
            return usage, 0, 0.0
        for model in language_models(self.program, self.model_attribute):
            usage.add(model.usage.total())
        return usage, getattr(self.program, "call_count", 0), getattr(self.program, "call_seconds", 0.0)

    def bind_program(self, program: Any) -> None:
        """Measure ``program`` from now on."""
        self.program = program
        self._baseline = self._counters()

    def reset_state(self) -> None:
        super().reset_state()
        self._baseline = self._counters()

    def value(self, usage: Usage, calls: int, seconds: float) -> float:
        raise NotImplementedError

    def result(self) -> Any:
        usage, calls, seconds = self._counters()
        base_usage, base_calls, base_seconds = self._baseline
        return self.value(usage.minus(base_usage), calls - base_calls, seconds - base_seconds)

    async def update_state(self, y_true: Any = None, y_pred: Any = None) -> None:
        """Nothing to add: the counters are the models' own."""

    async def score(self, y_true: Any, y_pred: Any) -> Any:
        from promptgym.rewards.base import RewardResult

        return RewardResult(float(self.result()))


def _ratio(a: float, b: float) -> float:
    return float(a) / b if b else 0.0


def _define(name: str, doc: str, value: Any, model_attribute: str = "language_model",
            direction: str = "down") -> type[OperationalMetric]:
    cls = type(name, (OperationalMetric,), {"__doc__": doc, "value": lambda self, u, c, s: value(u, c, s),
                                            "model_attribute": model_attribute, "direction": direction,
                                            "default_name": "".join(f"_{ch.lower()}" if ch.isupper() and i else ch.lower()
                                                                    for i, ch in enumerate(name))})
    cls.__module__ = __name__
    return register_builtin(cls)


TotalTokens = _define("TotalTokens", "Prompt and completion tokens.", lambda u, c, s: u.prompt_tokens + u.completion_tokens)
InputTokens = _define("InputTokens", "Prompt tokens.", lambda u, c, s: u.prompt_tokens)
OutputTokens = _define("OutputTokens", "Completion tokens.", lambda u, c, s: u.completion_tokens)
LMCalls = _define("LMCalls", "Language model calls (cache hits included).", lambda u, c, s: u.calls)
CacheHitRate = _define("CacheHitRate", "Share of calls answered by the response cache.",
                       lambda u, c, s: _ratio(u.cache_hits, u.calls), direction="up")
FailedCalls = _define("FailedCalls", "Calls that failed.", lambda u, c, s: u.failures)
ErrorRate = _define("ErrorRate", "Share of calls that failed.", lambda u, c, s: _ratio(u.failures, u.calls))
AvgLatency = _define("AvgLatency", "Seconds per call that reached the model.",
                     lambda u, c, s: _ratio(u.latency_s, u.calls - u.cache_hits))
AvgInputTokensPerCall = _define("AvgInputTokensPerCall", "Prompt tokens per call.",
                                lambda u, c, s: _ratio(u.prompt_tokens, u.calls))
AvgOutputTokensPerCall = _define("AvgOutputTokensPerCall", "Completion tokens per call.",
                                 lambda u, c, s: _ratio(u.completion_tokens, u.calls))
AvgTotalTokensPerCall = _define("AvgTotalTokensPerCall", "Tokens per call.",
                                lambda u, c, s: _ratio(u.prompt_tokens + u.completion_tokens, u.calls))
Throughput = _define("Throughput", "Completion tokens per second of model time.",
                     lambda u, c, s: _ratio(u.completion_tokens, u.latency_s), direction="up")
Cost = _define("Cost", "What the servers billed (when they report usage.cost; 0 for the embedded engine).",
               lambda u, c, s: float(u.cost))
EmbeddingCalls = _define("EmbeddingCalls", "Embedding model calls.", lambda u, c, s: u.calls, "embedding_model")
ProgramCalls = _define("ProgramCalls", "Times the program ran.", lambda u, c, s: c)
ProgramElapsedTime = _define("ProgramElapsedTime", "Seconds the program spent running.", lambda u, c, s: s)
ProgramCallsPerSecond = _define("ProgramCallsPerSecond", "Program runs per second of running.",
                                lambda u, c, s: _ratio(c, s), direction="up")
ProgramCost = _define("ProgramCost", "What the program's models' servers billed.", lambda u, c, s: float(u.cost))
ProgramAvgCostPerInvocation = _define("ProgramAvgCostPerInvocation", "Billed cost per program run.",
                                      lambda u, c, s: _ratio(u.cost, c))

OPERATIONAL_METRICS = [TotalTokens, InputTokens, OutputTokens, LMCalls, CacheHitRate, FailedCalls, ErrorRate, AvgLatency,
                       AvgInputTokensPerCall, AvgOutputTokensPerCall, AvgTotalTokensPerCall, Throughput, Cost,
                       EmbeddingCalls, ProgramCalls, ProgramElapsedTime, ProgramCallsPerSecond, ProgramCost,
                       ProgramAvgCostPerInvocation]
