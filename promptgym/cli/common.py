"""What every ``promptgym`` command shares: the console, exit codes, errors, the secret masker."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from promptgym.cli.config import JobConfig
from promptgym.cli.secrets import Masker, load_env_file

console = Console(highlight=False)
EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def secret_masker(env_file: Optional[str], config: JobConfig | None = None) -> Masker:
    try:
        masker = load_env_file(env_file)
    except FileNotFoundError as error:
        fail(str(error))
    if config is not None:
        masker.add_from_environment(secret_env_names(config))
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
