"""What every ``promptgym`` command shares: the console, exit codes, errors, the secret masker."""

from __future__ import annotations

import logging
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

from promptgym.cli.config import JobConfig
from promptgym.cli.secrets import Masker, load_env_file

console = Console(highlight=False)
EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def secret_masker(env_file: Optional[str], config: JobConfig | None = None) -> Masker:
    try:
        masker = load_env_file(env_file)
    except (FileNotFoundError, ValueError) as error:
        fail(f"--env-file: {error}")
    if config is not None:
        masker.add_from_environment(secret_env_names(config))
    show_warnings(masker)  # the masker is shared: secrets added to it later are masked in warnings too
    return masker


def secret_env_names(config: JobConfig) -> list[str]:
    """The environment variables a config names for its keys (model, task app)."""
    names = [config.model.api_key_env, config.data.task_api_key_env if config.data else None]
    return [name for name in names if name]


def hide_flag_value_types() -> None:
    """Help shows no ``<bool>`` after a flag: a flag takes no value.

    typer 0.29's rich help prints a value type after every option, flags included
    (its plain help already leaves flags bare); this makes the rich help do the same.
    """
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_flags_bare", False):
        return

    def display_type_rich(self: TyperOption, ctx: object) -> str | None:
        return None if self.is_flag and self.metavar is None else shown(self, ctx)

    display_type_rich._flags_bare = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


PER_EXAMPLE_WARNINGS = frozenset({"example %d failed: %s", "rollout seed=%d failed: %s",
                                  "metric %s failed on %s example %d: %s: %s"})
"""Warnings the CLI leaves out: every failed example is already an ``example_failed`` event on screen."""


class WarningPrinter(logging.Handler):
    """Prints promptgym's warnings (a broken cache, a server refusing a format, a checkpoint fallback)
    as ``warning: ...`` lines, secrets masked; the library itself stays silent unless configured."""

    def __init__(self, masker: Masker) -> None:
        super().__init__(logging.WARNING)
        self.masker = masker

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg in PER_EXAMPLE_WARNINGS:
            return
        try:
            console.print(f"warning: {self.masker.mask(record.getMessage())}", style="yellow", markup=False,
                          soft_wrap=True)
        except Exception:  # noqa: BLE001 - a warning must never break the run
            self.handleError(record)


def show_warnings(masker: Masker) -> None:
    """Print promptgym's warnings on the console from now on, through ``masker`` (one printer per process)."""
    library = logging.getLogger("promptgym")
    for handler in [h for h in library.handlers if isinstance(h, WarningPrinter)]:
        library.removeHandler(handler)
    library.addHandler(WarningPrinter(masker))
