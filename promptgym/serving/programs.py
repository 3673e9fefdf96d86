"""The programs a server runs: loaded from files, named, their models shared, called on JSON.

    served = load_programs(["qa.json", "triage.json"])   # {"qa": ServedProgram, "triage": ...}
    (await served["qa"].run({"question": "2+2?"})).output  # -> {"answer": "4"}, or an error naming the field

Programs that name the same model (same model string, server and settings) get one
``LanguageModel`` object, so they share its connection pool and concurrency limit; the
embedded engine is loaded once per model file in any case.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pydantic

from promptgym.core.data_model import DataModel
from promptgym.core.serialization import serialize_object
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.usage import Usage, usage_scope
from promptgym.modules.generator import as_json
from promptgym.modules.knowledge.read_only import read_only_knowledge_bases
from promptgym.modules.tracing import TraceStep, tracing
from promptgym.programs.program import Program
from promptgym.programs.streaming import ProgramStream, stream_program
from promptgym.programs.walk import iter_modules

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class InputError(ValueError):
    """A request's input does not match the program's input DataModel; ``field`` is the dotted path.

    ``status`` is 422 for a value of the wrong shape, 400 for a body that can't be read at all.
    """

    def __init__(self, message: str, field: str | None = None, status: int = 422) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


class NoOutputError(RuntimeError):
    """The program ran but produced no output (a branch switched everything off)."""


@dataclass
class ServedCall:
    """What one call of a served program produced: the output JSON, the model usage, each module's step."""

    output: dict[str, Any] | None
    usage: Usage
    steps: list[TraceStep] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


@dataclass
class ServedProgram:
    """One program behind the server: its name, source file and data models."""

    name: str
    program: Any
    source: str = ""
    description: str = ""
    input_model: type[DataModel] | None = None
    output_model: type[DataModel] | None = None
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, program: Any, name: str | None = None, source: str = "") -> "ServedProgram":
        """Wrap a built program (its input/output DataModels read once, here)."""
        name = name or program.name
        if not NAME_PATTERN.match(name):
            raise ValueError(f"{source or name}: program name {name!r} can't be served: use letters, digits, "
                             "'_', '.' or '-' (64 at most); rename it with --name")
        input_model = getattr(program, "input_data_model", None)
        output_model = getattr(program, "output_data_model", None)
        return cls(name=name, program=program, source=source, description=program.description or "",
                   input_model=input_model, output_model=output_model,
                   input_schema=_schema(program, "input_schema", input_model),
                   output_schema=_schema(program, "output_schema", output_model))

    def validate(self, payload: Any, where: str = "") -> Any:
        """``payload`` as the input DataModel; :class:`InputError` naming the first bad field."""
        if not isinstance(payload, dict):
            raise InputError(f"{where or 'body'}: expected a JSON object with the fields of "
                             f"{self.input_model.__name__ if self.input_model else 'the input'}, "
                             f"got {type(payload).__name__}", where or None)
        if self.input_model is None:
            return payload
        try:
            return self.input_model.model_validate(payload)
        except pydantic.ValidationError as error:
            first = error.errors()[0]
            path = ".".join(str(part) for part in first["loc"])
            full = ".".join(part for part in (where, path) if part)
            raise InputError(f"{full or 'body'}: {first['msg']}", full or None) from None

    async def run(self, inputs: Any) -> ServedCall:
        """The output JSON for validated ``inputs``, with the model usage and module steps of this call alone."""
        started = time.perf_counter()
        with usage_scope() as usage, tracing() as trace:
            output = await self.program(inputs)
        if output is None:
            raise NoOutputError(f"program {self.name!r} produced no output for this input")
        return ServedCall(as_json(output), usage, trace.steps, time.perf_counter() - started)


    def stream(self, inputs: Any) -> tuple[ProgramStream, ServedCall]:
        """The text of the last output field as written, and the call it fills in (output, usage, steps) by its end."""
        call = ServedCall(None, Usage())
        started = time.perf_counter()

        async def run() -> Any:
            with usage_scope() as usage, tracing() as trace:
                call.usage, call.steps = usage, trace.steps  # filled as the run goes: a stream cut short keeps them
                try:
                    output = await self.program(inputs)
                finally:
                    call.seconds = time.perf_counter() - started
            if output is None:
                raise NoOutputError(f"program {self.name!r} produced no output for this input")
            call.output = as_json(output)
            return output

        return stream_program(self.program, inputs, run), call


def _schema(program: Any, attribute: str, model: type[DataModel] | None) -> dict[str, Any]:
    if model is not None:
        return model.model_json_schema()
    try:
        return dict(getattr(program, attribute))
    except (AttributeError, TypeError):
        return {"type": "object"}


def share_language_models(programs: Iterable[Any], extra: Iterable[LanguageModel] = ()) -> dict[str, LanguageModel]:
    """Give every module that names the same model one ``LanguageModel`` object; returns them by model string.

    Two models are the same when their saved configs are equal (model, server, sampling, cache).
    """
    by_config: dict[str, LanguageModel] = {}
    for model in extra:
        by_config.setdefault(_identity(model), model)
    for program in programs:
        for module in iter_modules(program):
            model = getattr(module, "language_model", None)
            if isinstance(model, LanguageModel):
                module.language_model = by_config.setdefault(_identity(model), model)
    return {model.model: model for model in by_config.values()}


def _identity(model: LanguageModel) -> str:
    return json.dumps(serialize_object(model), sort_keys=True, default=str)


def load_program_file(path: str | Path, name: str | None = None) -> ServedProgram:
    """A saved program; the error names the file when it can't be read (loading never runs code from it)."""
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such program file")
    try:
        with read_only_knowledge_bases():  # a served program reads its knowledge base, never writes it
            program = Program.load(str(source))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{source}: can't load the program: {error}") from None
    return ServedProgram.of(program, name=name, source=str(source))


def load_programs(paths: Iterable[str | Path], names: Iterable[str | None] = ()) -> dict[str, ServedProgram]:
    """Saved programs by name (a duplicate name is an error that says how to rename)."""
    served: dict[str, ServedProgram] = {}
    given = list(names)
    for index, path in enumerate(paths):
        entry = load_program_file(path, given[index] if index < len(given) else None)
        if entry.name in served:
            raise ValueError(f"{path}: a program named {entry.name!r} is already served (from "
                             f"{served[entry.name].source}); give NAME=FILE to rename one")
        served[entry.name] = entry
    share_language_models(entry.program for entry in served.values())
    return served
