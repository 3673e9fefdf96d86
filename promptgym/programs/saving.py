"""Program files: JSON, written atomically, read without executing code.

A program file holds the architecture (registered class names + configs,
DataModels as JSON schemas), every variable's value, and, once compiled, the
compile configuration, the optimizer's state and (during or after ``fit()``)
the trainer's (where it is, the rollouts it paid for), so ``fit()`` can resume.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.core.serialization import deserialize_object, registered_name, serialize_object

if TYPE_CHECKING:
    from promptgym.programs.program import Program

PROGRAM_FORMAT = "promptgym.program"
VARIABLES_FORMAT = "promptgym.variables"
FORMAT_VERSION = 1

logger = logging.getLogger("promptgym")


def program_to_json(program: "Program") -> dict[str, Any]:
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


def program_from_json(data: dict[str, Any], source: str = "program") -> "Program":
    if not isinstance(data, dict) or data.get("format") != PROGRAM_FORMAT:
        raise ValueError(f"{source}: not a promptgym program file (expected \"format\": \"{PROGRAM_FORMAT}\")")
    if data.get("version", 0) > FORMAT_VERSION:
        raise ValueError(f"{source}: written by a newer promptgym (format version {data['version']})")
    for key in ("program", "variables"):
        if key not in data:
            raise ValueError(f"{source}: missing key {key!r}")
    program = deserialize_object(data["program"], expected="program class")
    program.set_variables(data["variables"], source=source)
    if "compile" in data:
        program.compile_from_config(data["compile"], data.get("optimizer_state"), data.get("trainer_state"))
    return program


def save_program(program: "Program", filepath: str | Path) -> None:
    atomic_write_json(filepath, program_to_json(program))


def load_program(filepath: str | Path) -> "Program":
    return program_from_json(read_json(filepath), source=str(filepath))


def save_variables(program: "Program", filepath: str | Path) -> None:
    atomic_write_json(filepath, {"format": VARIABLES_FORMAT, "version": FORMAT_VERSION, "variables": program.get_variables()})


def load_variables(program: "Program", filepath: str | Path) -> None:
    data = read_json(filepath)
    if isinstance(data, dict) and data.get("format") == PROGRAM_FORMAT:
        data = {"variables": data.get("variables", {})}
    if not isinstance(data, dict) or "variables" not in data:
        raise ValueError(f"{filepath}: not a promptgym variables file (no \"variables\" key)")
    program.set_variables(data["variables"], source=str(filepath))
