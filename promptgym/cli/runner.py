"""Run a prompt-learning job into its run folder: baseline, fit, checkpoints, artifacts; resume.

    run = RunFolder.create(runs_dir, config.job.name)
    asyncio.run(execute(run, config, masker, listeners=[renderer]))
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import time
from typing import Any, Iterator

from promptgym.cli.artifacts import write_artifacts
from promptgym.cli.build import Job, build_job
from promptgym.cli.config import JobConfig
from promptgym.cli.recorder import Listener, RunRecorder
from promptgym.cli.runs import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.core.atomic import read_json
from promptgym.core.events import ArtifactsWritten, Evaluated, Resumed, RunFinished, RunStarted
from promptgym.lm.usage import LEDGER
from promptgym.stats import Evaluation


def eval_split(job: Job) -> tuple[str, Any, Any]:
    """The held-out set for baseline vs best: test, else validation, else fit()'s validation tail."""
    data = job.data
    if data.x_test is not None and len(data.x_test):
        return "test", data.x_test, data.y_test
    if data.x_val is not None and len(data.x_val):
        return "validation", data.x_val, data.y_val
    split = job.config.data.validation_split if job.config.data else 0.0
    cut = len(data.x_train) - int(math.floor(len(data.x_train) * split))
    if cut < len(data.x_train):
        return "validation", data.x_train[cut:], data.y_train[cut:]
    return "train", data.x_train, data.y_train


def restore_checkpoint(program: Any, path: Any) -> tuple[int, int]:
    """Variables, optimizer and trainer state from a checkpoint; returns the (epoch, step) to resume at.

    Checkpoints are written after every step, so a kill loses at most the step in flight; a checkpoint
    without a trainer state (written by an older version) resumes at the start of the next epoch.
    """
    saved = read_json(path)
    program.set_variables(saved["variables"], source=str(path))
    state = program.training_state
    state.optimizer.set_state(saved.get("optimizer_state"))
    state.restored = saved.get("trainer_state")
    position = (state.restored or {}).get("position") or {"epoch": state.optimizer.epochs_done, "step": 0}
    return int(position["epoch"]), int(position["step"])


@contextlib.contextmanager
def cancel_on_sigterm() -> Iterator[None]:
    """SIGTERM (a detached run being stopped) cancels the run like Ctrl-C does."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    try:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)  # type: ignore[union-attr]
    except (NotImplementedError, RuntimeError, ValueError):
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def evaluate(job: Job, recorder: RunRecorder, label: str, executor: Any = None) -> dict[str, Any]:
    split, x, y = eval_split(job)
    logs = await job.program.evaluate(x, y, batch_size=job.config.training.validation_batch_size, verbose=0,
                                      executor=executor)
    recorder.emit(Evaluated(label=label, split=split, size=len(x), logs=logs))
    statistics = {"statistics": logs.statistics()} if isinstance(logs, Evaluation) else {}
    return {"split": split, "size": len(x), **logs, **statistics}


def fit_arguments(job: Job, initial_epoch: int, callbacks: list[Any], initial_step: int = 0,
                  executor: Any = None) -> dict[str, Any]:
    training, data = job.config.training, job.data
    arguments: dict[str, Any] = dict(
        x=data.x_train, y=data.y_train, epochs=training.epochs, batch_size=training.batch_size,
        minibatch_size=training.minibatch_size, validation_batch_size=training.validation_batch_size,
        validation_freq=training.validation_freq, shuffle=training.shuffle, seed=job.config.job.seed,
        max_errors=training.max_errors, initial_epoch=initial_epoch, initial_step=initial_step, callbacks=callbacks,
        verbose=0, executor=executor,
    )
    if data.x_val is not None and len(data.x_val):
        arguments["validation_data"] = (data.x_val, data.y_val)
    else:
        arguments["validation_split"] = job.config.data.validation_split if job.config.data else 0.0
    return arguments


async def execute(run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None = None,
                  resume: bool = False, job: Job | None = None, backend: Any = None) -> dict[str, Any]:
    """Train, checkpointing every epoch and on interrupt; returns the final run status.

    ``backend`` (a :class:`promptgym.cli.backend.BackendSpec`) says where rollouts run; a Ray
    instance it starts is stopped, by process id, when the run ends however it ends.
    """
    from promptgym.training.callbacks_builtin import EarlyStopping

    started, usage_start = time.time(), LEDGER.total().calls
    status = run.update_status(status="running", pid=os.getpid(), error=None,
                               runs_on=backend.describe() if backend is not None else None)
    executor = backend.executor() if backend is not None else None
    recorder = RunRecorder(run, masker, listeners)
    recorder.emit(RunStarted(run_id=run.id, resume=resume))
    try:
        with cancel_on_sigterm():
            job = job or await build_job(config)
            job.program.compile(reward=job.reward, optimizer=job.optimizer, metrics=job.metrics)
            recorder.set_program(job.program)
            epoch, step = restore_checkpoint(job.program, run.last_checkpoint) \
                if resume and run.last_checkpoint.is_file() else (0, 0)
            if resume:
                recorder.emit(Resumed(from_epoch=epoch, checkpoint=str(run.last_checkpoint.relative_to(run.path)),
                                      from_step=step))
            if config.training.evaluate_baseline and status.get("baseline") is None:
                status = run.update_status(baseline=await evaluate(job, recorder, "baseline", executor))
            callbacks: list[Any] = [recorder]
            if config.training.early_stopping:
                spec = config.training.early_stopping
                callbacks.append(EarlyStopping(monitor=spec.monitor, patience=spec.patience, min_delta=spec.min_delta))
            await job.program.fit(**fit_arguments(job, epoch, callbacks, initial_step=step, executor=executor))
            final = await evaluate(job, recorder, "best", executor)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if recorder.program is not None and recorder.program.training_state is not None:
            recorder.save_checkpoint("interrupted")
        finish(run, recorder, started, usage_start, status="interrupted")
        raise
    except BaseException as error:
        finish(run, recorder, started, usage_start, status="failed", error=masker.mask(f"{type(error).__name__}: {error}"))
        raise
    finally:
        if executor is not None:
            await executor.close()
    status = finish(run, recorder, started, usage_start, status="writing_artifacts", final=final, announce=False)
    job.program.save(str(run.path / "best_program.json"))
    write_artifacts(run, job, status)
    recorder.emit(ArtifactsWritten(files=sorted(p.name for p in run.path.iterdir() if p.is_file())))
    status = run.update_status(status="completed")
    announce_finish(recorder, status)
    return status


def finish(run: RunFolder, recorder: RunRecorder, started: float, usage_start: int, announce: bool = True,
           **changes: Any) -> dict[str, Any]:
    """Record time and LM calls of this session (added to earlier sessions of a resumed run)."""
    previous = run.status()
    status = run.update_status(
        **changes, pid=None, finished=time.time(),
        elapsed_s=round(previous.get("elapsed_s", 0.0) + time.time() - started, 2),
        lm_calls=previous.get("lm_calls", 0) + LEDGER.total().calls - usage_start,
    )
    if announce:
        announce_finish(recorder, status)
    return status


def announce_finish(recorder: RunRecorder, status: dict[str, Any]) -> None:
    recorder.emit(RunFinished(status=status["status"], error=status.get("error"), elapsed_s=status["elapsed_s"],
                              lm_calls=status["lm_calls"]))
