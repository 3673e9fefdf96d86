"""Shared parts of the prompt-search optimizers (GEPA, MIPRO).

- which variables are Generator states, and the text of the program's structure;
- guarded calls to a proposal/reflection model (failures logged, emitted, skipped);
- cheap rejection of degenerate proposals before any rollout is spent on them
  (small models answer "improve this prompt" with an empty string, a copy,
  a label, or a loop);
- exact counting of the rollouts a ``ctx.run`` is about to perform.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any, Sequence

import numpy as np

from promptgym.core.events import ProposalFailed, ProposalRejected
from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.lm.defaults import get_default_language_model
from promptgym.lm.usage import LEDGER, lm_phase
from promptgym.optimizers.base import Optimizer
from promptgym.optimizers.guard_rails import instruction_problem
from promptgym.training.context import TrainingContext

logger = logging.getLogger("promptgym")


def instruction_variables(variables: dict[str, Any]) -> list[str]:
    """Names of the variables that hold a Generator's instructions, in program order."""
    return [name for name, value in variables.items() if isinstance(value, dict) and "instructions" in value]


def module_of(variable_name: str) -> str:
    return variable_name.rsplit("/", 1)[0]


def pending_rollouts(ctx: TrainingContext, split: str, indices: Sequence[int], variables: dict[str, Any]) -> int:
    """How many of ``indices`` ``ctx.run`` would really run (the rest are memoised)."""
    return len(ctx.pending(split, [int(i) for i in indices], variables))


def lm_calls_since(snapshot: dict[str, Any]) -> int:
    """Model calls made (all phases) since ``snapshot``, not counting response-cache hits."""
    return sum(usage.calls - usage.cache_hits for usage in LEDGER.since(snapshot).values())


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def as_text(value: Any, limit: int = 600) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return truncate(text, limit)


def text_schema(field: str, description: str, min_length: int, max_length: int) -> dict[str, Any]:
    """A one-string-field JSON schema with length bounds (the grammar closes the string)."""
    return {
        "type": "object",
        "properties": {field: {"type": "string", "description": description,
                               "minLength": min_length, "maxLength": max_length}},
        "required": [field],
        "additionalProperties": False,
    }


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip("\"'`").strip().lower()


def output_strings(values: Sequence[Any]) -> set[str]:
    """Every string leaf in ``values`` (normalized): the labels a degenerate proposal copies."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, str):
            found.add(_normalize(node))
        elif isinstance(node, dict):
            for item in node.values():
                visit(item)
        elif isinstance(node, (list, tuple)):
            for item in node:
                visit(item)

    for value in values:
        visit(value)
    return found


def degenerate_reason(text: Any, parent: str, labels: set[str] | None = None, min_length: int = 20,
                      max_length: int = 2000) -> str | None:
    """Why a proposed instruction is not worth a rollout, or None when it looks usable.

    The checks are :func:`~promptgym.optimizers.guard_rails.instruction_problem`'s,
    with the stricter minimums a whole instruction needs (``min_length`` characters, 4 words).

    >>> degenerate_reason("positive", "Classify the sentiment.", {"positive"})
    'label-only: the text is an output label'
    """
    return instruction_problem(text, parent=parent, labels=labels or (), max_length=max_length,
                               min_length=min_length, min_words=4)


class PromptSearchOptimizer(Optimizer):
    """Base of GEPA and MIPRO: program access, the proposal model, guarded calls, loading candidates."""

    model_argument = ""
    """The constructor argument that holds the optimizer's own language model (saved in its config)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.program: Any = None
        self.proposal_failures = 0
        self.rejected_proposals = 0
        self._rng: np.random.Generator | None = None
        self._rng_state: dict[str, Any] | None = None
        self._seed_used: int | None = None

    def start_rng(self, ctx: TrainingContext) -> np.random.Generator:
        """The optimizer's own generator: seeded once (its seed, else one drawn from the trainer's),
        continuing from the saved state after a resume."""
        if self._rng is None:
            seed = self.seed if self.seed is not None else int(ctx.rng.integers(2**31))
            self._seed_used = seed
            self._rng = np.random.default_rng(seed)
            if self._rng_state is not None:
                self._rng.bit_generator.state = self._rng_state
        return self._rng

    def get_extra_state(self) -> dict[str, Any]:
        """The generator's state goes with the optimizer's, so a resumed search draws what it would have."""
        state = self._rng.bit_generator.state if self._rng is not None else self._rng_state
        return {**super().get_extra_state(), "rng": json.loads(json.dumps(state)) if state is not None else None,
                "proposal_failures": self.proposal_failures, "rejected_proposals": self.rejected_proposals}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self._rng_state, self._rng = state.get("rng"), None
        self.proposal_failures = int(state.get("proposal_failures", 0))
        self.rejected_proposals = int(state.get("rejected_proposals", 0))

    def get_config(self) -> dict[str, Any]:
        model = getattr(self, self.model_argument)
        return {**super().get_config(), self.model_argument: serialize_object(model) if model is not None else None}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "PromptSearchOptimizer":
        config = dict(config)
        if config.get(cls.model_argument):
            config[cls.model_argument] = deserialize_object(config[cls.model_argument], expected="language model")
        return cls(**config)

    def build(self, program: Any) -> None:
        self.program = program
        super().build(program)

    def resolve_language_model(self, explicit: Any, needed_by: str) -> Any:
        """``explicit``, else the default model, else the first Generator's model."""
        if explicit is not None:
            return explicit
        try:
            return get_default_language_model(needed_by)
        except ValueError:
            for module in getattr(self.program, "modules", []):
                model = getattr(module, "language_model", None)
                if model is not None:
                    return model
            raise

    def generator(self, variable_name: str) -> Any:
        """The module that owns ``variable_name`` (None if the program doesn't know it)."""
        try:
            return self.program.get_module(module_of(variable_name))
        except (KeyError, AttributeError):
            return None

    def describe_program(self) -> str:
        """The program's Generators in order: name, output fields, current instructions."""
        from promptgym.core.schema import describe_fields

        lines = []
        for name in instruction_variables(self.best.variables):
            module = self.generator(name)
            fields = describe_fields(module.data_model) if module is not None and hasattr(module, "data_model") else ""
            lines.append(f"Module {module_of(name)} ({type(module).__name__ if module else 'Generator'})")
            if fields:
                lines.append("  outputs:\n" + "\n".join("    " + line for line in fields.splitlines()))
            lines.append(f"  instructions: {as_text(self.best.variables[name]['instructions'], 400)}")
        return "\n".join(lines)

    async def ask(self, ctx: TrainingContext, language_model: Any, messages: list[dict[str, str]],
                  schema: dict[str, Any], what: str, temperature: float | None = None) -> dict[str, Any] | None:
        """One proposal/reflection call, attributed to the optimizer phase; a failure is logged and skipped."""
        try:
            with lm_phase("optimizer"):
                answer = await language_model(messages, schema=schema, temperature=temperature)
        except Exception as error:  # noqa: BLE001 - any model failure is data here, never fatal
            self.proposal_failures += 1
            logger.warning("%s: %s failed, skipped: %s: %s", type(self).__name__, what, type(error).__name__, error)
            await ctx.emit(ProposalFailed(optimizer=type(self).__name__, what=what,
                                          error=f"{type(error).__name__}: {error}"))
            return None
        return answer if isinstance(answer, dict) else None

    async def reject(self, ctx: TrainingContext, what: str, reason: str, text: Any = "") -> None:
        self.rejected_proposals += 1
        logger.info("%s: rejected %s (%s) before any rollout", type(self).__name__, what, reason)
        await ctx.emit(ProposalRejected(optimizer=type(self).__name__, what=what, reason=reason,
                                        text=as_text(text, 200)))

    def load_candidate(self, program: Any, candidate_id: int | None = None) -> dict[str, Any]:
        """Assign a candidate's variables (default: the best) to ``program``; returns them.

        >>> # optimizer.load_candidate(program, 3)
        """
        candidate = self.best if candidate_id is None else self.get_candidate(candidate_id)
        by_name = {variable.name: variable for variable in program.variables}
        unknown = sorted(set(candidate.variables) - set(by_name))
        if unknown:
            raise ValueError(f"candidate {candidate.id} has variables the program lacks: {', '.join(unknown)}")
        for name, value in candidate.variables.items():
            by_name[name].assign(value)
        return candidate.variables


def steps_per_epoch(train_size: int, batch_size: int) -> int:
    return max(1, math.ceil(train_size / max(1, batch_size)))
