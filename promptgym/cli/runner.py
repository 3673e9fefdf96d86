"""Run a prompt-learning job into its run folder: baseline, fit, checkpoints, artifacts; resume.

    run = RunFolder.create(runs_dir, config.job.name)
    asyncio.run(execute(run, config, masker, listeners=[renderer]))
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import logging
import math
import os
import signal
import time
from typing import Any, Iterator

from promptgym.cli.artifacts import failure_counts, write_artifacts, write_failure_summary
from promptgym.cli.build import Job, build_job
from promptgym.cli.config import JobConfig
from promptgym.cli.process_identity import process_identity
from promptgym.cli.run_loggers import with_run_loggers
from promptgym.cli.recorder import Listener, RunRecorder
from promptgym.cli.runs import SESSION_CALLS, RunFolder
from promptgym.cli.secrets import Masker
from promptgym.core.atomic import atomic_write_text, read_json
from promptgym.core.events import ArtifactsWritten, Evaluated, Resumed, RunFinished, RunStarted
from promptgym.lm.usage import LEDGER, Usage
from promptgym.stats import Evaluation
from promptgym.training.callback import Callback

logger = logging.getLogger("promptgym")


class AllExamplesFailed(RuntimeError):
    """Every example of an evaluation failed: the model (or task app) gives nothing to learn from."""


class FailureTally(Callback):
    """Counts the examples that failed (``example_failed`` events), keeping the last error."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0
        self.last_error = ""

    def on_event(self, event: Any) -> None:
        if event["event"] == "example_failed":
            self.failed += 1
            self.last_error = f"{event['split']} example {event['index']}: {event['error']}"


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
    """Score the held-out split; every example failing is :class:`AllExamplesFailed`, not a score of 0."""
    split, x, y = eval_split(job)
    tally = FailureTally()
    logs = await job.program.evaluate(x, y, batch_size=job.config.training.validation_batch_size, verbose=0,
                                      callbacks=[recorder, tally], executor=executor)
    interval = {"reward_interval": [logs.interval().low, logs.interval().high]} \
        if isinstance(logs, Evaluation) and logs.n else {}
    recorder.emit(Evaluated(label=label, split=split, size=len(x), logs={**logs, **interval}))
    statistics = {"statistics": logs.statistics()} if isinstance(logs, Evaluation) else {}
    result = {"split": split, "size": len(x), **logs, **statistics, "failures": tally.failed}
    if len(x) and tally.failed >= len(x):
        recorder.run.update_status(**{label if label != "best" else "final": result})
        raise AllExamplesFailed(f"every {split} example failed in the {label} evaluation ({tally.failed} of {len(x)}); "
                                f"nothing to {'train from' if label == 'baseline' else 'keep'}. Last: {tally.last_error}")
    return result


def usable_evaluation(entry: Any) -> bool:
    """A stored evaluation that ran and had at least one example succeed (a failed one runs again on resume)."""
    return isinstance(entry, dict) and not (entry.get("size") and entry.get("failures", 0) >= entry["size"])


def resume_point(run: RunFolder, program: Any) -> tuple[int, int, str, str]:
    """(epoch, step, checkpoint used, a note on dropped history rows) after restoring the newest usable checkpoint.

    Rows of ``history.csv`` for epochs the checkpoint hasn't finished are dropped: those epochs run again.
    """
    path, _ = run.usable_checkpoint()  # the CLI said which one before asking to resume
    epoch, step = restore_checkpoint(program, path) if path is not None else (0, 0)
    dropped = drop_history_after(run.path / "history.csv", epoch)
    note = f"{dropped} history row(s) from epoch {epoch + 1} on dropped: they run again" if dropped else ""
    return epoch, step, str(path.relative_to(run.path)) if path else "(none)", note


def drop_history_after(path: Any, epochs_done: int) -> int:
    """Keep the rows of epochs ``< epochs_done``; returns how many were dropped."""
    if not path.is_file():
        return 0
    with path.open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows, fields = list(reader), reader.fieldnames or []
    kept = [row for row in rows if str(row.get("epoch", "")).isdigit() and int(row["epoch"]) < epochs_done]
    if len(kept) == len(rows):
        return 0
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(kept)
    atomic_write_text(path, buffer.getvalue())
    return len(rows) - len(kept)


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


def place_weight_runs(optimizer: Any, run_path: Any) -> None:
    """A FineTune stage without its own ``output_dir`` keeps its SFT runs inside the run folder."""
    for index, stage in enumerate(getattr(optimizer, "stages", None) or [optimizer]):
        if hasattr(stage, "output_dir") and stage.output_dir is None:
            stage.output_dir = str(run_path / "finetune" / f"stage-{index + 1}")


async def execute(run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None = None,
                  resume: bool = False, job: Job | None = None, backend: Any = None) -> dict[str, Any]:
    """Train, checkpointing every step and on interrupt; returns the final run status.

    ``backend`` (a :class:`promptgym.cli.backend.BackendSpec`) says where rollouts run; a Ray
    instance it starts is stopped, by process id, when the run ends however it ends.
    """
    from promptgym.training.callbacks_builtin import EarlyStopping

    listeners = with_run_loggers(listeners, config, run, masker)
    started, usage_start = time.time(), LEDGER.total()
    run.stamp = lambda: {SESSION_CALLS: LEDGER.total().calls - usage_start.calls}
    status = run.update_status(status="running", pid=os.getpid(), process=process_identity(os.getpid()), error=None,
                               runs_on=backend.describe() if backend is not None else None)
    executor = backend.executor() if backend is not None else None
    recorder = RunRecorder(run, masker, listeners)
    recorder.emit(RunStarted(run_id=run.id, resume=resume))
    training = FailureTally()
    try:
        with cancel_on_sigterm():
            job = job or await build_job(config)
            place_weight_runs(job.optimizer, run.path)
            job.program.compile(reward=job.reward, optimizer=job.optimizer, metrics=job.metrics)
            recorder.set_program(job.program)
            epoch, step = 0, 0
            if resume:
                epoch, step, checkpoint, note = resume_point(run, job.program)
                recorder.emit(Resumed(from_epoch=epoch, checkpoint=checkpoint, from_step=step))
                if note:
                    logger.warning("run %s: %s", run.id, note)
            if config.training.evaluate_baseline and not usable_evaluation(status.get("baseline")):
                status = run.update_status(baseline=await evaluate(job, recorder, "baseline", executor))
            callbacks: list[Any] = [recorder, training]
            if config.training.early_stopping:
                spec = config.training.early_stopping
                callbacks.append(EarlyStopping(monitor=spec.monitor, patience=spec.patience, min_delta=spec.min_delta))
            await job.program.fit(**fit_arguments(job, epoch, callbacks, initial_step=step, executor=executor))
            final = await evaluate(job, recorder, "best", executor)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if recorder.program is not None and recorder.program.training_state is not None:
            recorder.save_checkpoint("interrupted")
        finish(run, recorder, started, usage_start, training, status="interrupted")
        raise
    except BaseException as error:
        status = finish(run, recorder, started, usage_start, training, status="failed",
                        error=masker.mask(f"{type(error).__name__}: {error}"))
        write_failure_summary(run, status)
        raise
    finally:
        if executor is not None:
            await executor.close()
    status = finish(run, recorder, started, usage_start, training, status="writing_artifacts", final=final,
                    announce=False)
    job.program.save(str(run.path / "best_program.json"))
    write_artifacts(run, job, status)
    recorder.emit(ArtifactsWritten(files=sorted(p.name for p in run.path.iterdir() if p.is_file())))
    status = run.update_status(status="completed")
    announce_finish(recorder, status)
    return status


def finish(run: RunFolder, recorder: RunRecorder, started: float, usage_start: Usage, training: FailureTally,
           announce: bool = True, **changes: Any) -> dict[str, Any]:
    """Record the run's time, LM calls and failures: this session's, plus earlier sessions' read from the
    event log (so a session killed before it could record its own still counts)."""
    earlier = run.session_totals()[:-1]
    session = LEDGER.total().minus(usage_start)
    previous = run.status()
    status = run.update_status(
        **changes, pid=None, process=None, finished=time.time(),
        elapsed_s=round(sum(s["elapsed_s"] for s in earlier) + time.time() - started, 2),
        lm_calls=int(sum(s["lm_calls"] for s in earlier)) + session.calls,
        lm_failures=previous.get("lm_failures", 0) + session.failures,
        training_failures=previous.get("training_failures", 0) + training.failed,
    )
    status = run.update_status(failures=failure_counts(status))
    if announce:
        announce_finish(recorder, status)
    return status


def announce_finish(recorder: RunRecorder, status: dict[str, Any]) -> None:
    recorder.emit(RunFinished(status=status["status"], error=status.get("error"), elapsed_s=status["elapsed_s"],
                              lm_calls=status["lm_calls"]))
