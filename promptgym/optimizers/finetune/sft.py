"""FineTune's bridge to the SFT engine (:mod:`promptgym.finetune`): settings, base models, one SFT job.

FineTune imports this module when it is built or trains, not when ``promptgym.optimizers`` is imported:
the engine (and, when a job starts, torch and transformers) loads only for a program that fine-tunes.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from promptgym.finetune.auto_epochs import MAX_EPOCHS
from promptgym.finetune.base_model import BaseModelError, resolve_base_model
from promptgym.finetune.checkpoint import last_checkpoint, read_progress
from promptgym.finetune.loop import EventSink, TrainingInterrupted
from promptgym.finetune.settings import LoraSettings, SFTSettings
from promptgym.finetune.sft_run import SFTJob, SFTResult, SFTRun, run_sft
from promptgym.optimizers.finetune.errors import FineTuneError

logger = logging.getLogger("promptgym")

clock = time.monotonic
"""The time budget's clock (a test advances a fake one instead of sleeping)."""


class TimeBudget:
    """A stop request that turns itself on once ``seconds`` have passed (the SFT loop checks it between steps)."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else clock() + seconds
        self.reason = ""
        self._requested = False

    @property
    def requested(self) -> bool:
        if not self._requested and self.deadline is not None and clock() >= self.deadline:
            self._requested, self.reason = True, "max_train_seconds"
        return self._requested

    @requested.setter
    def requested(self, value: bool) -> None:
        self._requested = value

    def request(self, reason: str = "requested") -> None:
        self._requested, self.reason = True, reason


def lora_settings(lora: Any) -> LoraSettings:
    """``lora`` (a ``LoraSettings``, a dict such as ``{"r": 8}``, or None for the defaults) as LoraSettings."""
    return lora if isinstance(lora, LoraSettings) else LoraSettings(**(lora or {}))


def sft_settings(**settings: Any) -> SFTSettings:
    """SFTSettings, or a FineTuneError that names the optimizer (pydantic names the field)."""
    try:
        return SFTSettings(**settings)
    except Exception as error:  # noqa: BLE001 - pydantic names the field; say which optimizer it was
        raise FineTuneError(f"FineTune: bad SFT setting: {error}") from None


def check_base_model(model: str, given: bool) -> None:
    """``model`` can be trained here (a BaseModelError if not): a given ``base_model=`` is resolved, a
    Generator's own model string must name weights on this machine."""
    if given:
        resolve_base_model(model)
    else:
        check_trainable_string(model)


def check_trainable_string(model: str) -> None:
    """A Generator's own model string must name weights on this machine (``local/...``, a folder, a GGUF)."""
    path = Path(model).expanduser()
    if path.is_dir() or path.suffix == ".gguf":
        return
    if not model.startswith("local/"):
        raise BaseModelError(f"{model!r} is not a local/... model")


def measure_sft_step(settings: SFTSettings) -> float:
    """Load the base model with its adapters and time one step on ``settings.train_file``."""
    job = SFTJob.prepare(settings, seed=0, name="step-time")  # torch and transformers load here
    try:
        return job.measure_step_seconds()
    finally:
        job.release()


def run_sft_job(settings: SFTSettings, folder: Path, seed: int, name: str, max_seconds: float | None,
                on_event: EventSink) -> SFTResult:
    """Prepare and run one SFT job; under a time budget, stop at it and finish from the last checkpoint.

    ``n_epochs="auto"`` settings plan their steps to fill their own ``max_train_seconds`` (``max_seconds`` is
    then None), stop early on the validation rows' loss and export the best checkpoint
    (:class:`promptgym.finetune.sft_run.SFTRun`); a resumed run keeps the plan it saved.

    A folder with a checkpoint and no finished model resumes (a killed ``fit()`` loses at most the
    step in flight). Runs in a worker thread: torch releases the GIL, the event loop goes on.
    """
    job = SFTJob.prepare(settings, seed=seed, name=name)
    if max_seconds is not None:
        step_seconds = job.measure_step_seconds()
        if step_seconds > max_seconds:
            raise FineTuneError(f"FineTune: max_train_seconds={max_seconds:g} is less than one SFT step, measured at "
                                f"{step_seconds:.1f} s on this machine (batch_size={settings.batch_size}); give at "
                                f"least {math.ceil(step_seconds * 2)} s, or a smaller batch_size or max_length")
    resume = last_checkpoint(folder / "checkpoints") is not None
    stop = TimeBudget(max_seconds)
    try:
        return run_sft(job, folder, on_event=on_event, resume=resume, stop=stop)  # type: ignore[arg-type]
    except TrainingInterrupted:
        if stop.reason != "max_train_seconds":
            raise
    logger.info("FineTune: max_train_seconds=%g reached; keeping the last checkpoint", max_seconds)
    progress = read_progress(last_checkpoint(folder / "checkpoints"))  # type: ignore[arg-type]
    return SFTRun(job, folder, on_event).finish(progress)


__all__ = ["MAX_EPOCHS", "BaseModelError", "TimeBudget", "check_base_model", "lora_settings", "measure_sft_step",
           "run_sft_job", "sft_settings"]
