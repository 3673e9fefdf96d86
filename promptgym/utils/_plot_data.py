"""The numbers behind the plots, computed without matplotlib.

Every ``plot_*`` function in :mod:`promptgym.utils.plotting` draws what one of
these pure helpers returns, so the numbers can be checked (and reused, e.g.
printed in a report) without looking at pixels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: History / evaluate() keys that count LM usage rather than score the program.
USAGE_KEYS = frozenset({
    "lm_calls", "prompt_tokens", "completion_tokens", "total_tokens",
    "cache_hits", "lm_failures", "failures", "latency_s",
})


def is_usage_key(key: str) -> bool:
    """True for LM usage counters (``lm_calls``, ``*_tokens``...), also ``val_``-prefixed."""
    base = key[4:] if key.startswith("val_") else key
    return base in USAGE_KEYS or base.endswith("_tokens")


def _as_float(value: Any, where: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
    return float(value)


# -- history ----------------------------------------------------------------------------


def history_dict(history: Any) -> tuple[dict[str, list[Any]], list[int] | None]:
    """``(history_dict, epoch_list_or_None)`` from a History object or a plain dict."""
    if isinstance(history, Mapping):
        data, epochs = history, None
    elif isinstance(getattr(history, "history", None), Mapping):
        data, epochs = history.history, getattr(history, "epoch", None)
    else:
        raise TypeError(
            "plot_history expects a History (an object with a `.history` dict of lists) "
            f"or a dict of lists, got {type(history).__name__}"
        )
    for key, values in data.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
            raise TypeError(f"history[{key!r}] must be a list of numbers (one per epoch), got {type(values).__name__}")
    return dict(data), (list(epochs) if epochs is not None else None)


def history_panels(history: Any) -> dict[str, Any]:
    """Group a training history into plot panels.

    Returns ``{"epochs": [1, 2, ...], "panels": {title: {key: [float|nan, ...]}}}``.
    One panel per base metric (``reward`` first) holding the train key and its
    ``val_`` twin; LM usage keys go to a ``"Tokens"`` panel (``*_tokens``) and an
    ``"LM usage"`` panel (``lm_calls``...), placed last. Epochs are shown 1-based
    (Keras' ``History.epoch`` is 0-based). ``None`` becomes NaN (not drawn); a
    series shorter than the number of epochs is padded with NaN at the end.
    """
    data, epoch_list = history_dict(history)
    if not data:
        raise ValueError("plot_history: the history is empty (no metrics were recorded)")
    longest = max(len(values) for values in data.values())
    if epoch_list is not None and len(epoch_list) >= longest:
        epochs = [int(e) + 1 for e in epoch_list]
    else:
        epochs = list(range(1, longest + 1))
    if longest == 0:
        raise ValueError("plot_history: the history has no epochs")

    series: dict[str, list[float]] = {}
    for key, values in data.items():
        floats = [_as_float(v, f"history[{key!r}][{i}]") for i, v in enumerate(values)]
        series[key] = floats + [math.nan] * (len(epochs) - len(floats))

    score_bases: list[str] = []
    for key in series:
        if is_usage_key(key):
            continue
        base = key[4:] if key.startswith("val_") else key
        if base not in score_bases:
            score_bases.append(base)
    first_seen = {base: i for i, base in enumerate(score_bases)}
    score_bases.sort(key=lambda b: (b != "reward", b != "loss", first_seen[b]))

    panels: dict[str, dict[str, list[float]]] = {}
    for base in score_bases:
        panels[base] = {k: series[k] for k in (base, "val_" + base) if k in series}
    tokens = {k: v for k, v in series.items() if is_usage_key(k) and k.endswith("_tokens")}
    usage = {k: v for k, v in series.items() if is_usage_key(k) and not k.endswith("_tokens")}
    if tokens:
        panels["Tokens"] = tokens
    if usage:
        panels["LM usage"] = usage
    return {"epochs": epochs, "panels": panels}


# -- evaluation results -----------------------------------------------------------------


def metrics_mean_and_std(results: Sequence[Mapping[str, Any]], *, include_usage: bool = False,
                         where: str = "results") -> dict[str, tuple[float, float]]:
    """``{metric: (mean, std)}`` over a list of ``evaluate()`` results.

    ``std`` is the population standard deviation (``numpy.std``, ddof=0), so a
    single run has std 0. LM usage keys are left out unless ``include_usage``.
    Raises ``ValueError`` on an empty list or a metric missing from some results.
    """
    if isinstance(results, Mapping):
        raise TypeError(f"{where}: expected a list of evaluate() results (dicts), got a single dict; wrap it in a list")
    results = list(results)
    if not results:
        raise ValueError(f"{where}: no evaluation results to plot (the list is empty)")
    for i, result in enumerate(results):
        if not isinstance(result, Mapping):
            raise TypeError(f"{where}[{i}]: expected a dict of metric values, got {type(result).__name__}")
    names: list[str] = []
    for result in results:
        for name in result:
            if name not in names and (include_usage or not is_usage_key(name)):
                names.append(name)
    if not names:
        raise ValueError(f"{where}: the results hold no metrics")
    stats: dict[str, tuple[float, float]] = {}
    for name in names:
        missing = [i for i, result in enumerate(results) if name not in result]
        if missing:
            raise ValueError(f"{where}: metric {name!r} is missing from result(s) {missing} "
                             f"(present in {len(results) - len(missing)} of {len(results)})")
        values = np.array([_as_float(r[name], f"{where}[{i}][{name!r}]") for i, r in enumerate(results)])
        if np.isnan(values).any():
            raise ValueError(f"{where}: metric {name!r} has a None/NaN value")
        stats[name] = (float(values.mean()), float(values.std()))
    return stats


def metrics_comparison_mean_and_std(conditions: Mapping[str, Sequence[Mapping[str, Any]]], *,
                                    include_usage: bool = False) -> dict[str, dict[str, tuple[float, float]]]:
    """``{condition: {metric: (mean, std)}}``; every condition must have the same metrics."""
    if not isinstance(conditions, Mapping):
        raise TypeError("expected a dict {condition_name: [evaluate() results, ...]}, "
                        f"got {type(conditions).__name__}")
    if not conditions:
        raise ValueError("no conditions to compare (the dict is empty)")
    stats = {str(name): metrics_mean_and_std(results, include_usage=include_usage, where=f"{name!r}")
             for name, results in conditions.items()}
    all_metrics: list[str] = []
    for per_condition in stats.values():
        all_metrics += [m for m in per_condition if m not in all_metrics]
    for name, per_condition in stats.items():
        missing = [m for m in all_metrics if m not in per_condition]
        if missing:
            raise ValueError(f"condition {name!r} has no results for metric(s) {missing}")
    return {name: {m: per_condition[m] for m in all_metrics} for name, per_condition in stats.items()}


def comparison_error_bars(conditions: Mapping[str, Sequence[Mapping[str, Any]]]
                          ) -> dict[str, dict[str, tuple[float, float, float, str]]]:
    """``{condition: {metric: (mean, below, above, kind)}}``: the bars of a comparison plot.

    A condition given as one ``evaluate()`` result that kept its per-example scores
    (a :class:`promptgym.stats.Evaluation`) gets its 95% confidence interval
    (``kind="ci"``: ``mean - below`` to ``mean + above``); otherwise the spread over
    its results (``kind="std"``, symmetric; 0 for a single plain dict).
    """
    stats = metrics_comparison_mean_and_std(conditions)
    bars: dict[str, dict[str, tuple[float, float, float, str]]] = {}
    for name, per_metric in stats.items():
        results = list(conditions[name])
        scored = getattr(results[0], "scores", None) if len(results) == 1 else None
        bars[name] = {}
        for metric, (mean, std) in per_metric.items():
            if scored and scored.get(metric) and hasattr(results[0], "interval"):
                interval = results[0].interval(metric)
                bars[name][metric] = (mean, max(0.0, mean - interval.low), max(0.0, interval.high - mean), "ci")
            else:
                bars[name][metric] = (mean, std, std, "std")
    return bars


def paired_comparison(conditions: Mapping[str, Sequence[Mapping[str, Any]]]) -> Any:
    """The paired test of the last condition against the first, when both are one Evaluation on the same examples.

    Returns a :class:`promptgym.stats.PairedTest` on the reward (the first key), or None.
    """
    if len(conditions) != 2:
        return None
    groups = [list(results) for results in conditions.values()]
    if any(len(group) != 1 for group in groups):
        return None
    first, last = groups[0][0], groups[1][0]
    if not all(hasattr(result, "compare") and getattr(result, "n", 0) for result in (first, last)):
        return None
    if first.n != last.n:
        return None
    return last.compare(first)


# -- program graph ----------------------------------------------------------------------


def graph_layers(graph: Mapping[str, Any]) -> list[list[str]]:
    """Node ids in topological layers (longest path from a source), inputs first.

    Within a layer nodes keep the order in which they are listed. Raises
    ``ValueError`` on no nodes, duplicate ids, an edge to an unknown node, or a cycle.
    """
    nodes = graph.get("nodes") if isinstance(graph, Mapping) else None
    if not nodes:
        raise ValueError("the program graph has no nodes")
    order = [str(node["id"]) for node in nodes]
    if len(set(order)) != len(order):
        duplicates = sorted({n for n in order if order.count(n) > 1})
        raise ValueError(f"the program graph has duplicate node ids: {duplicates}")
    parents: dict[str, list[str]] = {n: [] for n in order}
    for edge in graph.get("edges") or []:
        src, dst = (str(e) for e in edge)
        for end in (src, dst):
            if end not in parents:
                raise ValueError(f"edge {[src, dst]} refers to unknown node {end!r}")
        if src not in parents[dst]:
            parents[dst].append(src)
    layer: dict[str, int] = {}
    visiting: set[str] = set()

    def depth(node: str) -> int:
        if node in layer:
            return layer[node]
        if node in visiting:
            raise ValueError(f"the program graph has a cycle through {node!r}")
        visiting.add(node)
        layer[node] = max((depth(p) + 1 for p in parents[node]), default=0)
        visiting.discard(node)
        return layer[node]

    for node in order:
        depth(node)
    layers: list[list[str]] = [[] for _ in range(max(layer.values()) + 1)]
    for node in order:
        layers[layer[node]].append(node)
    return layers


def schema_lines(schema: Mapping[str, Any] | None, limit: int = 10, width: int = 40) -> list[str]:
    """``["field: type", ...]`` for a JSON schema's properties (for ``show_schemas``)."""
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties") or {}

    def type_of(spec: Mapping[str, Any]) -> str:
        if "type" in spec:
            kind = spec["type"]
            if kind == "array" and isinstance(spec.get("items"), Mapping):
                return f"array[{type_of(spec['items'])}]"
            return "|".join(kind) if isinstance(kind, list) else str(kind)
        if "enum" in spec:
            return "enum"
        if "$ref" in spec:
            return str(spec["$ref"]).rsplit("/", 1)[-1]
        for combinator in ("anyOf", "oneOf", "allOf"):
            if combinator in spec:
                return "|".join(type_of(s) for s in spec[combinator] if isinstance(s, Mapping))
        return "any"

    lines = []
    for name, spec in list(properties.items())[:limit]:
        line = f"{name}: {type_of(spec) if isinstance(spec, Mapping) else 'any'}"
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    if len(properties) > limit:
        lines.append(f"… (+{len(properties) - limit} more)")
    return lines
