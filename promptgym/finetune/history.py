"""``history.csv`` of a weight-training run (one row per optimiser step) and its loss plot.

    history = StepHistory(folder / "history.csv")
    history.truncate_after(step)       # on resume: rows past the checkpoint were not kept
    history.append({"step": 1, "loss": 2.3, ...})
    plot_losses(history.rows(), folder / "plots" / "loss.png")
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from promptgym.core.history_csv import append_history_row, drop_history_rows, read_history
from promptgym.utils.plotting import _new_figure, save_figure

logger = logging.getLogger("promptgym")
COLUMNS = ("step", "epoch", "loss", "eval_loss", "lr", "tokens_per_s", "grad_norm", "seconds", "elapsed_s")


class StepHistory:
    """A weight run's ``history.csv`` as numbers, over the one reader/writer (:mod:`promptgym.core.history_csv`)."""

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


def plot_losses(rows: list[dict[str, float | None]], target: Path, title: str = "loss") -> Path | None:
    """Training loss per step and evaluation loss where measured, as a PNG (None without matplotlib or data)."""
    train = [(row["step"], row["loss"]) for row in rows if row.get("loss") is not None and row.get("step")]
    evals = [(row["step"] or 0, row["eval_loss"]) for row in rows if row.get("eval_loss") is not None]
    if not train and not evals:
        return None
    try:
        figure = _new_figure(7, 4)
    except ImportError as error:  # pragma: no cover - matplotlib is part of the default install
        logger.warning("loss plot skipped: %s", error)
        return None
    axes = figure.add_subplot(1, 1, 1)
    if train:
        axes.plot([s for s, _ in train], [v for _, v in train], label="train loss", color="#1f77b4", linewidth=1.2)
    if evals:
        axes.plot([s for s, _ in evals], [v for _, v in evals], "o-", label="eval loss", color="#d62728")
    axes.set_xlabel("step")
    axes.set_ylabel("loss (mean per trained token)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    values = [v for _, v in train + evals if v is not None and math.isfinite(v)]
    if values and min(values) > 0 and max(values) / min(values) > 30:
        axes.set_yscale("log")
    return save_figure(figure, target)
