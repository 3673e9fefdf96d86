"""Plots over several runs or conditions, with synalinks' names and arguments.

    plot_history_comparison({"zero-shot": h0, "few-shot": h1})            # one line per condition and metric
    plot_history_with_mean_and_std([h_seed0, h_seed1, h_seed2])           # mean line, ±std band
    plot_history_comparison_with_mean_and_std({"A": [h...], "B": [h...]})
    plot_metrics(result)  /  plot_metrics_comparison({"A": result_a, "B": result_b})

Histories of different lengths are cut to the shortest; ``metrics_filter``
keeps the named metrics. LM usage keys (``lm_calls``, ``*_tokens``) are left
out: they are counts, not scores. Each function returns the path written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from promptgym.utils._plot_data import history_dict, is_usage_key
from promptgym.utils.plotting import _new_figure, _pretty, _target, save_figure


def _histories(history: Any, metrics_filter: Sequence[str] | None) -> dict[str, list[float]]:
    data, _ = history_dict(history)
    return {key: [np.nan if value is None else float(value) for value in values] for key, values in data.items()
            if not is_usage_key(key) and (metrics_filter is None or key in metrics_filter)}


def _runs(histories: Sequence[Any], metrics_filter: Sequence[str] | None) -> dict[str, np.ndarray]:
    """``{metric: array (runs, epochs)}``, runs cut to the shortest."""
    series = [_histories(history, metrics_filter) for history in histories]
    if not series:
        raise ValueError("no history to plot")
    keys = [key for key in series[0] if all(key in other for other in series)]
    result = {}
    for key in keys:
        length = min(len(one[key]) for one in series)
        result[key] = np.array([one[key][:length] for one in series], dtype=float)
    return result


def _line_panels(curves: Mapping[str, Mapping[str, np.ndarray]], to_folder: Any, to_file: Any, title: str,
                 xlabel: str, ylabel: str, grid: bool, alpha: float | None, linestyles: Sequence[str] | None) -> Path:
    """One panel per metric; in it one curve per condition (an array of runs: mean, and a ±std band)."""
    metrics = list(dict.fromkeys(metric for by_metric in curves.values() for metric in by_metric))
    if not metrics:
        raise ValueError("nothing to plot: no metric in common (check metrics_filter)")
    columns = 1 if len(metrics) == 1 else 2
    rows = (len(metrics) + columns - 1) // columns
    figure = _new_figure(6.0 * columns, 3.6 * rows + 0.5)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, metric in zip(axes, metrics):
        for index, (condition, by_metric) in enumerate(curves.items()):
            if metric not in by_metric:
                continue
            runs = by_metric[metric]
            mean = np.nanmean(runs, axis=0)
            epochs = np.arange(1, len(mean) + 1)
            style = linestyles[index % len(linestyles)] if linestyles else "-"
            ax.plot(epochs, mean, linestyle=style, marker="o", markersize=3, color=f"C{index % 10}", label=condition)
            if alpha is not None and len(runs) > 1:
                std = np.nanstd(runs, axis=0)
                ax.fill_between(epochs, mean - std, mean + std, color=f"C{index % 10}", alpha=alpha)
        ax.set_title(_pretty(metric))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(grid, alpha=0.3)
        if len(curves) > 1 or alpha is not None:
            ax.legend(loc="best", fontsize=8)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    figure.suptitle(title, fontsize=14)
    return save_figure(figure, _target(to_folder, to_file))


def plot_history_with_mean_and_std(history_list: Sequence[Any], to_file: str | os.PathLike[str] =
                                   "training_history_with_mean_and_std.png", to_folder: Any = None,
                                   xlabel: str = "Epochs", ylabel: str = "Scores",
                                   title: str = "Training history with mean and std", grid: bool = True,
                                   alpha: float = 0.2, metrics_filter: Sequence[str] | None = None, **_: Any) -> Path:
    return _line_panels({"mean ± std": _runs(history_list, metrics_filter)}, to_folder, to_file, title, xlabel, ylabel,
                        grid, alpha, None)


def plot_history_comparison(history_dict: Mapping[str, Any], to_file: str | os.PathLike[str] =
                            "training_history_comparison.png", to_folder: Any = None, xlabel: str = "Epochs",
                            ylabel: str = "Scores", title: str = "Training History Comparison", grid: bool = True,
                            metrics_filter: Sequence[str] | None = None, linestyle_cycle: Sequence[str] | None = None,
                            **_: Any) -> Path:
    curves = {condition: _runs([history], metrics_filter) for condition, history in history_dict.items()}
    return _line_panels(curves, to_folder, to_file, title, xlabel, ylabel, grid, None, linestyle_cycle)


def plot_history_comparison_with_mean_and_std(history_comparison_dict: Mapping[str, Sequence[Any]],
                                              to_file: str | os.PathLike[str] =
                                              "training_history_comparison_with_mean_and_std.png",
                                              to_folder: Any = None, xlabel: str = "Epochs", ylabel: str = "Scores",
                                              title: str = "Training History Comparison with Mean and Std",
                                              grid: bool = True, alpha: float = 0.2,
                                              metrics_filter: Sequence[str] | None = None,
                                              linestyle_cycle: Sequence[str] | None = None, **_: Any) -> Path:
    curves = {condition: _runs(histories, metrics_filter) for condition, histories in history_comparison_dict.items()}
    return _line_panels(curves, to_folder, to_file, title, xlabel, ylabel, grid, alpha, linestyle_cycle)


def _scores(result: Mapping[str, Any], metrics_filter: Sequence[str] | None) -> dict[str, float]:
    return {key: float(value) for key, value in result.items() if isinstance(value, (int, float, np.number))
            and not isinstance(value, bool) and not is_usage_key(key) and (metrics_filter is None or key in metrics_filter)}


def plot_metrics_comparison(metrics_dict: Mapping[str, Mapping[str, Any]], to_file: str | os.PathLike[str] =
                            "evaluation_metrics_comparison.png", to_folder: Any = None, xlabel: str = "Metrics",
                            ylabel: str = "Scores", title: str = "Metrics Comparison", grid: bool = True,
                            metrics_filter: Sequence[str] | None = None, bar_width: float = 0.35,
                            show_values: bool = True, **_: Any) -> Path:
    """Grouped bars: per metric, one bar per condition (one ``evaluate()`` result each)."""
    scores = {condition: _scores(result, metrics_filter) for condition, result in metrics_dict.items()}
    names = list(dict.fromkeys(name for by_name in scores.values() for name in by_name))
    if not names:
        raise ValueError("nothing to plot: no numeric metric (check metrics_filter)")
    count = len(scores)
    width = min(bar_width, 0.8 / max(count, 1))
    figure = _new_figure(min(16.0, max(6.0, len(names) * (0.5 + 0.45 * count) + 2.0)), 4.8)
    ax = figure.subplots()
    top = 0.0
    for index, (condition, by_name) in enumerate(scores.items()):
        values = [by_name.get(name, 0.0) for name in names]
        offsets = [i + (index - (count - 1) / 2) * width for i in range(len(names))]
        bars = ax.bar(offsets, values, width=width * 0.95, color=f"C{index % 10}", alpha=0.85, label=condition)
        top = max(top, *values)
        if show_values:
            for bar, value in zip(bars, values):
                ax.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), [_pretty(name) for name in names], rotation=30 if len(names) > 5 else 0,
                  ha="right" if len(names) > 5 else "center")
    ax.set_ylim(0, max(1.1, top * 1.15))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(grid, axis="y", alpha=0.3)
    if count > 1:
        ax.legend(loc="best", fontsize=9)
    ax.set_title(title, fontsize=13)
    return save_figure(figure, _target(to_folder, to_file))


def plot_metrics(metrics: Mapping[str, Any], to_file: str | os.PathLike[str] = "evaluation_metrics.png",
                 to_folder: Any = None, xlabel: str = "Metrics", ylabel: str = "Scores",
                 title: str = "Evaluation metrics", grid: bool = True, metrics_filter: Sequence[str] | None = None,
                 **kwargs: Any) -> Path:
    """A bar per metric of one ``evaluate()`` result."""
    return plot_metrics_comparison({"result": metrics}, to_file=to_file, to_folder=to_folder, xlabel=xlabel,
                                   ylabel=ylabel, title=title, grid=grid, metrics_filter=metrics_filter, **kwargs)
