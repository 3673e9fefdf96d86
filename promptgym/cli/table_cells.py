"""Cells of the ``runs list`` table that every flow writes the same way."""

from __future__ import annotations

from typing import Any


def reward_cell(entry: Any) -> str:
    """``0.733`` from an evaluation (its ``reward``) or a number; ``-`` when there is none."""
    value = entry.get("reward") if isinstance(entry, dict) else entry
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def count_cell(value: Any) -> str:
    return str(value) if isinstance(value, int) else "?"


def model_cell(status: dict[str, Any]) -> str:
    """The model a weight run registered (or will register)."""
    return str(status.get("model_id") or status.get("planned_model_id") or "-")
