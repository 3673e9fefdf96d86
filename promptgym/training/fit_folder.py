"""``fit(run_dir=...)``: a ``fit()`` that keeps its run folder, the same folder ``promptgym train`` keeps.

    await program.fit(x, y, epochs=3, run_dir="runs/dates")   # killed anywhere...
    await program.fit(x, y, epochs=3, run_dir="runs/dates")   # ...goes on from the last checkpoint

The folder holds ``run.json`` (status), ``events.jsonl`` (every trainer event), ``history.csv`` (one row
per epoch), ``checkpoints/`` (``last.json`` after every step, ``epoch_N.json``), ``finetune/stage-N/`` (a
FineTune stage's SFT runs, resumed inside their own steps) and, once done, ``best_program.json``
(docs/runs.md). ``training.fit`` and the CLI's prompt-learning flow drive the same pieces (:func:`resume_point`,
the optimizer's ``place_outputs``, ``RunAttempt`` and ``RunRecorder``), so both leave the same layout.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from promptgym.core.atomic import read_json
from promptgym.modules.model_choice import assign_models
from promptgym.runs.checkpoints import restore_checkpoint
from promptgym.runs.folder import RunFolder
from promptgym.runs.history import drop_history_rows

logger = logging.getLogger("promptgym")

JOB_TYPE = "prompt_learning"
"""What ``run.json``'s ``job_type`` says of a fit() run folder (the CLI's prompt-learning flow's type)."""


def restore_program(program: Any, path: Path) -> tuple[int, int]:
    """Restore a checkpoint (variables, compile config, progress) and the model each Generator ran on when it
    was written (a FineTune stage's tuned model: a later stage's candidates don't name it); the (epoch, step)
    ``fit()`` goes on from. A checkpoint from before models were saved restores without them."""
    position = restore_checkpoint(program, path)
    models = read_json(path).get("models")
    if isinstance(models, dict) and models:
        assign_models(program, models)
    return position


def resume_point(run: RunFolder, program: Any) -> tuple[int, int, str, str]:
    """(epoch, step, checkpoint used, a note on dropped history rows) after restoring the newest usable checkpoint.

    Rows of ``history.csv`` for epochs the checkpoint hasn't finished are dropped: those epochs run again.
    """
    path, _ = run.usable_checkpoint()
    epoch, step = restore_program(program, path) if path is not None else (0, 0)
    stage = program.training_setup.optimizer.stage_index if path is not None else 0
    dropped = drop_history_after(run.path / "history.csv", epoch, stage)
    note = f"{dropped} history row(s) from epoch {epoch + 1} on dropped: they run again" if dropped else ""
    return epoch, step, str(path.relative_to(run.path)) if path else "(none)", note


def drop_history_after(path: Path, epochs_done: int, stage: int = 0) -> int:
    """Keep the rows of epochs ``< epochs_done`` (of a chain: of the stage ``stage`` the checkpoint is in, and
    every row of the stages before it, whose epochs count from 0 again); returns how many were dropped."""
    def kept(row: dict[str, str]) -> bool:
        label = str(row.get("stage") or "")
        row_stage = int(label.split(":")[0]) - 1 if label.split(":")[0].isdigit() else stage
        if row_stage != stage:
            return row_stage < stage
        return str(row.get("epoch", "")).isdigit() and int(row["epoch"]) < epochs_done

    return drop_history_rows(path, kept)


def open_run_folder(run_dir: str | Path, name: str) -> tuple[RunFolder, bool]:
    """The run folder at ``run_dir`` (made when new), and whether the fit resumes in it (it has a checkpoint).

    A folder whose run completed is not fitted again: its results would mix with the new run's.
    """
    path = Path(run_dir)
    run = RunFolder.at(path, name)
    status = run.status()
    if status.get("status") == "completed":
        raise ValueError(f"fit(run_dir={str(run_dir)!r}): that run completed ({path / 'run.json'}); give a new "
                         "run_dir, or remove the folder to train again from the start")
    checkpoint, note = run.usable_checkpoint()
    if note and checkpoint is not None:
        logger.warning("fit(run_dir=%s): %s", run_dir, note)
    return run, checkpoint is not None
