"""Cost beside score: the candidates a fit compared, placed by what a call costs and what they score.

    points = cost_points(history.comparisons)            # one per candidate (the start included)
    pareto_front(points)                                 # the ones nothing beats on both
    plot_cost_vs_score(history.comparisons, to_folder="plots")

The cost is dollars per validation call when every point has one, else
tokens per call (a model without a price, an embedded one at $0). A point is
on the Pareto front when no other point scores at least as well for at most
the cost, and better on one of them: the candidates worth choosing between.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgym.utils.plotting import _new_figure, _target, save_figure


@dataclass(frozen=True)
class CostPoint:
    """One candidate: ``label``, ``cost`` (per call, in ``unit``), ``score`` (validation mean), ``kept``."""

    label: str
    cost: float
    score: float
    unit: str
    kept: bool = False


def cost_points(comparisons: Sequence[Mapping[str, Any]]) -> list[CostPoint]:
    """The candidates of ``history.comparisons`` (and the starts they were checked against), one point each.

    A candidate checked more than once keeps its last check; ``kept`` marks the accepted ones.

    >>> entry = {"candidate": 1, "incumbent": 0, "accepted": True, "stage": None,
    ...          "candidate_score": {"mean": 0.9}, "incumbent_score": {"mean": 0.7},
    ...          "tokens_per_call": {"candidate": 300, "start": 100}, "usd_per_call": {"candidate": None, "start": None}}
    >>> [(p.label, p.cost, p.score, p.unit) for p in cost_points([entry])]
    [('start', 100.0, 0.7, 'tokens/call'), ('candidate 1', 300.0, 0.9, 'tokens/call')]
    """
    rows: dict[str, dict[str, Any]] = {}
    for entry in comparisons:
        stage = entry.get("stage")
        if stage == "chain":  # the chain's end and start are a stage's candidate and the first start: no new point
            continue
        tokens, usd = entry.get("tokens_per_call") or {}, entry.get("usd_per_call") or {}
        label = next((key for key in tokens if key != "candidate"), "start")
        first = stage is None or str(stage).startswith("1:")
        start_name = ("start" if first else f"start of {stage}") if label == "start" else \
            f"{label} {entry.get('incumbent')}" + (f" ({stage})" if stage else "")
        candidate_name = f"candidate {entry.get('candidate')}" + (f" ({stage})" if stage else "")
        rows.setdefault(start_name, {"tokens": tokens.get(label), "usd": usd.get(label),
                                     "score": (entry.get("incumbent_score") or {}).get("mean"), "kept": False})
        rows[candidate_name] = {"tokens": tokens.get("candidate"), "usd": usd.get("candidate"),
                                "score": (entry.get("candidate_score") or {}).get("mean"),
                                "kept": bool(entry.get("accepted"))}
    usable = {name: row for name, row in rows.items() if row["score"] is not None and row["tokens"] is not None}
    priced = bool(usable) and all(row["usd"] is not None for row in usable.values()) and \
        any(row["usd"] for row in usable.values())
    key, unit = ("usd", "$/call") if priced else ("tokens", "tokens/call")
    return [CostPoint(name, float(row[key]), float(row["score"]), unit, row["kept"]) for name, row in usable.items()]


def pareto_front(points: Sequence[CostPoint]) -> list[CostPoint]:
    """The points no other point dominates (score >= and cost <=, one of them strictly), cheapest first.

    >>> a, b, c = CostPoint("a", 1, 0.5, "$"), CostPoint("b", 2, 0.9, "$"), CostPoint("c", 3, 0.8, "$")
    >>> [p.label for p in pareto_front([a, b, c])]
    ['a', 'b']
    """
    def dominated(point: CostPoint) -> bool:
        return any(other.cost <= point.cost and other.score >= point.score
                   and (other.cost < point.cost or other.score > point.score) for other in points)

    front = [point for point in points if not dominated(point)]
    unique: dict[tuple[float, float], CostPoint] = {}
    for point in front:  # equal points: one of them stands for all
        unique.setdefault((point.cost, point.score), point)
    return sorted(unique.values(), key=lambda point: (point.cost, -point.score))


def plot_cost_vs_score(comparisons: Sequence[Mapping[str, Any]] | Sequence[CostPoint],
                       to_folder: str | os.PathLike[str] | None = None,
                       to_file: str | os.PathLike[str] = "cost_vs_score.png", title: str | None = None) -> Path:
    """Each candidate at (cost per call, validation score), the Pareto front drawn and its points ringed.

    Takes ``history.comparisons`` (or :class:`CostPoint` values); returns the path written.
    """
    points = [p for p in comparisons if isinstance(p, CostPoint)] or cost_points(comparisons)  # type: ignore[arg-type]
    if not points:
        raise ValueError("nothing to plot: no comparison with a score and a cost per call "
                         "(history.comparisons is empty, or its runs were not measured)")
    front = pareto_front(points)
    figure = _new_figure(6.4, 4.4)
    ax = figure.subplots()
    for point in points:
        ax.scatter([point.cost], [point.score], s=36, color="C0" if point.kept else "0.6", zorder=3,
                   marker="o" if point.label != "start" else "s")
        ax.annotate(point.label, (point.cost, point.score), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.plot([p.cost for p in front], [p.score for p in front], color="C3", linewidth=1.4, zorder=2,
            drawstyle="steps-post", label="Pareto front")
    ax.scatter([p.cost for p in front], [p.score for p in front], s=120, facecolors="none", edgecolors="C3",
               zorder=4)
    unit = points[0].unit
    ax.set_xlabel(f"cost ({unit}, validation mean)")
    ax.set_ylabel("validation score")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or f"Cost vs score: {len(front)} of {len(points)} candidates on the Pareto front")
    return save_figure(figure, _target(to_folder, to_file))
