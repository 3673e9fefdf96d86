"""Utilities: plots of training histories, evaluation results and program graphs.

matplotlib is optional (``pip install 'promptgym[plots]'``): nothing here imports
it until a ``plot_*`` function is called.
"""

from __future__ import annotations

import importlib
from typing import Any

from promptgym.utils._plot_data import (
    comparison_error_bars,
    graph_layers,
    history_panels,
    metrics_comparison_mean_and_std,
    metrics_mean_and_std,
    paired_comparison,
)
from promptgym.utils.plot_cost import CostPoint, cost_points, pareto_front, plot_cost_vs_score
from promptgym.utils.plot_runs import (
    plot_history_comparison,
    plot_history_comparison_with_mean_and_std,
    plot_history_with_mean_and_std,
    plot_metrics,
    plot_metrics_comparison,
)
from promptgym.utils.plotting import (
    plot_history,
    plot_metrics_comparison_with_mean_and_std,
    plot_metrics_with_mean_and_std,
    plot_program,
)

__all__ = [
    "plot_history",
    "plot_history_with_mean_and_std",
    "plot_history_comparison",
    "plot_history_comparison_with_mean_and_std",
    "plot_metrics",
    "plot_metrics_comparison",
    "plot_metrics_with_mean_and_std",
    "plot_metrics_comparison_with_mean_and_std",
    "plot_program",
    "plot_cost_vs_score",
    "cost_points",
    "pareto_front",
    "CostPoint",
    "history_panels",
    "metrics_mean_and_std",
    "metrics_comparison_mean_and_std",
    "comparison_error_bars",
    "paired_comparison",
    "graph_layers",
]

_ELSEWHERE = {
    "clear_session": "promptgym.session", "is_json_data_model": "promptgym.backend",
    "is_meta_class": "promptgym.backend", "is_symbolic_data_model": "promptgym.backend",
    "register_synalinks_serializable": "promptgym.saving", "serialize_synalinks_object": "promptgym.saving",
    "deserialize_synalinks_object": "promptgym.saving", "get_registered_name": "promptgym.saving",
    "get_registered_object": "promptgym.saving", "get_custom_objects": "promptgym.saving",
    "CustomObjectScope": "promptgym.saving", "custom_object_scope": "promptgym.saving",
    "pack_x_y": "promptgym.training.data", "unpack_x_y": "promptgym.training.data",
}
"""Names synalinks also exports from ``synalinks.utils``, where promptgym defines them."""

def __getattr__(name: str) -> Any:
    # synalinks' names that live in higher layers (session, saving, training): looked up on use, so that
    # utils imports nothing above it (docs/architecture.md)
    if name in _ELSEWHERE:
        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module 'promptgym.utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_ELSEWHERE))
