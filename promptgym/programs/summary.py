"""``program.summary()``: a readable table of modules, schemas and variables."""

from __future__ import annotations

import io
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from promptgym.modules.retrieval import describe_retrieval



class Program(Protocol):
    """What the summary reads of a program (``programs.program`` imports this module: named by shape)."""

    name: str
    description: str | None
    modules: list[Any]
    input_data_model: Any
    trainable_variables: list[Any]


def _fields(data_model: object) -> str:
    if data_model is None:
        return "-"
    fields = getattr(data_model, "model_fields", {})
    return f"{data_model.__name__}({', '.join(fields)})"  # type: ignore[attr-defined]


def program_summary(program: "Program", width: int = 110) -> str:
    table = Table(title=f"Program: {program.name}" + (f" — {program.description}" if program.description else ""))
    table.add_column("Module (type)")
    table.add_column("Output")
    table.add_column("Model")
    table.add_column("Trainable variable")
    for module in program.modules:
        lm = getattr(module, "language_model", None)
        variables = "\n".join(
            f"{variable.name}: {len(variable.get('instructions', ''))} chars of instructions, "
            f"{len(variable.get('examples', []))} examples"
            + (f" + {describe_retrieval(variable.get('retrieval'))} per input" if variable.get("retrieval") else "")
            for variable in module.trainable_variables
        ) or "-"
        table.add_row(
            f"{module.name} ({type(module).__name__})",
            _fields(getattr(module, "data_model", None)),
            getattr(lm, "model", "-"),
            variables,
        )
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    console.print(table)
    if program.input_data_model is not None:
        console.print(f"Input: {_fields(program.input_data_model)}")
    console.print(f"Trainable variables: {len(program.trainable_variables)}")
    return buffer.getvalue().rstrip()
