"""``promptgym.callbacks``: hooks into fit / evaluate / predict."""

from promptgym.training.callback import HOOKS, Callback, CallbackList
from promptgym.training.progress import ProgressBar

__all__ = ["HOOKS", "Callback", "CallbackList", "ProgressBar"]
