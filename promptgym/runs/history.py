"""``history.csv``: one row per epoch (prompt learning) or per step (a weight run), read and written here only.

    rows, fields = read_history(path)
    write_history(path, rows)                                   # atomically, columns in first-seen order
    append_history_row(path, {"step": 7, "loss": 0.4}, fields)  # a weight run's row per step (header once)
    drop_history_rows(path, lambda row: int(row["epoch"]) < 3)  # on resume: rows past the checkpoint go
    history_columns(path)                                       # {"reward": [0.5, 0.7], ...} as floats
    StepHistory(path).rows()                                    # a weight run's rows as numbers
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Callable

from promptgym.core.atomic import atomic_write_text

COLUMNS = ("step", "epoch", "loss", "eval_loss", "lr", "tokens_per_s", "grad_norm", "seconds", "elapsed_s")
"""A weight run's history columns (SFT's; RL's run names its own)."""


def read_history(path: Path, separator: str = ",") -> tuple[list[dict[str, str]], list[str]]:
    """(rows as text, the header); no file is no rows."""
    if not path.is_file():
        return [], []
    with path.open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle, delimiter=separator)
        return list(reader), list(reader.fieldnames or [])


def write_history(path: Path, rows: list[dict[str, Any]], fields: list[str] | None = None,
                  separator: str = ",") -> None:
    """Rewrite the file atomically (a kill leaves the old one or the new one, never half)."""
    if fields is None:
        fields = []
        for row in rows:
            fields += [key for key in row if key not in fields]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, delimiter=separator)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def append_history_row(path: Path, row: dict[str, Any], fields: tuple[str, ...] | list[str]) -> None:
    """One row at the end (the header first when the file is new); keys outside ``fields`` are left out,
    None is an empty cell."""
    new = not path.is_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow({key: "" if row.get(key) is None else row[key] for key in fields})


def drop_history_rows(path: Path, keep: Callable[[dict[str, str]], bool]) -> int:
    """Keep the rows ``keep`` accepts; returns how many were dropped (the file is untouched when none are)."""
    rows, fields = read_history(path)
    kept = [row for row in rows if keep(row)]
    if len(kept) == len(rows):
        return 0
    write_history(path, kept, fields)
    return len(rows) - len(kept)


def history_columns(path: Path) -> dict[str, list[float]]:
    """Every column but ``epoch`` as floats (missing or unreadable cells become NaN)."""
    rows, _ = read_history(path)
    columns: dict[str, list[float]] = {}
    for row in rows:
        for key in row:
            if key != "epoch":
                columns.setdefault(key, [])
    for row in rows:
        for key, values in columns.items():
            try:
                values.append(float(row.get(key) or "nan"))
            except ValueError:
                values.append(float("nan"))
    return columns


class StepHistory:
    """A weight run's ``history.csv`` as numbers, through this module's reader and writer."""

    def __init__(self, path: Path, columns: tuple[str, ...] = COLUMNS, key: str = "step") -> None:
        self.path = path
        self.columns = columns
        self.key = key  # the column that counts progress (an RL run's is "iteration")

    def rows(self) -> list[dict[str, float | None]]:
        rows, _ = read_history(self.path)
        return [{key: _number(value) for key, value in row.items() if key in self.columns} for row in rows]

    def append(self, row: dict[str, Any]) -> None:
        append_history_row(self.path, row, self.columns)

    def truncate_after(self, step: int) -> None:
        """Drop rows of steps after ``step`` (done before a kill, after the last checkpoint)."""
        drop_history_rows(self.path, lambda row: (_number(row.get(self.key)) or 0) <= step)


def _number(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return None
