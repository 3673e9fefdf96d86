"""A prompt program's checkpoint: one writer, one reader, for ``BackupAndRestore``, ``ProgramCheckpoint`` and
the CLI's run folders.

    write_checkpoint(program, folder / "epoch_3.json")
    path, note = usable_checkpoint(folder)                             # last.json, else the newest readable one
    epoch, step = restore_checkpoint(program, path)                    # then fit(initial_epoch=epoch, ...)

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


def readable_checkpoint(path: Path) -> bool:
    """Whether ``path`` reads as a program file (a kill or a disk error can leave one that does not)."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("variables"), dict)


def usable_checkpoint(folder: Path) -> tuple[Path | None, str]:
    """The checkpoint in ``folder`` to resume from, and a note when it isn't ``last.json``.

    ``last.json`` when it reads as a program file; else the newest other checkpoint that does
    (``epoch_N.json``, ``interrupted.json``); else None.
    """
    last = folder / "last.json"
    if readable_checkpoint(last):
        return last, ""
    problem = "is missing" if not last.exists() else "can't be read"
    others = sorted((path for path in folder.glob("*.json") if path != last),
                    key=lambda path: path.stat().st_mtime, reverse=True)
    for path in others:
        if readable_checkpoint(path):
            return path, (f"{folder.name}/last.json {problem}; resuming from {folder.name}/{path.name}, "
                          "the newest readable checkpoint")
    return None, f"{folder.name}/last.json {problem} and no other checkpoint can be read; starting again from epoch 1"
