"""Where a weight run (SFT, RL) continues on ``--resume``: its last checkpoint, or the start."""

from __future__ import annotations

from promptgym.cli.runs import RunFolder
from promptgym.finetune.checkpoint import find_checkpoint, last_checkpoint, read_progress


def has_checkpoint(run: RunFolder) -> bool:
    """Resume from a checkpoint when the run has one; else start over in the same folder."""
    return last_checkpoint(run.path / "checkpoints") is not None


def resume_message(run: RunFolder, unit: str) -> str:
    """What ``--resume`` says: after which step (iteration) it continues, from which checkpoint when that is not
    the one ``last.json`` names, or that it starts over."""
    checkpoint, note = find_checkpoint(run.path / "checkpoints")
    if checkpoint is None:
        return f"run {run.id} has no checkpoint yet: starting it over"
    return f"resuming run {run.id} after {unit} {read_progress(checkpoint).step}" + (f" ({note})" if note else "")
