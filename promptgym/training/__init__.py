"""Training: compile, fit, evaluate, predict, callbacks, history."""

from promptgym.rollouts import TrainingAborted
from promptgym.training.callback import Callback, CallbackList
from promptgym.training.callbacks_builtin import CSVLogger, EarlyStopping, ProgramCheckpoint
from promptgym.training.history import History
from promptgym.training.progress import ProgressBar

__all__ = ["CSVLogger", "Callback", "CallbackList", "EarlyStopping", "History", "ProgramCheckpoint", "ProgressBar",
           "TrainingAborted"]
