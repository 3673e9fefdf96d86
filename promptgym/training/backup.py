"""``BackupAndRestore``: an interrupted ``fit()`` started again goes on where the last backup left it.

    backup = BackupAndRestore(backup_dir="/tmp/backup")
    await program.fit(x, y, epochs=10, callbacks=[backup])   # killed during epoch 5
    await program.fit(x, y, epochs=10, callbacks=[backup])   # restores epoch 5's start, runs epochs 5..9

The backup is a program file (variables, optimizer state, the rollouts
already paid for, the position), written atomically at each epoch's end (or
every ``save_freq`` batches) and deleted when ``fit()`` completes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.training.callback import Callback
from promptgym.runs.checkpoints import Checkpointable, write_checkpoint
from promptgym.training.fit_folder import restore_program


class BackupAndRestore(Callback):
    """See the module docstring. ``delete_checkpoint=False`` keeps the backup after a completed run."""

    def __init__(self, backup_dir: str | Path | None = None, save_freq: Any = "epoch", delete_checkpoint: bool = True,
                 double_checkpoint: bool = False) -> None:
        super().__init__()
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed: give the folder to keep the backup in")
        if save_freq != "epoch" and save_freq is not False and \
                not (isinstance(save_freq, int) and not isinstance(save_freq, bool) and save_freq > 0):
            raise ValueError(f"Invalid value for argument `save_freq`: {save_freq!r} (expected 'epoch', a number of "
                             "batches, or False)")
        self.backup_dir = Path(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self.double_checkpoint = double_checkpoint
        self._batches = 0

    @property
    def backup_path(self) -> Path:
        return self.backup_dir / "latest.program.json"

    def resume_point(self, program: Checkpointable) -> tuple[int, int] | None:
        """Restore ``program`` from the backup, if there is one: the (epoch, step) ``fit()`` goes on from."""
        if not self.backup_path.exists():
            return None
        return restore_program(program, self.backup_path)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._batches = 0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if isinstance(self.save_freq, int) and not isinstance(self.save_freq, bool):
            self._batches += 1
            if self._batches >= self.save_freq:
                self._batches = 0
                self._backup()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.save_freq == "epoch":
            self._backup()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if getattr(self.program, "stop_reason", None) == "max_usd":
            self._record_spend()  # a capped run is not finished: keep its backup, with all it spent
            return
        if self.delete_checkpoint and self.backup_path.exists():
            self.backup_path.unlink()

    def _record_spend(self) -> None:
        """Put the run's whole spend in the backup, so a resumed run's cap counts the calls made since it."""
        spend = getattr(getattr(self.program, "training_setup", None), "spend", None)
        if spend is None:
            return
        if not self.backup_path.exists():
            self._backup()
            return
        saved = read_json(self.backup_path)
        saved.setdefault("trainer_state", {})
        if saved["trainer_state"] is None:
            saved["trainer_state"] = {}
        saved["trainer_state"]["spend"] = spend
        atomic_write_json(self.backup_path, saved)

    def _backup(self) -> None:
        self.backup_dir.mkdir(parents=True, exist_ok=True)
        if self.double_checkpoint and self.backup_path.exists():
            self.backup_path.replace(self.backup_dir / "previous.program.json")
        write_checkpoint(self.program, self.backup_path)
