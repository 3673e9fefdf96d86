"""Program files: JSON, written atomically, read without executing code.

A program file holds the architecture (registered class names + configs,
DataModels as JSON schemas), every variable's value, and, once compiled, the
compile configuration, the optimizer's state and (during or after ``fit()``)
the trainer's (where it is, the rollouts it paid for), so ``fit()`` can resume.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.core.deprecation import renamed_names
from promptgym.core.serialization import deserialize_object, json_path, registered_name, serialize_object, where_failed
from promptgym.programs.synalinks_files import is_synalinks_file, synalinks_load_problem, variables_from_synalinks



class Program(Protocol):
    """What a program file is written from and read into (``programs.program`` imports this module: named by
    shape, so the two do not need each other)."""

    def get_variables(self) -> dict[str, Any]: ...

    def set_variables(self, variables: dict[str, Any], source: str = ...) -> None: ...

    def get_compile_config(self) -> dict[str, Any] | None: ...

    def get_training_progress(self) -> dict[str, Any]: ...

    def compile_from_config(self, config: dict[str, Any], optimizer_state: dict[str, Any] | None = None,
                            trainer_state: dict[str, Any] | None = None) -> None: ...

PROGRAM_FORMAT = "promptgym.program"
VARIABLES_FORMAT = "promptgym.variables"
FORMAT_VERSION = 1

logger = logging.getLogger("promptgym")


def program_to_dict(program: "Program") -> dict[str, Any]:
    if ">" in registered_name(type(program)) and not hasattr(type(program), "_promptgym_registered_name"):
        logger.warning(
            "%s is not registered: decorate it with @register_synalinks_serializable() so Program.load() can rebuild it",
            type(program).__name__,
        )
    data: dict[str, Any] = {
        "format": PROGRAM_FORMAT,
        "version": FORMAT_VERSION,
        "program": serialize_object(program),
        "variables": program.get_variables(),
    }
    compile_config = program.get_compile_config()
    if compile_config is not None:
        data["compile"] = compile_config
        data.update(program.get_training_progress())
    return data


def program_from_dict(data: dict[str, Any], source: str = "program") -> "Program":
    """A program from a program file's dict (``program_to_dict``'s); errors name ``source`` and where in it.

    For JSON text (or an architecture alone) use :func:`promptgym.programs.program_from_json`.
    """
    if is_synalinks_file(data):
        raise ValueError(synalinks_load_problem(data, source))
    if not isinstance(data, dict) or data.get("format") != PROGRAM_FORMAT:
        raise ValueError(f"{source}: not a promptgym program file (expected \"format\": \"{PROGRAM_FORMAT}\")")
    if not isinstance(data.get("version", 0), int):
        raise ValueError(f"{source}: version: expected an integer format version, got {data['version']!r}")
    if data.get("version", 0) > FORMAT_VERSION:
        raise ValueError(f"{source}: written by a newer promptgym (format version {data['version']})")
    for key in ("program", "variables"):
        if key not in data:
            raise ValueError(f"{source}: missing key {key!r}")
    part = "program"
    try:
        program = deserialize_object(data["program"], expected="program class")
        part = "variables"
        if not isinstance(data["variables"], dict):
            raise ValueError(f"expected an object of variables, got {type(data['variables']).__name__}")
        program.set_variables(data["variables"], source=source)
        if "compile" in data:
            part = "compile"
            program.compile_from_config(data["compile"], data.get("optimizer_state"), data.get("trainer_state"))
    except Exception as error:  # noqa: BLE001 - a tampered file: say where in it, never a bare KeyError
        raise ValueError(f"{source}: {load_problem(data, part, error, source)}") from None
    return program


def load_problem(data: dict[str, Any], part: str, error: Exception, source: str) -> str:
    """``program.config.modules[0].config: missing key 'data_model'``: where loading failed and why."""
    failed = where_failed(error)
    where = (json_path(data, failed) if failed is not None else None) or part
    if isinstance(error, KeyError):
        return f"{where}: missing key {error.args[0]!r}" if error.args else f"{where}: a key is missing"
    if isinstance(error, RecursionError):
        return f"{where}: nested too deeply"
    message = str(error).removeprefix(f"{source}: ")
    if isinstance(error, ValueError):
        return f"{where}: {message}"
    return f"{where}: {type(error).__name__}: {message}"


def save_program(program: "Program", filepath: str | Path) -> None:
    atomic_write_json(filepath, program_to_dict(program))


def load_program(filepath: str | Path) -> "Program":
    return program_from_dict(read_json(filepath), source=str(filepath))


def save_variables(program: "Program", filepath: str | Path) -> None:
    atomic_write_json(filepath, {"format": VARIABLES_FORMAT, "version": FORMAT_VERSION, "variables": program.get_variables()})


def load_variables(program: "Program", filepath: str | Path) -> None:
    data = read_json(filepath)
    if is_synalinks_file(data):
        program.set_variables(variables_from_synalinks(program, data, str(filepath)), source=str(filepath))
        return
    if isinstance(data, dict) and data.get("format") == PROGRAM_FORMAT:
        data = {"variables": data.get("variables", {})}
    if not isinstance(data, dict) or "variables" not in data:
        raise ValueError(f"{filepath}: not a promptgym variables file (no \"variables\" key)")
    program.set_variables(data["variables"], source=str(filepath))


__getattr__ = renamed_names(__name__, {"program_to_json": "program_to_dict", "program_from_json": "program_from_dict"},
                            globals(), " (a program file's dict; promptgym.programs.program_from_json reads JSON text)")
