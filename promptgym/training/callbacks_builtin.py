"""Built-in callbacks: ProgramCheckpoint, EarlyStopping, CSVLogger."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_text
from promptgym.training.callback import Callback


def _improved(value: float, best: float | None, mode: str, min_delta: float = 0.0) -> bool:
    if best is None:
        return True
    return value > best + min_delta if mode == "max" else value < best - min_delta


def _check_mode(mode: str) -> str:
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    return mode


class ProgramCheckpoint(Callback):
    """Save the program (with optimizer state) at epoch ends, or only when ``monitor`` improves.

    ``filepath`` may contain ``{epoch}`` and any log key, e.g. ``"ckpt_{epoch}.json"``.
    """

    def __init__(self, filepath: str | Path, monitor: str = "val_reward", mode: str = "max",
                 save_best_only: bool = False, verbose: int = 0) -> None:
        super().__init__()
        self.filepath = str(filepath)
        self.monitor = monitor
        self.mode = _check_mode(mode)
        self.save_best_only = save_best_only
        self.verbose = verbose
        self.best: float | None = None

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        value = logs.get(self.monitor)
        if self.save_best_only:
            if value is None or (isinstance(value, float) and math.isnan(value)):
                return
            if not _improved(value, self.best, self.mode):
                return
            self.best = value
        path = self.filepath.format(epoch=epoch + 1, **{k: v for k, v in logs.items() if isinstance(k, str)})
        self.program.save(path)
        if self.verbose:
            print(f"  saved {path} ({self.monitor}={value})")


class EarlyStopping(Callback):
    """Stop ``fit()`` when ``monitor`` hasn't improved for ``patience`` epochs."""

    def __init__(self, monitor: str = "val_reward", mode: str = "max", patience: int = 1, min_delta: float = 0.0) -> None:
        super().__init__()
        self.monitor = monitor
        self.mode = _check_mode(mode)
        self.patience = patience
        self.min_delta = min_delta
        self.best: float | None = None
        self.wait = 0
        self.stopped_epoch: int | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.best, self.wait, self.stopped_epoch = None, 0, None

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        if _improved(value, self.best, self.mode, self.min_delta):
            self.best, self.wait = value, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.program.stop_training = True


class CSVLogger(Callback):
    """Write one row per epoch to ``filename`` (rewritten atomically each epoch)."""

    def __init__(self, filename: str | Path, append: bool = False) -> None:
        super().__init__()
        self.filename = Path(filename)
        self.append = append
        self.rows: list[dict[str, Any]] = []

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.rows = []
        if self.append and self.filename.exists():
            with self.filename.open(encoding="utf-8") as handle:
                self.rows = list(csv.DictReader(handle))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.rows.append({"epoch": epoch, **(logs or {})})
        keys: list[str] = []
        for row in self.rows:
            keys += [key for key in row if key not in keys]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=keys)
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_text(self.filename, buffer.getvalue())
