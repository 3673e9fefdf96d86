"""What OMEGA asks its language model, and how it turns candidates into text.

The prompts, the request a mutation, grounded rewrite or crossover sends
(with the evidence it reads), the schema of a rewritable variable, and the
text of a candidate that the embedding model sees (for novelty distances).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from promptgym.modules.retrieval import describe_retrieval
from promptgym.rewards.base import to_json
from promptgym.rollouts import ExampleResult, RolloutService

GROUNDED_EXAMPLES = 8
"""Labelled training examples a grounded rewrite reads."""
THINKING_LENGTH = 300
THINKING_DESCRIPTION = "Brief step-by-step reasoning about the failures, written before the new value"
EMBEDDING_TEXT_LENGTH = 1500
EVIDENCE_TEXT_LENGTH = 300
LABEL_LENGTH = 60

BASE_INSTRUCTIONS = (
    "You are part of a prompt optimization system: you improve one JSON variable of an LM program (its instructions, or another part of its state). "
    "You see how the program did on a batch of examples: the inputs, what it predicted, the expected output, "
    "the reward (1 = correct, 0 = wrong) and the reward's feedback."
)
MUTATION_INSTRUCTIONS = (
    "First think briefly about why the wrong predictions are wrong. Then enhance the variable: write a new value "
    "for it that fixes ONE such failure while keeping what already works. Write general instructions for every input "
    "of this kind: never an answer, never a label alone, never a copy of the current value, no repetition. "
    "The instructions are read by the model that does the task: tell it what to do, in the imperative; "
    "do not discuss the fix, and write no code."
)
GROUNDED_INSTRUCTIONS = (
    "The variable still holds the program's starting instructions, written before any example was seen. "
    "Labelled examples of the task are given (input and expected output). First think briefly about what they "
    "have in common: what the inputs are, what is asked, and the exact format of the expected outputs. Then write "
    "new instructions that describe the task and that format precisely, keeping any requirement of the current "
    "instructions, so that every new input of this kind is answered correctly: never an answer, never a label "
    "alone, never a copy of the current value, no repetition. "
    "The instructions are read by the model that does the task: tell it what to do, in the imperative; "
    "write no code."
)
GROUNDED_THINKING_DESCRIPTION = ("Brief description of the task and of the exact format of the expected outputs, "
                                 "written before the new value")
CROSSOVER_INSTRUCTIONS = (
    "Two good values of the variable are given. First think briefly about the strengths of each. Then write "
    "one new value combining the strengths of both. Write general instructions for every input of this "
    "kind: never an answer, never a label alone, never a copy of either value, no repetition. "
    "The instructions are read by the model that does the task: tell it what to do, in the imperative."
)
FIELD_DESCRIPTIONS = {
    "instructions": ("The new instructions, addressed to the model that does the task: what to do with any "
                     "input to produce a correct output (not a discussion of the fix)"),
}


def base_instructions() -> str:
    """What every OMEGA request says first: the system it is part of and what it sees.

    >>> "optimization" in base_instructions()
    True
    """
    return BASE_INSTRUCTIONS


def mutation_instructions(variables_keys: list[str]) -> str:
    """How a mutation rewrites a variable with ``variables_keys``."""
    return f"{MUTATION_INSTRUCTIONS} Include all specified keys: {variables_keys}."


def crossover_instructions(variables_keys: list[str]) -> str:
    """How a crossover combines two values of a variable with ``variables_keys``."""
    return f"{CROSSOVER_INSTRUCTIONS} Include all specified keys: {variables_keys}."


def grounded_instructions(variables_keys: list[str]) -> str:
    """How a grounded rewrite describes the task from labelled examples, for a variable with ``variables_keys``."""
    return f"{GROUNDED_INSTRUCTIONS} Include all specified keys: {variables_keys}."


def mutable_schema(value: dict[str, Any], max_length: int) -> dict[str, Any] | None:
    """The JSON schema of the parts of a variable an LM may rewrite (strings, numbers, lists of strings).

    Examples are left out (they come from the demo pool); so are nested
    objects. None when nothing can be rewritten.
    """
    properties: dict[str, Any] = {}
    for key, item in value.items():
        if key == "examples":
            continue
        description = FIELD_DESCRIPTIONS.get(key, f"The new value of {key!r}")
        if isinstance(item, bool):
            properties[key] = {"type": "boolean", "description": description}
        elif isinstance(item, int):
            properties[key] = {"type": "integer", "description": description}
        elif isinstance(item, float):
            properties[key] = {"type": "number", "description": description}
        elif isinstance(item, str):
            properties[key] = {"type": "string", "maxLength": max_length, "description": description}
        elif isinstance(item, list) and item and all(isinstance(x, str) for x in item):
            properties[key] = {"type": "array", "items": {"type": "string", "maxLength": max_length},
                               "description": description}
    if not properties:
        return None
    return {"title": "NewValue", "type": "object", "properties": properties, "required": list(properties)}


def candidate_text(variables: dict[str, Any]) -> str:
    """The text that describes a candidate for the embedding model (instructions first, then examples)."""
    parts = []
    for name in sorted(variables):
        value = variables[name]
        if isinstance(value, dict):
            texts = [f"{key}: {item}" for key, item in value.items() if key != "examples" and isinstance(item, str)]
            others = {key: item for key, item in value.items()
                      if key not in ("examples", "retrieval") and not isinstance(item, str)}
            if value.get("retrieval"):  # a KNNFewShot pool: its vectors say nothing to the embedding model
                texts.append(f"retrieval: {describe_retrieval(value['retrieval'])}")
            if others:
                texts.append(json.dumps(others, sort_keys=True, ensure_ascii=False))
            for example in value.get("examples", []) or []:
                texts.append(json.dumps(example, sort_keys=True, ensure_ascii=False))
            parts.append("\n".join(texts))
        else:
            parts.append(json.dumps(value, sort_keys=True, ensure_ascii=False))
    return "\n".join(parts)[:EMBEDDING_TEXT_LENGTH] or "empty"


def string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in string_leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in string_leaves(item)]
    return []


def shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > EVIDENCE_TEXT_LENGTH:
        return value[:EVIDENCE_TEXT_LENGTH] + "..."
    if isinstance(value, dict):
        return {key: shorten(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shorten(item) for item in value]
    return value


def without_lengths(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: without_lengths(value) for key, value in schema.items() if key != "maxLength"}
    if isinstance(schema, list):
        return [without_lengths(value) for value in schema]
    return schema


def labelled_examples(rollouts: RolloutService, rng: np.random.Generator, count: int = GROUNDED_EXAMPLES
                      ) -> list[dict[str, Any]]:
    """``count`` training examples, input and expected output, drawn at random (what a grounded rewrite reads)."""
    xs, ys = rollouts.inputs("train"), rollouts.targets("train")
    picks = sorted(rng.permutation(len(xs))[:count].tolist())
    return [shorten({"inputs": to_json(xs[i]), "expected": to_json(ys[i])}) for i in picks]


def evidence(results: list[ExampleResult], rollouts: RolloutService, max_evidence: int) -> list[dict[str, Any]]:
    """What a mutation reads: failures first (lowest reward), then one success, at most ``max_evidence``."""
    xs, ys = rollouts.inputs("train"), rollouts.targets("train")
    ordered = sorted(results, key=lambda r: (r.reward, r.index))
    failures = [r for r in ordered if r.reward < 1.0]
    successes = [r for r in reversed(ordered) if r.reward >= 1.0]
    chosen = (failures[: max_evidence - 1] + successes[:1]) if failures else successes[: max_evidence]
    return [shorten({
        "inputs": to_json(xs[r.index]),
        "predicted": to_json(r.prediction) if r.prediction is not None else f"(failed: {r.error})",
        "expected": to_json(ys[r.index]),
        "reward": round(float(r.reward), 3),
        "feedback": r.feedback,
    }) for r in chosen[: max_evidence]]


def step_request(operation: str, schema: dict[str, Any], inputs: dict[str, Any], instructions: str = ""
                 ) -> tuple[list[dict[str, str]], dict[str, Any], dict[str, Any]]:
    """A ChainOfThought-style request: messages, the constrained schema and the validation schema.

    The answer starts with a bounded ``thinking`` field, then the new
    value's fields. Validation drops the length bounds, so an over-long
    text (from a backend without constrained decoding) reaches the guard
    rails and is rejected at once instead of being re-asked. ``instructions``
    is the user's task-specific guidance for OMEGA, placed first.
    """
    keys = list(schema["properties"])
    guidance = {"mutation": mutation_instructions, "grounded": grounded_instructions,
                "crossover": crossover_instructions}[operation](keys)
    thinking_description = GROUNDED_THINKING_DESCRIPTION if operation == "grounded" else THINKING_DESCRIPTION
    lines = [f"- thinking (string): {thinking_description}"]
    lines += [f"- {key} ({prop['type']}): {prop.get('description', '')}" for key, prop in schema["properties"].items()]
    system = "\n".join(filter(None, [instructions, base_instructions(), guidance]))
    system += "\n\nAnswer with a JSON object with these fields:\n" + "\n".join(lines)
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": json.dumps(inputs, ensure_ascii=False)}]
    thinking = {"type": "string", "maxLength": THINKING_LENGTH, "description": thinking_description}
    constrained = {**schema, "properties": {"thinking": thinking, **schema["properties"]},
                   "required": ["thinking", *schema["required"]]}
    return messages, constrained, without_lengths(constrained)
