"""One weight-training run, the shape every weight flow (SFT, RL, the next one) is written in.

The skeleton (:class:`WeightRun`) owns what every flow does the same way, in TRL's shape: the optimiser and
its schedule, resume (``last.json``, else the newest complete ``step_NNNNNN``), checkpoint bookkeeping (the
one ``checkpoint()`` every copy goes through, the out-of-memory checkpoint), the run's status, the started
event, stop requests (the flag the CLI's SIGTERM / Ctrl-C handler sets) and the finish: export to GGUF, the
registry entry, ``summary.md``, the final status and the result. A flow supplies its step loop, its events
and its summary. A third trainer is one class::

    from dataclasses import dataclass
    from promptgym.core.events import Event
    from promptgym.finetune.weight_run import WeightRun, WeightRunResult

    @dataclass(kw_only=True)
    class MyResult(WeightRunResult):
        steps: int

    class MyRun(WeightRun):
        method = "my-method"                       # the registry entry's method

        @property
        def units(self) -> int:                    # how many steps the run takes (save_steps counts these)
            return self.job.total_steps

        def started_event(self, resume: bool) -> Event:
            return MyStarted(steps=self.units)

        def train_steps(self) -> None:             # the loop: from self.progress.step to the end
            while self.progress.step < self.units:
                loss = my_step(self.job.model, self.training)     # optimiser step on self.training.optimizer
                self.progress.step += 1
                self.record({"step": self.progress.step, "loss": loss})   # history.csv
                self.stop_if_requested()           # a stop request: checkpoint, status, TrainingInterrupted
                self.save_if_due()                 # every settings.save_steps

        def result(self, **base) -> MyResult:
            return MyResult(steps=self.progress.step, **base)

        def summary_markdown(self, result: MyResult) -> str:
            return f"# my run\\n\\n- Model: `{result.model_id}`\\n"

    result = MyRun(job, "runs/my-run").run(resume=False)   # job: a WeightJob (settings, model, plan...)

``tests/finetune/test_weight_run.py`` builds such a trainer on a tiny model and checks training, checkpoints,
stop and resume, status, events and the result. :class:`promptgym.finetune.sft_run.SFTRun` and
:class:`promptgym.finetune.rl.grpo.RLRun` are the two real ones (RL's loop is async: ``run_async``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NoReturn, Protocol

from promptgym.core.atomic import atomic_write_text
from promptgym.core.events import CheckpointSaved, Event, ModelExported, ModelRegistered
from promptgym.finetune.base_model import BaseModelSource
from promptgym.finetune.checkpoint import (
    Progress,
    TrainingParts,
    checkpoint_name,
    last_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from promptgym.finetune.device import DeviceOutOfMemory, DevicePlan, out_of_memory_message, peak_gpu_memory_mb
from promptgym.finetune.export import export_adapter, export_merged
from promptgym.finetune.history import COLUMNS, StepHistory
from promptgym.finetune.loop import EventSink, ignore_event, make_optimizer, peak_rss_mb
from promptgym.finetune.replicas import SingleProcess
from promptgym.finetune.settings import WeightTrainingSettings
from promptgym.lm.finetuned_models import FineTunedModel, register_finetuned_model
from promptgym.lm.usage import record_compute
from promptgym.runs.status import StatusFile
from promptgym.runs.stop import StopRequest, TrainingInterrupted

StatusSink = Any
"""A callable taking keyword changes to the run's status (a :class:`promptgym.runs.status.StatusFile`, or
``RunFolder.update_status``, which writes through one)."""


class WeightJob(Protocol):
    """What the skeleton needs of a prepared job (``SFTJob``, ``RLJob``)."""

    settings: WeightTrainingSettings
    source: BaseModelSource
    model: Any
    plan: DevicePlan
    seed: int
    name: str

    @property
    def total_steps(self) -> int: ...  # optimiser steps, for the learning-rate schedule

    def release(self) -> None: ...


@dataclass(kw_only=True)
class WeightRunResult:
    """What every finished weight run left; a flow's result adds its own numbers."""

    status: str
    model_id: str | None
    output_dir: Path
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    peak_rss_mb: float = 0.0
    peak_gpu_memory_mb: float | None = None


def default_model_name(job_name: str, output_dir: Path) -> str:
    """``ft-<job name>-<6 hex of the output folder>``: stable across resumes of the same run."""
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in job_name.lower()).strip("-.")[:40] or "model"
    digest = hashlib.sha256(str(output_dir.resolve()).encode()).hexdigest()[:6]
    return f"ft-{slug}-{digest}"


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def export_files(job: WeightJob, folder: Path, adapter_dir: Path, name: str, on_event: EventSink) -> dict[str, str]:
    """The GGUF files the settings ask for, in ``folder/export``."""
    export, files = job.settings.export, {}
    if export.merged != "none":
        path = export_merged(job.source, adapter_dir, folder / "export" / f"{name}-{export.merged}.gguf", export.merged, name)
        files["merged"] = str(path)
        on_event(ModelExported(part="merged", format=export.merged, path=str(path), size=_size(path)))
    if export.adapter and job.source.gguf is not None:
        path = export_adapter(job.source, adapter_dir, folder / "export" / f"{name}-lora-f32.gguf")
        files["adapter"] = str(path)
        on_event(ModelExported(part="adapter", format="f32", path=str(path), size=_size(path)))
    return files


class WeightRun:
    """One session of a weight run in ``folder``: the skeleton; subclasses supply the loop and the summary."""

    method: ClassVar[str] = "weights"
    step_key: ClassVar[str] = "step"  # what history rows and checkpoint entries count ("iteration" for RL)
    done_key: ClassVar[str] = "steps_done"  # the status key of the units done
    history_columns: ClassVar[tuple[str, ...]] = COLUMNS

    def __init__(self, job: WeightJob, folder: str | Path, on_event: EventSink = ignore_event,
                 status: StatusSink | None = None, stop: StopRequest | None = None, started: float | None = None,
                 replicas: SingleProcess | None = None) -> None:
        self.job, self.settings, self.folder = job, job.settings, Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.on_event, self.stop = on_event, stop or StopRequest()
        self.status = status or StatusFile(self.folder / "run.json")
        self.started = time.time() if started is None else started  # the session's start, for the elapsed time
        self.replicas = replicas or SingleProcess()
        self.history = StepHistory(self.folder / "history.csv", self.history_columns, key=self.step_key)
        self.progress = Progress(extra={"checkpoints": [], "elapsed_s": 0.0})
        self.elapsed_before = 0.0
        self.training: TrainingParts | None = None
        self.resumed = False  # whether this session continued from a checkpoint (set by begin)

    # -- what a flow supplies -------------------------------------------------------------

    @property
    def units(self) -> int:
        """The steps (iterations) the run takes: ``save_steps`` counts them, the status shows them."""
        return self.job.total_steps

    def running_status(self) -> dict[str, Any]:
        """The status keys written when a session starts, besides the skeleton's own."""
        return {"total_steps": self.units}

    def fresh_extra(self) -> dict[str, Any]:
        """Counters a fresh run starts ``progress.extra`` with (checkpoints and elapsed time are the skeleton's)."""
        return {}

    def checkpoint_entry(self) -> dict[str, Any]:
        """The entry of the checkpoint being written, in ``progress.extra["checkpoints"]`` and the status."""
        return {self.step_key: self.progress.step, "path": f"checkpoints/{checkpoint_name(self.progress.step)}"}

    def started_event(self, resume: bool) -> Event:
        raise NotImplementedError

    def train_steps(self) -> None:
        """The loop, from ``self.progress`` to the end (a synchronous flow)."""
        raise NotImplementedError

    async def train_steps_async(self) -> None:
        """The loop of an asynchronous flow (RL's rollouts); :meth:`run_async` drives it."""
        raise NotImplementedError

    def before_release(self) -> dict[str, str]:
        """At the finish, while the model is still loaded: samples, plots; returns files for the result."""
        return {}

    def registry_details(self) -> dict[str, Any]:
        return {"steps": self.progress.step}

    def exported_checkpoint(self) -> Path:
        """The checkpoint whose adapter is exported: the last one (a flow that keeps its best says which)."""
        checkpoint = last_checkpoint(self.folder / "checkpoints")
        assert checkpoint is not None, "the finish comes after the end checkpoint"
        return checkpoint

    def result(self, **base: Any) -> WeightRunResult:
        return WeightRunResult(**base)

    def summary_markdown(self, result: WeightRunResult) -> str:
        return f"# {self.method} run `{result.output_dir.name}`\n\n- Model: **`{result.model_id}`**\n"

    def write_outputs(self, result: WeightRunResult) -> None:
        """The files written from the result: ``summary.md`` (a flow may add its own)."""
        atomic_write_text(self.folder / "summary.md", self.summary_markdown(result))

    def finished_status(self, result: WeightRunResult) -> dict[str, Any]:
        """The status keys of a completed run."""
        return {key: value for key, value in vars(result).items() if key != "output_dir"}

    # -- the skeleton -----------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"local/{self.settings.model_name or default_model_name(self.job.name, self.folder)}"

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + time.time() - self.started

    def begin(self, resume: bool) -> Progress:
        """The optimiser, the checkpoint to continue from (or a fresh start), the RNG and the running status."""
        main, self.resumed = self.replicas.is_main, resume
        # read at every step: a run that plans its length as it goes (n_epochs="auto") decays to its planned end
        optimizer, scheduler = make_optimizer(self.job.model, self.settings, lambda: self.job.total_steps)
        self.training = TrainingParts(self.job.model, optimizer, scheduler)
        if resume:
            self.progress = load_checkpoint(self.folder / "checkpoints", self.training)
            if main:
                self.history.truncate_after(self.progress.step)
        else:
            self.progress = Progress(extra={"checkpoints": [], "elapsed_s": 0.0, **self.fresh_extra()})
            if main and self.history.path.is_file():  # a fresh run in a used folder starts a fresh history
                self.history.truncate_after(-1)
        self.replicas.seed_rng(self.job.seed, self.progress.step, resumed=resume)
        self.elapsed_before = float(self.progress.extra.get("elapsed_s", 0.0))
        self.status(status="running", model_id=None, planned_model_id=self.model_id, **self.running_status(),
                    **{self.done_key: self.progress.step}, checkpoints=self.progress.extra["checkpoints"],
                    **self.job.plan.record())
        return self.progress

    def record(self, row: dict[str, Any]) -> None:
        """One row of ``history.csv`` (written by the main copy only)."""
        if self.replicas.is_main:
            self.history.append(row)

    def checkpoint(self, reason: str) -> Path | None:
        """Save where training stands (on the main copy), and say so in the status and the events."""
        assert self.training is not None, "begin() first"
        extra, step = self.progress.extra, self.progress.step
        extra["elapsed_s"] = self.elapsed
        entry = self.checkpoint_entry()
        extra["checkpoints"] = [e for e in extra["checkpoints"] if e[self.step_key] != step] + [entry]
        main = self.replicas.is_main
        path = save_checkpoint(self.folder / "checkpoints", self.training, self.progress) if main else None
        self.replicas.report(path, {"step": step, "loss": entry.get("loss"), "reason": reason})
        self.status(**{self.done_key: step}, checkpoints=extra["checkpoints"])
        self.on_event(CheckpointSaved(path=entry["path"], step=step, reason=reason))
        return path

    def interrupt(self) -> NoReturn:
        """Checkpoint, mark the run interrupted and raise TrainingInterrupted (resume continues from it)."""
        path = self.checkpoint(f"stop ({self.stop.reason or 'requested'})")
        self.status(status="interrupted", elapsed_s=round(self.progress.extra["elapsed_s"], 2))
        raise TrainingInterrupted(self.progress.step, path)

    def stop_if_requested(self) -> None:
        """Between steps: a stop request (on any copy) ends the run here, after a checkpoint."""
        if self.replicas.any(self.stop.requested):
            self.interrupt()

    def save_if_due(self) -> None:
        """Every ``save_steps`` units, except the last (the end checkpoint comes after the final evaluation)."""
        step = self.progress.step
        if step % self.settings.save_steps == 0 and step < self.units:
            self.checkpoint("save_steps")

    def out_of_memory(self, batch_rows: int, longest: int) -> DeviceOutOfMemory:
        """After a step ran out of device memory: free it, checkpoint the steps done, and say what to lower."""
        assert self.training is not None
        self.training.optimizer.zero_grad(set_to_none=True)
        if self.job.plan.is_cuda:
            import torch  # deferred: a heavy import only the weight flows need

            torch.cuda.empty_cache()
        path = self.checkpoint("out of memory")
        return DeviceOutOfMemory(out_of_memory_message(self.job.plan, batch_rows, longest, path))

    def train(self, resume: bool) -> Progress:
        """Train (a synchronous flow) up to the end checkpoint; returns where it ended."""
        self.begin(resume)
        self.on_event(self.started_event(resume))
        started = time.perf_counter()
        try:
            self.train_steps()
        finally:
            record_compute(time.perf_counter() - started)
        self.checkpoint("end")
        return self.progress

    def run(self, resume: bool = False) -> WeightRunResult:
        """Train, then export and register the model (raises TrainingInterrupted on a stop request)."""
        self.train(resume)
        return self.finish()

    async def run_async(self, resume: bool = False) -> WeightRunResult:
        """:meth:`run` for a flow whose loop awaits (``train_steps_async``)."""
        self.begin(resume)
        started = time.perf_counter()
        try:
            await self.train_steps_async()
        finally:
            record_compute(time.perf_counter() - started)
        self.checkpoint("end")
        return self.finish()

    def finish(self, progress: Progress | None = None) -> WeightRunResult:
        """Export the last checkpoint, register the model, write summary.md and the final status.

        Every file it makes is derived from the last checkpoint and the history, so a run killed during the
        export resumes straight into it; ``progress`` (read from that checkpoint) finishes a run trained elsewhere.
        """
        self.progress = progress or self.progress
        extra, job = self.progress.extra, self.job
        made = self.before_release()
        rss, gpu_memory = peak_rss_mb(), peak_gpu_memory_mb(job.plan)
        job.release()
        name = self.model_id.removeprefix("local/")
        files = export_files(job, self.folder, self.exported_checkpoint(), name, self.on_event)
        entry = register_finetuned_model(FineTunedModel(
            name=name, base=self.settings.base_model, method=self.method, merged=files.get("merged"),
            adapter=files.get("adapter"), base_gguf=str(job.source.gguf) if job.source.gguf else None,
            run=str(self.folder.resolve()), details=self.registry_details()))
        self.on_event(ModelRegistered(model_id=entry.model_string, files=files))
        result = self.result(
            status="completed", model_id=entry.model_string, output_dir=self.folder, checkpoints=extra["checkpoints"],
            files={**files, **made}, elapsed_s=round(float(extra.get("elapsed_s", 0.0)), 2), peak_rss_mb=round(rss, 1),
            peak_gpu_memory_mb=None if gpu_memory is None else round(gpu_memory, 1))
        self.write_outputs(result)
        self.status(**self.finished_status(result), finished=time.time())
        return result
