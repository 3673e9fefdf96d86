"""Utilities: plots of training histories, evaluation results and program graphs.

matplotlib is optional (``pip install 'promptgym[plots]'``): nothing here imports
it until a ``plot_*`` function is called.
"""

from __future__ import annotations

from typing import Any

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

_PLOTS = {"plot_history", "plot_metrics_with_mean_and_std", "plot_metrics_comparison_with_mean_and_std", "plot_program"}


_RUN_PLOTS = {"plot_history_with_mean_and_std", "plot_history_comparison", "plot_history_comparison_with_mean_and_std",
              "plot_metrics", "plot_metrics_comparison"}


def __getattr__(name: str) -> Any:
    if name in _ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    if name in _RUN_PLOTS:
        from promptgym.utils import plot_runs

        return getattr(plot_runs, name)
    if name in _PLOTS:
        from promptgym.utils import plotting

        return getattr(plotting, name)
    if name in __all__:
        from promptgym.utils import _plot_data

        return getattr(_plot_data, name)
    raise AttributeError(f"module 'promptgym.utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_ELSEWHERE))
