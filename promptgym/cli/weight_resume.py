"""Where a weight run (SFT, RL) continues on ``--resume``: its last checkpoint, or the start; and the flow steps
every weight flow shares (:class:`WeightFlowSteps`)."""

from __future__ import annotations

from typing import Any

from promptgym.cli.common import console
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
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


class WeightFlowSteps:
    """The steps the SFT and RL flows take alike: resume from the last checkpoint, nothing more to confirm."""

    progress_unit = "step"

    def confirm_checks(self, prepared: Any, masker: Masker) -> None:
        """Preparing loaded the model and checked the data (and the task app): that is the check."""

    def dry_run_note(self) -> str:
        return "dry run: nothing started"

    def announce_resume(self, run: RunFolder, status: dict[str, Any]) -> bool:
        """After the last checkpoint (adapter, optimizer, schedule and RNG), or from the start without one."""
        console.print(resume_message(run, self.progress_unit), markup=False, soft_wrap=True)
        return has_checkpoint(run)

    def resumes_in_worker(self, run: RunFolder) -> bool:
        return has_checkpoint(run)
