"""Operational metrics: what a program's models spent (tokens, calls, latency, cost) and how often it ran.

    metric = TotalTokens()
    metric.bind_program(program)      # compile(metrics=[...]) does it for you
    await program(x)
    metric.result()                   # tokens of the program's language models since bind_program()

They read the counters promptgym keeps anyway (each model's ``usage``
ledger, by phase, seen through synalinks' names ``lm.<phase>_cumulated_<suffix>``;
a module's ``<phase>_cumulated_invocations``), so they add no work. The
names, phases and formulas are synalinks' (``synalinks.metrics.*``): the
plain names count the inference phase (every call outside a reward or an
optimizer), ``Reward*`` the calls made while computing rewards (an LM judge),
``Optimizer*`` the optimizer's calls; the phase of a call decides, not the
model. Rates divide by the phase's wall-clock time (``lm_phase`` blocks);
where no block timed the phase (a program called by hand), by the calls' own
summed latency. Before ``bind_program`` they report 0. Compiled on a program,
History reports their value at the end of each epoch / evaluation.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from promptgym.core.serialization import register_builtin
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.usage import PHASE_COUNTERS, read_phase_wall_clock_s
from promptgym.metrics.base import Metric
from promptgym.rewards.base import RewardResult

_PROGRAM_COUNTERS = ("invocations", "invocation_elapsed_s")


def _flatten(program: Any) -> list[Any]:
    """``program`` and every module under it: synalinks' ``_flatten_modules`` or promptgym's ``modules``/``submodules``."""
    flatten = getattr(program, "_flatten_modules", None)
    if callable(flatten):
        return list(flatten(include_self=True, recursive=True))
    found, seen, stack = [program], {id(program)}, [program]
    while stack:
        module = stack.pop()
        for child in [*(getattr(module, "modules", None) or []), *(getattr(module, "submodules", None) or [])]:
            if id(child) not in seen and not isinstance(child, (LanguageModel, EmbeddingModel)):
                seen.add(id(child))
                found.append(child)
                stack.append(child)
    return found


def _models(program: Any, kind: type, attributes: tuple[str, ...]) -> list[Any]:
    """Every distinct model of ``kind`` ``program``'s modules hold (in ``attributes``), fallbacks included."""
    models: dict[int, Any] = {}
    for module in _flatten(program):
        for model in [*(getattr(module, name, None) for name in attributes), module]:
            while isinstance(model, kind) and id(model) not in models:
                models[id(model)] = model
                model = getattr(model, "fallback", None)
    return list(models.values())


def collect_language_models(program: Any) -> list[LanguageModel]:
    """Every distinct language model of ``program`` (``language_model``, ``sub_language_model``, fallbacks).

    >>> from promptgym.testing import ScriptedLanguageModel
    >>> import promptgym
    >>> lm = ScriptedLanguageModel(responses=[])
    >>> collect_language_models(promptgym.Generator(data_model=promptgym.DataModel, language_model=lm)) == [lm]
    True
    """
    return _models(program, LanguageModel, ("language_model", "sub_language_model"))


def collect_embedding_models(program: Any) -> list[EmbeddingModel]:
    """Every distinct embedding model of ``program`` (``embedding_model``, fallbacks)."""
    return _models(program, EmbeddingModel, ("embedding_model",))


def language_models(program: Any, attribute: str = "language_model") -> list[Any]:
    """The models of ``program``'s modules (nested ones and fallbacks included) of one kind."""
    return collect_embedding_models(program) if attribute == "embedding_model" else collect_language_models(program)


def held_models(holder: Any, attribute: str = "language_model") -> list[Any]:
    """The models an optimizer or a reward holds (in its attributes, and in the modules it holds)."""
    kind = EmbeddingModel if attribute == "embedding_model" else LanguageModel
    models: dict[int, Any] = {}
    for value in vars(holder).values() if hasattr(holder, "__dict__") else []:
        found = [value] if isinstance(value, kind) else []
        if hasattr(value, "submodules") or hasattr(value, "modules") or hasattr(value, "_flatten_modules"):
            found += language_models(value, attribute)
        for model in found:
            while model is not None and id(model) not in models:
                models[id(model)] = model
                model = getattr(model, "fallback", None)
    return list(models.values())


class OperationalMetric(Metric):
    """Reads one phase's counters of the models a bound program reaches; ``value(counts)`` says which.

    ``counts`` has each counter (synalinks' suffixes: ``calls``, ``prompt_tokens``, ``tokens``,
    ``elapsed_s``, ``cost``, ``cached_tokens``, ...) since ``bind_program``/``reset_state``, plus
    ``wall`` (the phase's seconds), ``invocations`` and ``invocation_elapsed_s`` (the program's own runs).
    """

    operational = True
    model_attribute = "language_model"
    direction = "down"
    _phase = "inference"
    """Which calls count: ``inference`` (the program's own), ``reward`` or ``optimizer``. For the last
    two, the models the compiled reward and optimizer hold count too (an LM judge outside the program)."""

    def __init__(self, name: str | None = None, **masks: Any) -> None:
        super().__init__(name=name, **masks)
        self.program: Any = None
        self._baseline: dict[str, float] = {}

    @property
    def source(self) -> str:
        """The phase counted (the name promptgym used before synalinks' ``_phase``)."""
        return self._phase

    def _bound_models(self) -> list[Any]:
        if self.program is None:
            return []
        models = language_models(self.program, self.model_attribute)
        if self._phase != "inference":  # the calls made in that phase, by any model the program reaches
            for holder_name in ("reward", "optimizer"):
                holder = getattr(self.program, holder_name, None)
                models += [m for m in held_models(holder, self.model_attribute) if m not in models] if holder else []
        return models

    @property
    def language_models(self) -> list[Any]:
        """The models read (synalinks' name; embedding models for the ``Embedding*`` metrics)."""
        return self._bound_models()

    def _counters(self) -> dict[str, float]:
        models = self._bound_models()
        phases = ("reward", "judge") if self._phase == "reward" else (self._phase,)  # a judge's calls are a reward's
        counters = {suffix: sum(getattr(model, f"{phase}_cumulated_{suffix}", 0) for model in models for phase in phases)
                    for suffix in PHASE_COUNTERS}
        for suffix in _PROGRAM_COUNTERS:
            counters[suffix] = getattr(self.program, f"{self._phase}_cumulated_{suffix}", 0) if self.program else 0
        counters["wall"] = read_phase_wall_clock_s(self._phase)
        return counters

    def bind_program(self, program: Any) -> None:
        """Measure ``program`` from now on."""
        self.program = program
        self._baseline = self._counters()

    def reset_state(self) -> None:
        super().reset_state()
        self._baseline = self._counters()

    def value(self, counts: SimpleNamespace) -> float:
        raise NotImplementedError

    def result(self) -> Any:
        now = self._counters()
        return self.value(SimpleNamespace(**{key: now[key] - self._baseline.get(key, 0) for key in now}))

    async def update_state(self, y_true: Any = None, y_pred: Any = None) -> None:
        """Nothing to add: the counters are the models' own."""

    async def score(self, y_true: Any, y_pred: Any) -> Any:
        return RewardResult(float(self.result()))


def _ratio(a: float, b: float) -> float:
    return float(a) / b if b > 0 else 0.0


def _rate(amount: float, c: SimpleNamespace) -> float:
    """Per second of the phase's wall clock; of the calls' summed latency where nothing timed the phase."""
    return _ratio(amount, c.wall if c.wall > 0 else c.elapsed_s)


def _snake(name: str) -> str:
    out = ""
    for index, char in enumerate(name):
        if char.isupper() and index and not (name[index - 1].isupper() and (index + 1 == len(name) or name[index + 1].isupper())):
            out += "_"
        out += char.lower()
    return out


OPERATIONAL_METRICS: list[type[OperationalMetric]] = []


def _define(name: str, doc: str, value: Callable[[SimpleNamespace], float], base: type[OperationalMetric],
            direction: str = "down", integer: bool = False) -> type[OperationalMetric]:
    def compute(self: OperationalMetric, counts: SimpleNamespace) -> float:
        result = value(counts)
        return int(result) if integer else float(result)

    cls = type(name, (base,), {"__doc__": doc, "value": compute, "direction": direction,
                               "default_name": _snake(name)})
    cls.__module__ = __name__
    globals()[name] = register_builtin(cls)
    OPERATIONAL_METRICS.append(cls)
    return cls


class LMOperationalMetric(OperationalMetric):
    """Base of the language-model metrics of the inference phase (synalinks' name)."""


class LMRewardsOperationalMetric(OperationalMetric):
    """Base of the language-model metrics of the reward phase."""

    _phase = "reward"


class LMOptimizersOperationalMetric(OperationalMetric):
    """Base of the language-model metrics of the optimizer phase."""

    _phase = "optimizer"


class EmbeddingModelOperationalMetric(OperationalMetric):
    """Base of the embedding-model metrics of the inference phase."""

    model_attribute = "embedding_model"


class EmbeddingModelRewardsOperationalMetric(EmbeddingModelOperationalMetric):
    _phase = "reward"


class EmbeddingModelOptimizersOperationalMetric(EmbeddingModelOperationalMetric):
    _phase = "optimizer"


class ProgramOperationalMetric(OperationalMetric):
    """Base of the metrics of the program's own runs (``<phase>_cumulated_invocations``) and their cost."""

    def _counters(self) -> dict[str, float]:
        counters = super()._counters()
        # a program's cost is what its language and embedding models were billed
        embedders = [] if self.program is None else language_models(self.program, "embedding_model")
        counters["cost"] += sum(getattr(model, f"{self._phase}_cumulated_cost", 0) for model in embedders)
        return counters


# -- language models: (name pattern, doc, value, direction, integer); "{}" is where "Reward"/"Optimizer" go --
_LM = [
    ("{}InputTokens", "{} prompt tokens.", lambda c: c.prompt_tokens, "down", True),
    ("{}OutputTokens", "{} completion tokens.", lambda c: c.completion_tokens, "down", True),
    ("{}TotalTokens", "{} tokens (prompt and completion).", lambda c: c.tokens, "down", True),
    ("Avg{}InputTokensPerCall", "{} prompt tokens per call.", lambda c: _ratio(c.prompt_tokens, c.calls), "down", False),
    ("Avg{}OutputTokensPerCall", "{} completion tokens per call.", lambda c: _ratio(c.completion_tokens, c.calls),
     "down", False),
    ("Avg{}TotalTokensPerCall", "{} tokens per call.", lambda c: _ratio(c.tokens, c.calls), "down", False),
    ("Avg{}CachedTokensPerCall", "{} provider-cached prompt tokens per call.",
     lambda c: _ratio(c.cached_tokens, c.calls), "down", False),
    ("Avg{}CacheCreationTokensPerCall", "{} prompt tokens written to the provider's cache per call.",
     lambda c: _ratio(c.cache_creation_tokens, c.calls), "down", False),
    ("Avg{}ReasoningTokensPerCall", "{} reasoning tokens per call.", lambda c: _ratio(c.reasoning_tokens, c.calls),
     "down", False),
    ("{}TokensPerSecond", "{} tokens per second of the phase.", lambda c: _rate(c.tokens, c), "up", False),
    ("{}Throughput", "{} calls per second of the phase.", lambda c: _rate(c.calls, c), "up", False),
    ("Avg{}Latency", "{} seconds per call (each call's own time).", lambda c: _ratio(c.elapsed_s, c.calls),
     "down", False),
    ("{}Cost", "{} cost (what the servers billed; 0 for the embedded engine).", lambda c: c.cost, "down", False),
    ("Avg{}CostPerCall", "{} billed cost per call.", lambda c: _ratio(c.cost, c.calls), "down", False),
    ("{}CachedTokens", "{} prompt tokens the provider served from its prompt cache.", lambda c: c.cached_tokens,
     "down", True),
    ("{}CacheCreationTokens", "{} prompt tokens written to the provider's prompt cache.",
     lambda c: c.cache_creation_tokens, "down", True),
    ("{}CacheHitRate", "{} share of prompt tokens the provider's prompt cache served.",
     lambda c: _ratio(c.cached_tokens, c.prompt_tokens), "up", False),
    ("{}ReasoningTokens", "{} reasoning tokens.", lambda c: c.reasoning_tokens, "down", True),
    ("{}ReasoningTokenShare", "{} share of completion tokens spent reasoning.",
     lambda c: _ratio(c.reasoning_tokens, c.completion_tokens), "down", False),
    ("{}FailedCalls", "{} calls that failed after their retries.", lambda c: c.failed_calls, "down", True),
    ("{}FallbackActivations", "{} failed calls the model's fallback answered.", lambda c: c.fallback_activations,
     "down", True),
    ("{}ErrorRate", "{} share of calls that failed: failed / (succeeded + failed).",
     lambda c: _ratio(c.failed_calls, c.calls + c.failed_calls), "down", False),
]
_INFERENCE_ONLY = [
    ("AvgTimeToFirstToken", "Seconds to the first chunk of a streamed answer.",
     lambda c: _ratio(c.streaming_ttft_s, c.streaming_calls), "down", False),
    ("AvgTimeToLastToken", "Seconds to the last chunk of a streamed answer.",
     lambda c: _ratio(c.streaming_ttlt_s, c.streaming_calls), "down", False),
    ("AvgTrajectoryTimeToFirstToken", "Seconds from an agent trajectory's start to its streamed answer's first chunk.",
     lambda c: _ratio(c.trajectory_ttft_s, c.trajectory_calls), "down", False),
    ("LMCalls", "Language model calls that did not fail (cache hits included).", lambda c: c.calls, "down", True),
    ("ResponseCacheHitRate", "Share of calls promptgym's response cache answered.",
     lambda c: _ratio(c.cache_hits, c.calls), "up", False),
]
_EM = [
    ("{}EmbeddingTokens", "{} embedding input tokens (when the server says).", lambda c: c.tokens, "down", True),
    ("{}EmbeddingVectors", "{} vectors embedded.", lambda c: c.vectors, "down", True),
    ("{}EmbeddingCost", "{} embedding cost (billed).", lambda c: c.cost, "down", False),
    ("{}EmbeddingThroughput", "{} embedding calls per second of the phase.", lambda c: _rate(c.calls, c), "up", False),
    ("Avg{}EmbeddingLatency", "{} seconds per embedding call.", lambda c: _ratio(c.elapsed_s, c.calls), "down", False),
    ("{}EmbeddingTokensPerSecond", "{} embedding tokens per second of the phase.", lambda c: _rate(c.tokens, c),
     "up", False),
    ("{}EmbeddingVectorsPerSecond", "{} vectors per second of the phase.", lambda c: _rate(c.vectors, c), "up", False),
    ("Avg{}EmbeddingTokensPerCall", "{} embedding tokens per call.", lambda c: _ratio(c.tokens, c.calls), "down",
     False),
    ("Avg{}EmbeddingVectorsPerCall", "{} vectors per embedding call.", lambda c: _ratio(c.vectors, c.calls), "down",
     False),
    ("Avg{}EmbeddingCostPerCall", "{} billed cost per embedding call.", lambda c: _ratio(c.cost, c.calls), "down",
     False),
    ("Avg{}EmbeddingCachedTokensPerCall", "{} provider-cached embedding tokens per call.",
     lambda c: _ratio(c.cached_tokens, c.calls), "down", False),
    ("{}EmbeddingCachedTokens", "{} provider-cached embedding tokens.", lambda c: c.cached_tokens, "down", True),
    ("{}EmbeddingCacheHitRate", "{} share of embedding tokens the provider's cache served.",
     lambda c: _ratio(c.cached_tokens, c.prompt_tokens), "up", False),
    ("{}EmbeddingFailedCalls", "{} embedding calls that failed.", lambda c: c.failed_calls, "down", True),
    ("{}EmbeddingFallbackActivations", "{} failed embedding calls the fallback answered.",
     lambda c: c.fallback_activations, "down", True),
    ("{}EmbeddingErrorRate", "{} share of embedding calls that failed.",
     lambda c: _ratio(c.failed_calls, c.calls + c.failed_calls), "down", False),
]
_PROGRAM = [
    ("ProgramCalls", "Times the program ran.", lambda c: c.invocations, "down", True),
    ("ProgramElapsedTime", "Seconds the program spent running.", lambda c: c.invocation_elapsed_s, "down", False),
    ("ProgramCallsPerSecond", "Program runs per second of running.",
     lambda c: _ratio(c.invocations, c.invocation_elapsed_s), "up", False),
    ("ProgramCost", "What the program's language and embedding models were billed.", lambda c: c.cost, "down", False),
    ("ProgramAvgCostPerInvocation", "Billed cost per program run.", lambda c: _ratio(c.cost, c.invocations), "down",
     False),
]

_PHASE_WORDS = {"": ("", "Inference calls:"), "Reward": ("reward", "Reward calls (an LM judge):"),
                "Optimizer": ("optimizer", "Optimizer calls:")}
for _prefix, (_phase, _who) in _PHASE_WORDS.items():
    _bases = {"": (LMOperationalMetric, EmbeddingModelOperationalMetric),
              "Reward": (LMRewardsOperationalMetric, EmbeddingModelRewardsOperationalMetric),
              "Optimizer": (LMOptimizersOperationalMetric, EmbeddingModelOptimizersOperationalMetric)}[_prefix]
    for _table, _base in ((_LM, _bases[0]), (_EM, _bases[1])):
        for _pattern, _doc, _value, _direction, _integer in _table:
            _define(_pattern.format(_prefix), _doc.format(_who), _value, _base, _direction, _integer)
for _name, _doc, _value, _direction, _integer in _INFERENCE_ONLY:
    _define(_name, _doc, _value, LMOperationalMetric, _direction, _integer)
for _name, _doc, _value, _direction, _integer in _PROGRAM:
    _define(_name, _doc, _value, ProgramOperationalMetric, _direction, _integer)
EmbeddingCalls = _define("EmbeddingCalls", "Embedding model calls.", lambda c: c.calls, EmbeddingModelOperationalMetric,
                         "down", True)
