"""Rollouts and outcomes as plain JSON, to cross a process boundary and come back identical.

    data = rollout_to_wire(rollout, program)          # driver -> worker
    rollout = rollout_from_wire(data, program)        # worker: the input rebuilt as the program's DataModel
    data = outcome_to_wire(outcome, usage)            # worker -> driver
    outcome = outcome_from_wire(data, program)        # driver: the prediction rebuilt as the same class
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Iterable

import pydantic

from promptgym.core.serialization import resolve
from promptgym.lm.usage import Usage
from promptgym.modules.tracing import Trace, TraceStep
from promptgym.rollouts.executor import Outcome, Rollout


def class_path(value: Any) -> str | None:
    """``module:qualname`` of a pydantic value's class (None for plain data)."""
    if isinstance(value, pydantic.BaseModel):
        kind = type(value)
        return f"{kind.__module__}:{kind.__qualname__}"
    return None


def find_class(path: str | None) -> Any:
    """The class ``module:qualname`` names, from modules already imported (never imports anything)."""
    if not path:
        return None
    module_name, _, qualname = path.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


def as_json(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, pydantic.BaseModel) else value


def rebuild(value: Any, path: str | None, fallback: type | None) -> Any:
    """``value`` (JSON) as an instance of the class ``path`` names, else of ``fallback``, else as is."""
    if value is None:
        return None
    kind = find_class(path) or fallback
    if kind is None or path is None:
        return value
    try:
        return kind.model_validate(value)
    except pydantic.ValidationError:  # the program's own validation reports it, as it would in-process
        return value


def rollout_to_wire(rollout: Rollout, variables: dict[str, Any] | None) -> dict[str, Any]:
    return {"index": rollout.index, "inputs": as_json(rollout.inputs), "inputs_class": class_path(rollout.inputs),
            "variables": variables}


def rollout_from_wire(data: dict[str, Any], program: Any) -> Rollout:
    inputs = rebuild(data["inputs"], data["inputs_class"], getattr(program, "input_data_model", None))
    return Rollout(data["index"], inputs, data["variables"])


def outcome_to_wire(outcome: Outcome, usage: dict[str, Usage]) -> dict[str, Any]:
    return {
        "index": outcome.index, "prediction": as_json(outcome.prediction), "prediction_class": class_path(outcome.prediction),
        "error": outcome.error, "trace": [step.to_json() for step in outcome.trace.steps],
        "usage": {phase: item.as_dict() for phase, item in usage.items() if item.calls or item.failures},
        **({"spent": outcome.spent.as_dict()} if outcome.spent is not None else {}),
    }


def outcome_from_wire(data: dict[str, Any], program: Any) -> Outcome:
    prediction = rebuild(data["prediction"], data["prediction_class"], getattr(program, "output_data_model", None))
    trace = Trace([TraceStep.from_json(step) for step in data["trace"]])
    usage = {phase: Usage(**values) for phase, values in data["usage"].items()}
    spent = Usage(**data["spent"]) if data.get("spent") else None
    return Outcome(data["index"], prediction, data["error"], trace, usage, spent)


def registered_names(config: Any) -> Iterable[str]:
    """Every registered class or function name a serialized config refers to."""
    if isinstance(config, dict):
        for key in ("class_name", "function"):
            if isinstance(config.get(key), str):
                yield config[key]
        for value in config.values():
            yield from registered_names(value)
    elif isinstance(config, list):
        for value in config:
            yield from registered_names(value)


def user_modules(config: Any, *values: Any) -> list[str]:
    """The modules outside promptgym that define what ``config`` and ``values`` use (a worker imports them first)."""
    modules = set()
    for name in set(registered_names(config)):
        try:
            modules.add(resolve(name, expected="object").__module__)
        except Exception:  # noqa: BLE001 - a name the worker can't resolve either fails there, with its own message
            continue
    modules.update(type(value).__module__ for value in values if isinstance(value, pydantic.BaseModel))
    return sorted(m for m in modules if m and m != "__main__" and not m.startswith(("promptgym.", "builtins")))


def import_modules(names: Iterable[str]) -> None:
    for name in names:
        importlib.import_module(name)
