"""Built-in callbacks: ProgramCheckpoint, EarlyStopping, CSVLogger (Keras' behaviour and arguments).

``mode="auto"`` reads which way is better from the monitored metric's
``direction`` (rewards and most metrics: up); an unknown mode warns and
falls back to ``"auto"``.
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from promptgym.training.callback import Callback
from promptgym.runs.checkpoints import write_checkpoint
from promptgym.runs.history import read_history, write_history


def _check_mode(mode: str, owner: str) -> str:
    if mode not in ("auto", "min", "max"):
        warnings.warn(f"{owner}: unknown mode {mode!r}, falling back to 'auto'", stacklevel=3)
        return "auto"
    return mode


def monitor_direction(program: Any, monitor: str) -> str | None:
    """"up" or "down" for ``monitor`` (``val_`` stripped), from the program's reward and metrics; None if unknown."""
    name = monitor.removeprefix("val_")
    state = getattr(program, "training_setup", None)
    scorers = [state.reward, *state.metrics] if state is not None else []
    for group in getattr(program, "metrics", None) or []:  # synalinks-style metric lists
        scorers += list(getattr(group, "metrics", [group]))
    for scorer in scorers:
        if getattr(scorer, "name", None) == name:
            return getattr(scorer, "direction", "up")
    if name in ("reward", "accuracy") or name.endswith(("reward", "score", "accuracy", "precision", "recall")):
        return "up"
    if name.startswith("lm_calls") or name.endswith(("tokens", "loss", "failures")):
        return "down"
    return None


class _Monitoring(Callback):
    """What EarlyStopping and ProgramCheckpoint share: a monitored value and which way is better."""

    def __init__(self, monitor: str, mode: str, min_delta: float = 0.0) -> None:
        super().__init__()
        self.monitor = monitor
        self.mode = _check_mode(mode, type(self).__name__)
        self.min_delta = abs(min_delta)
        self.monitor_op: Any = None
        if self.mode != "auto":
            self._set_monitor_op()

    def _set_monitor_op(self) -> None:
        if self.mode == "min":
            self.monitor_op = np.less
        elif self.mode == "max":
            self.monitor_op = np.greater
        else:
            direction = monitor_direction(self.program, self.monitor) if self.program is not None else "up"
            if direction is None:
                raise ValueError(f"{type(self).__name__}: can't tell whether {self.monitor!r} should go up or down; "
                                 "pass mode='max' or mode='min'")
            self.monitor_op = np.greater if direction == "up" else np.less

    def _is_improvement(self, value: float, reference: float) -> bool:
        if reference is None:
            return True
        delta = self.min_delta if self.monitor_op is np.greater else -self.min_delta
        return bool(self.monitor_op(value - delta, reference))

    def get_monitor_value(self, logs: dict[str, Any] | None) -> Any:
        value = (logs or {}).get(self.monitor)
        if value is None:
            warnings.warn(f"{type(self).__name__}: {self.monitor!r} is not available in the logs (available: "
                          f"{', '.join(sorted(logs or {})) or 'none'})", stacklevel=2)
        return value


class ProgramCheckpoint(_Monitoring):
    """Save the program (with optimizer state) at epoch ends, every ``save_freq`` batches, or when ``monitor`` improves.

    ``filepath`` (``.json``; ``.variables.json`` with ``save_variables_only``) may
    contain ``{epoch}``, ``{batch}`` and any log key: ``"ckpt-{epoch:02d}-{val_reward:.2f}.json"``.
    ``initial_value_threshold``: only save once ``monitor`` beats it.
    """

    def __init__(self, filepath: str | Path, monitor: str = "val_reward", verbose: int = 0,
                 save_best_only: bool = False, save_variables_only: bool = False, mode: str = "auto",
                 save_freq: Any = "epoch", initial_value_threshold: float | None = None) -> None:
        self.best: Any = None
        super().__init__(monitor, mode)
        self.filepath = os.fspath(filepath)
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_variables_only = save_variables_only
        self.save_freq = save_freq
        self.initial_value_threshold = initial_value_threshold
        self._batches_seen = 0
        self._current_epoch = 0
        if save_freq != "epoch" and not (isinstance(save_freq, int) and not isinstance(save_freq, bool) and save_freq > 0):
            raise ValueError(f"Unrecognized save_freq: {save_freq!r} (expected 'epoch' or a number of batches)")
        if save_variables_only and not self.filepath.endswith(".variables.json"):
            raise ValueError(f"with save_variables_only=True the filepath must end in .variables.json, got {self.filepath}")
        if not save_variables_only and not self.filepath.endswith(".json"):
            raise ValueError(f"the filepath must end in .json, got {self.filepath}")
        if self.monitor_op is not None:
            self._reset_best()

    def _reset_best(self) -> None:
        self.best = (-np.inf if self.monitor_op is np.greater else np.inf) if self.initial_value_threshold is None \
            else self.initial_value_threshold

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self.monitor_op is None:
            try:
                self._set_monitor_op()
            except ValueError:
                self.monitor_op = np.greater  # an unknown metric: bigger is better, as for rewards
            self._reset_best()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._current_epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._should_save_on_batch(batch):
            self._save(self._current_epoch, batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.save_freq == "epoch":
            self._save(epoch, None, logs)

    def _should_save_on_batch(self, batch: int) -> bool:
        if self.save_freq == "epoch":
            return False
        self._batches_seen += 1
        if self._batches_seen >= self.save_freq:
            self._batches_seen = 0
            return True
        return False

    def _get_file_path(self, epoch: int, batch: int | None, logs: dict[str, Any] | None) -> str:
        values = {key: value for key, value in (logs or {}).items() if isinstance(key, str)}
        try:
            return self.filepath.format(epoch=epoch + 1, batch=(batch + 1) if batch is not None else None, **values)
        except KeyError as error:
            raise KeyError(f"Failed to format the checkpoint path {self.filepath!r}: no {error} in the logs "
                           f"(available: {', '.join(sorted(values)) or 'none'})") from None

    def _save(self, epoch: int, batch: int | None, logs: dict[str, Any] | None) -> None:
        if self.monitor_op is None:
            self.on_train_begin()
        logs = logs or {}
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                warnings.warn(f"Can save best program only with {self.monitor} available, skipping", stacklevel=2)
                return
            if isinstance(value, np.ndarray) and value.size != 1:
                warnings.warn(f"{self.monitor} is not a scalar value; saving the program without comparing", stacklevel=2)
            else:
                value = float(value)
                if not self._is_improvement(value, self.best):
                    return
                self.best = value
        path = self._get_file_path(epoch, batch, logs)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            if self.save_variables_only:
                self.program.save_variables(path)
            else:
                write_checkpoint(self.program, path)
        except IsADirectoryError:
            raise IOError(f"ProgramCheckpoint: {path} is a directory; the filepath must be a non-directory filepath "
                          "(ending in .json)") from None
        if self.verbose:
            print(f"  saved {path} ({self.monitor}={logs.get(self.monitor)})")

    def _checkpoint_exists(self, filepath: str) -> bool:
        return Path(filepath).exists()

    def _get_most_recently_modified_file_matching_pattern(self, pattern: str) -> str | None:
        """The newest file whose name matches ``pattern``'s placeholders (ties: the largest name)."""
        directory, name = os.path.split(pattern)
        regex = re.compile("^" + re.sub(r"\\\{.*?\\\}", ".*", re.escape(name)) + "$")
        if not os.path.isdir(directory or "."):
            return None
        matches = [os.path.join(directory, entry) for entry in os.listdir(directory or ".") if regex.match(entry)]
        if not matches:
            return None
        return max(matches, key=lambda path: (os.path.getmtime(path), path))


class EarlyStopping(_Monitoring):
    """Stop ``fit()`` when ``monitor`` hasn't improved for ``patience`` epochs.

    ``baseline``: improving means beating it too; ``start_from_epoch``: no stopping
    before that epoch; ``stop_at``: stop as soon as ``monitor`` reaches this value;
    ``restore_best_variables``: put back the variables of the best epoch when stopping.
    """

    def __init__(self, monitor: str = "val_reward", min_delta: float = 0.0, patience: int = 1, verbose: int = 0,
                 mode: str = "auto", baseline: float | None = None, restore_best_variables: bool = False,
                 start_from_epoch: int = 0, stop_at: float | None = None) -> None:
        super().__init__(monitor, mode, min_delta)
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.restore_best_variables = restore_best_variables
        self.start_from_epoch = start_from_epoch
        self.stop_at = stop_at
        self.best: Any = None
        self.best_epoch = 0
        self.best_variables: list[Any] | None = None
        self.wait = 0
        self.stopped_epoch = 0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self.mode == "auto":
            self._set_monitor_op()
        self.best, self.best_epoch, self.best_variables, self.wait, self.stopped_epoch = None, 0, None, 0, 0

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        value = self.get_monitor_value(logs)
        if value is None or epoch < self.start_from_epoch:
            return
        if self.monitor_op is None:
            self._set_monitor_op()
        if self.stop_at is not None and not self.monitor_op(self.stop_at, value):
            self.program.stop_training = True
            return
        if self.restore_best_variables and self.best_variables is None:
            self.best_variables = self._snapshot_variables()
        self.wait += 1
        if self._is_improvement(value, self.best):
            self.best, self.best_epoch = value, epoch
            if self.restore_best_variables:
                self.best_variables = self._snapshot_variables()
            if self.baseline is None or self._is_improvement(value, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.program.stop_training = True

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self.restore_best_variables and self.best_variables is not None and self.stopped_epoch:
            self._restore_variables(self.best_variables)
            if self.verbose:
                print(f"EarlyStopping: restored the variables of epoch {self.best_epoch + 1}")

    def _snapshot_variables(self) -> list[Any]:
        return [copy.deepcopy(variable.get_json()) for variable in self.program.trainable_variables]

    def _restore_variables(self, snapshot: list[Any]) -> None:
        for variable, value in zip(self.program.trainable_variables, snapshot):
            variable.assign(copy.deepcopy(value))


class CSVLogger(Callback):
    """Write one row per epoch to ``filename`` (``filepath=`` too; rewritten atomically each epoch)."""

    def __init__(self, filename: str | Path | None = None, append: bool = False, separator: str = ",",
                 filepath: str | Path | None = None) -> None:
        super().__init__()
        if filename is None and filepath is None:
            raise ValueError("CSVLogger needs filename= (or filepath=)")
        self.filename = Path(filename if filename is not None else filepath)  # type: ignore[arg-type]
        self.append = append
        self.separator = separator
        self.rows: list[dict[str, Any]] = []

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.rows = read_history(self.filename, self.separator)[0] if self.append else []

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.rows.append({"epoch": epoch, **(logs or {})})
        write_history(self.filename, self.rows, separator=self.separator)
