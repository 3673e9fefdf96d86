"""The loss plot of a weight-training run's ``history.csv`` (one row per optimiser step; :mod:`promptgym.runs.history`).

    history = StepHistory(folder / "history.csv")
    history.truncate_after(step)       # on resume: rows past the checkpoint were not kept
    history.append({"step": 1, "loss": 2.3, ...})
    plot_losses(history.rows(), folder / "plots" / "loss.png")
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from promptgym.runs.history import COLUMNS, StepHistory
from promptgym.utils.plotting import _new_figure, save_figure

__all__ = ["COLUMNS", "StepHistory", "plot_losses"]  # the history itself is the run skeleton's (runs/history.py)
logger = logging.getLogger("promptgym")


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
