"""``promptgym.callbacks``: hooks into fit / evaluate / predict."""

from promptgym.training.backup import BackupAndRestore
from promptgym.training.callback import HOOKS, Callback, CallbackList
from promptgym.training.callbacks_builtin import CSVLogger, EarlyStopping, ProgramCheckpoint
from promptgym.training.history import History
from promptgym.training.mlflow_logger import MLflowLogger
from promptgym.training.monitor import Monitor
from promptgym.training.progress import ProgressBar
from promptgym.training.tensorboard import TensorBoard

ProgbarLogger = ProgressBar

__all__ = ["HOOKS", "BackupAndRestore", "CSVLogger", "Callback", "CallbackList", "EarlyStopping", "History",
           "MLflowLogger", "Monitor", "ProgbarLogger", "ProgramCheckpoint", "ProgressBar", "TensorBoard"]
