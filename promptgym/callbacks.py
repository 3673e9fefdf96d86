"""``promptgym.callbacks``: hooks into fit / evaluate / predict."""

from promptgym.training.callback import HOOKS, Callback, CallbackList
from promptgym.training.callbacks_builtin import CSVLogger, EarlyStopping, ProgramCheckpoint
from promptgym.training.history import History
from promptgym.training.progress import ProgressBar

__all__ = ["HOOKS", "CSVLogger", "Callback", "CallbackList", "EarlyStopping", "History", "ProgramCheckpoint", "ProgressBar"]
