"""``promptgym models list | remove NAME``: the embedded models and the fine-tuned ones."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from promptgym.lm.cache import models_dir
from promptgym.lm.errors import UnknownModelError
from promptgym.lm.finetuned_models import UnreadableEntry, remove_finetuned_model, scan_finetuned_models
from promptgym.lm.local_models import LOCAL_MODELS

models_app = typer.Typer(help="Models usable as model strings: embedded and fine-tuned.", no_args_is_help=True)
console = Console(highlight=False)


MIN_OTHER_COLUMNS = 90
"""What the table's other columns need (kind, base, size, files, borders) beside the model string to stay readable."""


def _mb(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size else "-"


def embedded_rows() -> list[tuple[str, str, str, str, str]]:
    """(model string, kind, base, size, where) for each embedded model; files not assembled yet say so."""
    rows = []
    for name, spec in sorted(LOCAL_MODELS.items()):
        installed = importlib.util.find_spec(spec.parts[0][0]) is not None
        if not installed:
            where = f"not installed ({spec.install})"
        elif len(spec.parts) == 1:
            found = importlib.util.find_spec(spec.parts[0][0])
            where = str(Path(list(found.submodule_search_locations)[0]) / spec.parts[0][1])  # type: ignore[union-attr]
        else:
            assembled = models_dir() / spec.file_name
            where = str(assembled) if assembled.is_file() else f"assembled on first use into {assembled}"
        rows.append((f"local/{name}", "embedded" + ("" if spec.instruct else " (base)"), "-", _mb(spec.size), where))
    return rows


def finetuned_rows() -> list[tuple[str, str, str, str, str]]:
    """One row per usable entry, then one per unreadable entry saying what is wrong (``models remove`` deletes it)."""
    rows = []
    entries, unreadable = scan_finetuned_models()
    for entry in entries:
        files = entry.files()
        missing = [path for path in files.values() if not Path(path).is_file()]
        where = "\n".join(f"{kind}: {path}" for kind, path in files.items()) + ("\n(missing files!)" if missing else "")
        created = datetime.fromtimestamp(entry.created).strftime("%Y-%m-%d %H:%M")
        rows.append((entry.model_string, f"{entry.method} {created}", entry.base, _mb(entry.size_bytes()), where))
    for bad in unreadable:
        rows.append((f"local/{bad.name}", "unreadable", "-", "-",
                     f"{bad.path}: {bad.problem} (delete it with: promptgym models remove {bad.name})"))
    return rows


@models_app.command("list")
def list_command() -> None:
    """Every model string that names a local model, with its base, size and files."""
    rows = embedded_rows() + finetuned_rows()
    longest = max(len(row[0]) for row in rows)
    if longest + MIN_OTHER_COLUMNS > console.width:  # never cut a model string (users copy it): a block per model
        for model, kind, base, size, where in rows:
            console.print(model, markup=False, soft_wrap=True)
            console.print(f"  {kind}, base {base}, {size}", markup=False, soft_wrap=True)
            for line in where.splitlines():
                console.print(f"  {line}", markup=False, soft_wrap=True)
        return
    table = Table()
    table.add_column("model", no_wrap=True, min_width=longest)
    for column in ("kind", "base", "size"):
        table.add_column(column, overflow="fold")
    table.add_column("files", overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)


@models_app.command("remove")
def remove_command(name: str) -> None:
    """Forget a fine-tuned model (its files stay in its run folder)."""
    try:
        entry = remove_finetuned_model(name.removeprefix("local/"))
    except UnknownModelError as error:
        console.print(f"error: {error}", markup=False)
        raise typer.Exit(2)
    if isinstance(entry, UnreadableEntry):
        console.print(f"removed the unreadable entry {entry.path} ({entry.problem})", markup=False, soft_wrap=True)
        return
    console.print(f"removed {entry.model_string} (files kept in {entry.run})", markup=False)
