"""Shared parts of the prompt-search optimizers (GEPA, MIPRO).

- the text of the program's structure (from the kit's prompt states);
- guarded calls to a proposal/reflection model (failures logged, emitted, skipped);
- cheap rejection of degenerate proposals before any rollout is spent on them
  (small models answer "improve this prompt" with an empty string, a copy,
  a label, or a loop);
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Callable, Sequence

from promptgym.core.events import ProposalFailed, ProposalRejected
from promptgym.core.schema import describe_fields
from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.lm.defaults import get_default_language_model
from promptgym.lm.usage import lm_phase
from promptgym.optimizers.base import Optimizer
from promptgym.optimizers.guard_rails import cut_repetition, instruction_problem
from promptgym.optimizers.kit import Budget, OptimizerContext

logger = logging.getLogger("promptgym")


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
    """Base of GEPA and MIPRO: the proposal model, the program's description, guarded calls."""

    model_argument = ""
    """The constructor argument that holds the optimizer's own language model (saved in its config)."""

    min_instruction_length: int
    max_instruction_length: int
    """Bounds on a proposed instruction's length, in characters (each subclass's arguments)."""

    def __init__(self, seed: int | None = None, budget: Budget | None = None) -> None:
        super().__init__(seed=seed, budget=budget)
        self.proposal_failures = 0
        self.rejected_proposals = 0

    @property
    def generators(self) -> list[str]:
        """The variables holding a prompt this search rewrites, in program order."""
        return [state.variable for state in self.prompts]

    def get_config(self) -> dict[str, Any]:
        model = getattr(self, self.model_argument)
        return {**super().get_config(), self.model_argument: serialize_object(model) if model is not None else None}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "PromptSearchOptimizer":
        config = dict(config)
        if config.get(cls.model_argument):
            config[cls.model_argument] = deserialize_object(config[cls.model_argument], expected="language model")
        return cls(**config)

    def resolve_language_model(self, explicit: Any, needed_by: str) -> Any:
        """``explicit``, else the default model, else the first Generator's model."""
        if explicit is not None:
            return explicit
        try:
            return get_default_language_model(needed_by)
        except ValueError:
            for state in self.prompts:
                model = getattr(state.module, "language_model", None)
                if model is not None:
                    return model
            raise

    def describe_program(self) -> str:
        """The program's Generators in order: name, output fields, current instructions."""
        lines = []
        for state in self.prompts:
            module = state.module
            fields = describe_fields(module.data_model) if hasattr(module, "data_model") else ""
            lines.append(f"Module {state.module_name} ({type(module).__name__})")
            if fields:
                lines.append("  outputs:\n" + "\n".join("    " + line for line in fields.splitlines()))
            lines.append(f"  instructions: {as_text(self.best.variables[state.variable]['instructions'], 400)}")
        return "\n".join(lines)

    async def ask(self, ctx: OptimizerContext, language_model: Any, messages: list[dict[str, str]],
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

    async def accept_instructions(self, ctx: OptimizerContext, proposed: Any, current: str, labels: set[str],
                                  what: str, known: Callable[[str], str | None] = lambda text: None) -> str | None:
        """The proposed instructions, stripped, or None when rejected before any rollout.

        ``proposed`` (the model's answer field) is cut of repetitions, then rejected
        (:meth:`reject`, which counts and reports it) when :func:`degenerate_reason`
        finds it unusable against ``current`` and the output ``labels``, or when
        ``known(text)`` says why it is not new (``"same as a known candidate"``).
        """
        text = cut_repetition(proposed)
        reason = degenerate_reason(text, current, labels, self.min_instruction_length, self.max_instruction_length)
        if reason is None:
            reason = known(text.strip())
        if reason is not None:
            await self.reject(ctx, what, reason, text)
            return None
        return text.strip()

    async def reject(self, ctx: OptimizerContext, what: str, reason: str, text: Any = "") -> None:
        self.rejected_proposals += 1
        logger.info("%s: rejected %s (%s) before any rollout", type(self).__name__, what, reason)
        await ctx.emit(ProposalRejected(optimizer=type(self).__name__, what=what, reason=reason,
                                        text=as_text(text, 200)))

    def get_extra_state(self) -> dict[str, Any]:
        return {"proposal_failures": self.proposal_failures, "rejected_proposals": self.rejected_proposals}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.proposal_failures = int(state.get("proposal_failures", 0))
        self.rejected_proposals = int(state.get("rejected_proposals", 0))
