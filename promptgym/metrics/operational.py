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
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.usage import Usage
from promptgym.metrics.base import Metric
from promptgym.rewards.base import RewardResult


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


def held_models(holder: Any, attribute: str = "language_model") -> list[Any]:
    """The models an optimizer or a reward holds (in its attributes, and in the modules it holds)."""
    kind = EmbeddingModel if attribute == "embedding_model" else LanguageModel
    models: dict[int, Any] = {}
    for value in vars(holder).values() if hasattr(holder, "__dict__") else []:
        found = [value] if isinstance(value, kind) else []
        if hasattr(value, "submodules") or hasattr(value, "modules"):
            found += [*language_models(value, attribute), *([getattr(value, attribute)] if isinstance(
                getattr(value, attribute, None), kind) else [])]
        for model in found:
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

    source = "program"
    """What is counted: every call of the program's models (``"program"``), or only the calls made while
    computing rewards (``"reward"``) or by the optimizer (``"optimizer"``), by any model reachable from the
    program, its compiled reward and its optimizer."""

    def _counters(self) -> tuple[Usage, int, float]:
        usage = Usage()
        if self.program is None:
            return usage, 0, 0.0
        models = language_models(self.program, self.model_attribute)
        if self.source != "program":  # the calls made in that phase, by any model the program reaches
            for holder_name in ("reward", "optimizer"):
                holder = getattr(self.program, holder_name, None)
                models += [m for m in held_models(holder, self.model_attribute) if m not in models] if holder else []
        phases = ("reward", "judge") if self.source == "reward" else (self.source,)  # a judge is a reward
        for model in models:
            if self.source == "program":
                usage.add(model.usage.total())
                continue
            for phase in phases:
                usage.add(model.usage.by_phase.get(phase, Usage()))
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
        return RewardResult(float(self.result()))


def _ratio(a: float, b: float) -> float:
    return float(a) / b if b else 0.0


def _define(name: str, doc: str, value: Any, model_attribute: str = "language_model",
            direction: str = "down", source: str = "program") -> type[OperationalMetric]:
    cls = type(name, (OperationalMetric,), {"__doc__": doc, "value": lambda self, u, c, s: value(u, c, s),
                                            "model_attribute": model_attribute, "direction": direction,
                                            "source": source,
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

AvgCostPerCall = _define("AvgCostPerCall", "Billed cost per language-model call.", lambda u, c, s: _ratio(u.cost, u.calls))
TokensPerSecond = _define("TokensPerSecond", "Tokens (prompt and completion) per second of program running.",
                          lambda u, c, s: _ratio(u.prompt_tokens + u.completion_tokens, s), direction="up")
AvgTimeToFirstToken = _define("AvgTimeToFirstToken", "Seconds to the first chunk of a streamed answer.",
                              lambda u, c, s: _ratio(u.ttft_s, u.streaming_calls))
AvgTimeToLastToken = _define("AvgTimeToLastToken", "Seconds to the last chunk of a streamed answer.",
                             lambda u, c, s: _ratio(u.ttlt_s, u.streaming_calls))
OPERATIONAL_METRICS += [AvgCostPerCall, TokensPerSecond, AvgTimeToFirstToken, AvgTimeToLastToken]

# The same counters for the calls made while computing rewards (an LM judge) and by the optimizer (OMEGA's,
# GEPA's, MIPRO's proposals): synalinks' Reward*/Optimizer* metrics. The phase of a call, not the model,
# decides, so a model the program shares with its judge is split correctly.
_PER_SOURCE = {
    "Cost": ("{} cost (billed).", lambda u, c, s: float(u.cost), "down"),
    "InputTokens": ("{} prompt tokens.", lambda u, c, s: u.prompt_tokens, "down"),
    "OutputTokens": ("{} completion tokens.", lambda u, c, s: u.completion_tokens, "down"),
    "TotalTokens": ("{} tokens.", lambda u, c, s: u.prompt_tokens + u.completion_tokens, "down"),
    "FailedCalls": ("{} failed calls.", lambda u, c, s: u.failures, "down"),
    "ErrorRate": ("{} share of failed calls.", lambda u, c, s: _ratio(u.failures, u.calls), "down"),
    "CacheHitRate": ("{} share of calls the cache answered.", lambda u, c, s: _ratio(u.cache_hits, u.calls), "up"),
    "Throughput": ("{} completion tokens per second of model time.",
                   lambda u, c, s: _ratio(u.completion_tokens, u.latency_s), "up"),
    "TokensPerSecond": ("{} tokens per second of model time.",
                        lambda u, c, s: _ratio(u.prompt_tokens + u.completion_tokens, u.latency_s), "up"),
    "Avg{}Latency": ("{} seconds per call that reached the model.",
                     lambda u, c, s: _ratio(u.latency_s, u.calls - u.cache_hits), "down"),
    "Avg{}CostPerCall": ("{} billed cost per call.", lambda u, c, s: _ratio(u.cost, u.calls), "down"),
    "Avg{}InputTokensPerCall": ("{} prompt tokens per call.", lambda u, c, s: _ratio(u.prompt_tokens, u.calls), "down"),
    "Avg{}OutputTokensPerCall": ("{} completion tokens per call.",
                                 lambda u, c, s: _ratio(u.completion_tokens, u.calls), "down"),
    "Avg{}TotalTokensPerCall": ("{} tokens per call.",
                                lambda u, c, s: _ratio(u.prompt_tokens + u.completion_tokens, u.calls), "down"),
}
for _source, _prefix, _who in (("optimizer", "Optimizer", "Optimizer calls:"),
                               ("reward", "Reward", "Reward calls (an LM judge):")):
    for _pattern, (_doc, _value, _direction) in _PER_SOURCE.items():
        _name = _pattern.format(_prefix) if "{}" in _pattern else _prefix + _pattern
        globals()[_name] = _define(_name, _doc.format(_who), _value, direction=_direction, source=_source)
        OPERATIONAL_METRICS.append(globals()[_name])
