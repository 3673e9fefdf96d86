"""A prompt program's checkpoint: one writer, one reader, for ``BackupAndRestore``, ``ProgramCheckpoint`` and
the CLI's run folders.

    write_checkpoint(program, folder / "epoch_3.json")
    epoch, step = restore_checkpoint(program, folder / "last.json")   # then fit(initial_epoch=epoch, ...)

A checkpoint is a program file (variables, compile config, optimizer state, trainer state with the position).
Restoring goes through ``compile_from_config``: the reward, optimizer and metrics are the saved ones, with
their progress, and the trainer state waits for the resumed ``fit()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from promptgym.core.atomic import read_json


class Checkpointable(Protocol):
    """What a checkpoint needs of a program (a ``Program``; programs sit above training, so named by shape)."""

    def save(self, filepath: str) -> None: ...

    def set_variables(self, variables: dict[str, Any], source: str = ...) -> None: ...

    def compile_from_config(self, config: dict[str, Any], optimizer_state: dict[str, Any] | None = None,
                            trainer_state: dict[str, Any] | None = None) -> None: ...


def write_checkpoint(program: Checkpointable, path: str | Path) -> Path:
    """Save ``program`` (atomically) at ``path``, creating its folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(target))
    return target


def restore_checkpoint(program: Checkpointable, path: str | Path) -> tuple[int, int]:
    """Variables, compile config and progress from ``path``; returns the (epoch, step) ``fit()`` goes on from.

    A checkpoint without a trainer state (an older version's) resumes at the start of the epoch after the
    optimizer's last finished one.
    """
    saved = read_json(Path(path))
    program.set_variables(saved["variables"], source=str(path))
    program.compile_from_config(saved["compile"], saved.get("optimizer_state"), saved.get("trainer_state"))
    epochs_done = (saved.get("optimizer_state") or {}).get("epochs_done", 0)
    position = (saved.get("trainer_state") or {}).get("position") or {"epoch": epochs_done, "step": 0}
    return int(position.get("epoch", 0)), int(position.get("step", 0))
