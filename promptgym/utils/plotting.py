"""PNG plots of training histories, evaluation results and program graphs.

matplotlib is an optional extra (``pip install 'promptgym[plots]'``) and is only
imported when a plot function is called. Figures are drawn on
``matplotlib.figure.Figure`` + the Agg canvas, so the global pyplot backend of
the importing program is never touched, and files are written atomically
(temp file in the same folder, then ``os.replace``).

The numbers behind each plot come from pure helpers in
:mod:`promptgym.utils._plot_data` (``history_panels``, ``metrics_mean_and_std``,
``metrics_comparison_mean_and_std``, ``graph_layers``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_writer
from promptgym.utils._plot_data import (
    comparison_error_bars,
    history_dict,
    history_panels,
    metrics_mean_and_std,
    paired_comparison,
)
from promptgym.utils._plot_program import draw_program

_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def _matplotlib() -> tuple[Any, Any]:
    """``(Figure, FigureCanvasAgg)``, or a clear ImportError naming the extra."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            "promptgym plotting needs matplotlib, an optional extra: pip install 'promptgym[plots]'"
        ) from error
    return Figure, FigureCanvasAgg


def _new_figure(width: float, height: float, layout: str | None = "constrained") -> Any:
    Figure, FigureCanvasAgg = _matplotlib()
    figure = Figure(figsize=(width, height), dpi=100, layout=layout)
    FigureCanvasAgg(figure)
    return figure


def _target(to_folder: str | os.PathLike[str] | None, to_file: str | os.PathLike[str]) -> Path:
    target = Path(to_folder) / to_file if to_folder is not None else Path(to_file)
    if target.suffix.lower() not in _FORMATS:
        if target.suffix:
            raise ValueError(f"{target}: unsupported image format {target.suffix!r} (use .png, .svg or .pdf)")
        target = target.with_suffix(".png")
    return target


def save_figure(figure: Any, target: Path, dpi: int = 120) -> Path:
    """Write ``figure`` to ``target`` atomically; create the folder if needed."""
    with atomic_writer(target, binary=True) as handle:
        figure.savefig(handle, format=_FORMATS[target.suffix.lower()], dpi=dpi,
                       bbox_inches="tight", pad_inches=0.15, facecolor="white")
    return target


def _pretty(name: str) -> str:
    return name.replace("_", " ").strip().capitalize()


def _fmt(value: float) -> str:
    if value != 0 and (abs(value) >= 1000 or abs(value) < 0.01):
        return f"{value:.3g}" if abs(value) < 1e6 else f"{value:.2e}"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"


# -- training history -------------------------------------------------------------------


def plot_history(history: Any, to_folder: str | os.PathLike[str] | None = None,
                 to_file: str | os.PathLike[str] = "training_history.png", title: str | None = None,
                 metrics_filter: Sequence[str] | None = None, **_: Any) -> Path:
    """Plot a ``fit()`` history: one panel per metric, train and ``val_`` curves together.

    ``history`` is a History (``.history`` dict of lists, optional ``.epoch``) or
    a plain dict of lists. Epochs without a value (``None``/NaN, e.g. when
    validation ran every few epochs) are skipped; present points are drawn as
    markers joined by a line. LM usage keys (``lm_calls``, ``*_tokens``) get
    their own panels; ``metrics_filter`` keeps only the named keys. Returns the path written.
    """
    if metrics_filter is not None:
        data_dict, epoch_list = history_dict(history)
        history = {key: values for key, values in data_dict.items() if key in metrics_filter}
    data = history_panels(history)
    _matplotlib()
    from matplotlib.ticker import MaxNLocator

    epochs, panels = data["epochs"], data["panels"]
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    figure = _new_figure(6.0 * ncols, 3.6 * nrows + 0.5)
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (panel, series) in zip(axes, panels.items()):
        bases = list(dict.fromkeys(k[4:] if k.startswith("val_") else k for k in series))
        for key, values in series.items():
            points = [(e, v) for e, v in zip(epochs, values) if not math.isnan(v)]
            if not points:
                continue
            xs, ys = zip(*points)
            validation = key.startswith("val_")
            label = ("validation" if validation else "train") if key in (panel, "val_" + panel) else key
            ax.plot(xs, ys, marker="s" if validation else "o", markersize=5,
                    linestyle="--" if validation else "-", linewidth=1.8, label=label,
                    color=f"C{int(validation) if len(bases) == 1 else bases.index(key[4:] if validation else key)}")
        ax.set_title(_pretty(panel) if panel not in ("Tokens", "LM usage") else panel)
        ax.set_xlabel("Epoch")
        ax.set_ylabel("Count" if panel in ("Tokens", "LM usage") else _pretty(panel))
        if len(epochs) <= 12:
            ax.set_xticks(epochs)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=9)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    figure.suptitle(title or "Training history", fontsize=14)
    return save_figure(figure, _target(to_folder, to_file))


# -- evaluation results -----------------------------------------------------------------


def _bar_labels(ax: Any, bars: Any, means: Sequence[float], stds: Sequence[float], fontsize: int) -> None:
    for bar, mean, std in zip(bars, means, stds):
        top = mean + std if mean >= 0 else mean - std
        text = _fmt(mean) + (f"\n±{_fmt(std)}" if std > 0 else "")
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, top), xytext=(0, 3 if mean >= 0 else -3),
                    textcoords="offset points", ha="center", va="bottom" if mean >= 0 else "top",
                    fontsize=fontsize, linespacing=0.95)


def _score_ylim(ax: Any, means: Sequence[float], stds: Sequence[float]) -> None:
    """Scores in [0, 1] get a 0..1 axis with headroom for the labels; others get margins."""
    lows = [m - s for m, s in zip(means, stds)]
    highs = [m + s for m, s in zip(means, stds)]
    low, high = min(lows + [0.0]), max(highs + [0.0])
    if low >= 0 and high <= 1.0001:
        ax.set_ylim(0, 1.22)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    else:
        span = (high - low) or 1.0
        ax.set_ylim(low - (0.18 * span if low < 0 else 0), high + 0.22 * span)
    ax.axhline(0, color="black", linewidth=0.8)


def plot_metrics_with_mean_and_std(results: Sequence[Mapping[str, Any]], to_folder: str | os.PathLike[str] | None = None,
                                   to_file: str | os.PathLike[str] = "evaluation_metrics.png",
                                   title: str | None = None, metrics: Sequence[str] | None = None, **_: Any) -> Path:
    """Bar per metric: mean over several ``evaluate()`` results, std as error bars.

    Numbers from :func:`metrics_mean_and_std` (LM usage keys left out). Returns the path written.
    """
    stats = metrics_mean_and_std(results)
    names = [name for name in stats if metrics is None or name in metrics]
    means = [stats[n][0] for n in names]
    stds = [stats[n][1] for n in names]
    figure = _new_figure(max(5.0, 1.3 * len(names) + 2.0), 4.6)
    ax = figure.subplots()
    bars = ax.bar(range(len(names)), means, yerr=stds if any(stds) else None, capsize=8, width=0.6,
                  color=[f"C{i % 10}" for i in range(len(names))], alpha=0.85,
                  error_kw={"elinewidth": 1.5, "ecolor": "black"})
    _bar_labels(ax, bars, means, stds, fontsize=10)
    ax.set_xticks(range(len(names)), [_pretty(n) for n in names], rotation=30 if len(names) > 5 else 0,
                  ha="right" if len(names) > 5 else "center")
    ax.set_ylabel("Score (mean ± std)")
    _score_ylim(ax, means, stds)
    ax.grid(True, axis="y", alpha=0.3)
    runs = len(list(results))
    ax.set_title(title or f"Evaluation metrics ({runs} run{'s' if runs != 1 else ''})", fontsize=13)
    return save_figure(figure, _target(to_folder, to_file))


def _interval_labels(ax: Any, bars: Any, values: Sequence[tuple[float, float, float, str]], fontsize: int) -> None:
    for bar, (mean, below, above, kind) in zip(bars, values):
        spread = "" if not (below or above) else (
            f"\n[{_fmt(mean - below)}, {_fmt(mean + above)}]" if kind == "ci" else f"\n±{_fmt(below)}")
        ax.annotate(_fmt(mean) + spread, (bar.get_x() + bar.get_width() / 2, mean + above),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                    fontsize=fontsize, linespacing=0.95)


def plot_metrics_comparison_with_mean_and_std(conditions: Mapping[str, Sequence[Mapping[str, Any]]],
                                              to_folder: str | os.PathLike[str] | None = None,
                                              to_file: str | os.PathLike[str] = "metrics_comparison.png",
                                              title: str | None = None, metrics_filter: Sequence[str] | None = None,
                                              **_: Any) -> Path:
    """Grouped bars: per metric, one bar per condition.

    ``conditions`` is e.g. ``{"before_training": [before], "after_training": [after]}``.
    A condition that is one ``evaluate()`` result gets its 95% confidence
    interval as error bars; several results get mean ± std over them
    (numbers from :func:`comparison_error_bars`). With two such single results on
    the same examples, the paired test of the second against the first (difference,
    its interval, p-value: :func:`paired_comparison`) is printed under the title.
    Returns the path written.
    """
    if metrics_filter is not None:
        conditions = {name: [{key: value for key, value in result.items() if key in metrics_filter}
                             for result in results] for name, results in conditions.items()}
    bars_data = comparison_error_bars(conditions)
    condition_names = list(bars_data)
    metric_names = list(next(iter(bars_data.values())))
    count = len(condition_names)
    width = min(0.8 / count, 0.35)
    figure = _new_figure(min(16.0, max(6.0, len(metric_names) * (0.5 + 0.45 * count) + 2.0)), 5.0)
    ax = figure.subplots()
    all_means, all_spreads, kinds = [], [], set()
    for index, condition in enumerate(condition_names):
        values = [bars_data[condition][m] for m in metric_names]
        offsets = [i + (index - (count - 1) / 2) * width for i in range(len(metric_names))]
        errors = [[v[1] for v in values], [v[2] for v in values]]
        runs = len(list(conditions[condition]))
        kinds.update(v[3] for v in values)
        bars = ax.bar(offsets, [v[0] for v in values], width=width * 0.95,
                      yerr=errors if any(errors[0] + errors[1]) else None, capsize=5, color=f"C{index % 10}",
                      alpha=0.85, label=f"{_pretty(condition)} (" + (f"n={runs}" if values[0][3] == "std"
                                                                     else f"{conditions[condition][0].n} examples") + ")",
                      error_kw={"elinewidth": 1.3, "ecolor": "black"})
        _interval_labels(ax, bars, values, fontsize=8 if count > 2 else 9)
        all_means += [v[0] for v in values]
        all_spreads += [max(v[1], v[2]) for v in values]
    ax.set_xticks(range(len(metric_names)), [_pretty(n) for n in metric_names],
                  rotation=30 if len(metric_names) > 5 else 0, ha="right" if len(metric_names) > 5 else "center")
    ax.set_ylabel("Score (mean, 95% CI)" if kinds == {"ci"} else "Score (mean ± std)")
    _score_ylim(ax, all_means, all_spreads)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1 if len(metric_names) <= 5 else -0.22),
              ncol=min(count, 4), frameon=False)
    paired = paired_comparison(conditions)
    caption = "" if paired is None else (
        f"\n{_pretty(metric_names[0])}, {_pretty(condition_names[1]).lower()} vs {_pretty(condition_names[0]).lower()}: {paired.brief()} "
        f"({paired.wins} better, {paired.losses} worse of {paired.n}; {paired.verdict()})")
    ax.set_title((title or "Metrics comparison") + caption, fontsize=13 if paired is None else 10)
    return save_figure(figure, _target(to_folder, to_file))


def plot_program(program: Any, to_file: str | os.PathLike[str] = "program.png",
                 to_folder: str | os.PathLike[str] | None = None, show_schemas: bool = False,
                 show_module_names: bool = True, show_defs: bool = False, rankdir: str = "TB",
                 expand_nested: bool = False, dpi: int = 120, show_trainable: bool = False) -> Path:
    """Draw a program's module graph (``program.get_graph()``) as boxes in layers with arrows.

    Each box shows the module's name and class (``show_module_names=False``:
    the class only), its output schema's fields with ``show_schemas`` (and the
    names of the schema's ``$defs`` with ``show_defs``), and whether the
    optimizer can change it with ``show_trainable``. The layout is top to
    bottom; nested programs are drawn as one box.

        plot_program(program, to_file="qa.png", show_schemas=True, show_trainable=True)
    """
    if rankdir != "TB":
        raise ValueError(f"plot_program: rankdir={rankdir!r} is not supported; graphs are drawn top to bottom ('TB')")
    if expand_nested:
        raise ValueError("plot_program: expand_nested=True is not supported; a nested program is drawn as one box")
    _matplotlib()
    if isinstance(program, Mapping):
        graph = program
    elif callable(getattr(program, "get_graph", None)):
        graph = program.get_graph()
    else:
        raise TypeError(f"plot_program expects a Program (with get_graph()) or a graph dict, got {type(program).__name__}")
    figure = draw_program(graph, _new_figure, show_schemas=show_schemas, show_module_names=show_module_names,
                          show_defs=show_defs, show_trainable=show_trainable,
                          title=getattr(program, "name", None) if not isinstance(program, Mapping) else None)
    return save_figure(figure, _target(to_folder, to_file), dpi=dpi)
