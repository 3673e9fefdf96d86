"""Run a prompt-learning job into its run folder: baseline, fit, checkpoints, artifacts; resume.

    run = RunFolder.create(runs_dir, config.job.name)
    asyncio.run(execute(run, config, masker, listeners=[renderer]))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import Any

from promptgym.cli.artifacts import failure_counts, write_artifacts, write_budget_summary, write_failure_summary
from promptgym.cli.build import RunPlan, build_run_plan
from promptgym.cli.config import JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.runs.events import Listener
from promptgym.training.run_recorder import RunRecorder
from promptgym.cli.run_loggers import with_run_loggers
from promptgym.runs.folder import SESSION_CALLS, RunFolder
from promptgym.cli.secrets import Masker
from promptgym.runs.attempt import RunAttempt
from promptgym.core.events import ArtifactsWritten, Evaluated, Event, Resumed
from promptgym.lm.spend import SpendCap, SpendCapReached
from promptgym.lm.usage import LEDGER, Usage
from promptgym.rollouts.executor import Executor
from promptgym.stats import Evaluation
from promptgym.training.callback import Callback
from promptgym.training.callbacks_builtin import EarlyStopping
from promptgym.training.fit_folder import resume_point

logger = logging.getLogger("promptgym")


class AllExamplesFailed(RuntimeError):
    """Every example of an evaluation failed: the model (or task app) gives nothing to learn from."""


class FailureTally(Callback):
    """Counts the examples that failed (``example_failed`` events), keeping the last error."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0
        self.last_error = ""

    def on_event(self, event: Event) -> None:
        if event["event"] == "example_failed":
            self.failed += 1
            self.last_error = f"{event['split']} example {event['index']}: {event['error']}"


def eval_split(job: RunPlan) -> tuple[str, Any, Any]:
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


async def evaluate(job: RunPlan, recorder: RunRecorder, label: str, executor: Executor | None = None) -> dict[str, Any]:
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


def fit_arguments(job: RunPlan, initial_epoch: int, callbacks: list[Callback], initial_step: int = 0,
                  executor: Executor | None = None) -> dict[str, Any]:
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


class PromptAccounting:
    """The LM calls, LM failures and failed examples a prompt-learning run adds to its final status: this
    session's, plus earlier sessions' (read from the event log, so a killed session's calls still count)."""

    SPEND = ("cost_usd", "saved_usd", "unpriced_calls")

    def __init__(self, run: RunFolder, training: FailureTally) -> None:
        self.run, self.training, self.usage_start = run, training, LEDGER.total()
        run.stamp = lambda: {SESSION_CALLS: LEDGER.total().calls - self.usage_start.calls}
        earlier = run.status() if (run.path / "run.json").exists() else {}
        self.spend_before = {key: earlier.get(key) or 0 for key in self.SPEND}
        """What earlier sessions of the run spent (their last status)."""

    def spent_usd(self) -> float:
        """Dollars the run has spent so far, all sessions."""
        return float(self.spend_before["cost_usd"]) + LEDGER.total().minus(self.usage_start).cost_usd

    def __call__(self, changes: dict[str, Any]) -> dict[str, Any]:
        earlier = self.run.session_totals()[:-1]
        session: Usage = LEDGER.total().minus(self.usage_start)
        previous = self.run.status()
        counts = {"lm_calls": int(sum(s["lm_calls"] for s in earlier)) + session.calls,
                  "lm_failures": previous.get("lm_failures", 0) + session.failures,
                  "training_failures": previous.get("training_failures", 0) + self.training.failed}
        spend = {key: self.spend_before[key] + getattr(session, key) for key in self.SPEND}
        return {**counts, **spend, "failures": failure_counts({**previous, **changes, **counts})}


async def train_program(job: RunPlan, session: RunAttempt, recorder: RunRecorder, training: FailureTally,
                        resume: bool, executor: Executor | None, spent_usd: float = 0.0) -> dict[str, Any] | None:
    """:func:`train_and_evaluate` under ``[budget] max_usd`` (counting what earlier sessions spent): None when
    the cap stopped it (the status says so; ``--resume`` goes on from the last checkpoint)."""
    max_usd = job.config.budget.max_usd
    cap = SpendCap(max_usd, spent_usd=spent_usd) if max_usd is not None else None
    try:
        with cap.active() if cap is not None else contextlib.nullcontext():
            final = await train_and_evaluate(job, session, recorder, training, resume, executor)
    except SpendCapReached as reached:  # outside fit() (the baseline or final evaluation)
        if reached.reason == "unpriced":
            raise ValueError(str(reached)) from None
        logger.warning("run %s: %s", session.run.id, reached)
        final = None
    if getattr(job.program, "stop_reason", None) == "max_usd" or final is None:
        session.run.update_status(stopped_by="max_usd", max_usd=max_usd)
        return None
    return final


async def train_and_evaluate(job: RunPlan, session: RunAttempt, recorder: RunRecorder, training: FailureTally,
                             resume: bool, executor: Executor | None) -> dict[str, Any] | None:
    """Compile, restore (on resume), evaluate the baseline, ``fit()``, evaluate the best: the final evaluation."""
    run, config = session.run, job.config
    job.optimizer.place_outputs(run.path / "finetune")  # a FineTune's SFT runs stay inside the run folder
    job.program.compile(reward=job.reward, optimizer=job.optimizer, metrics=job.metrics)
    recorder.set_program(job.program)
    epoch, step = 0, 0
    if resume:
        epoch, step, checkpoint, note = resume_point(run, job.program)
        recorder.emit(Resumed(from_epoch=epoch, checkpoint=checkpoint, from_step=step))
        if note:
            logger.warning("run %s: %s", run.id, note)
    if config.training.evaluate_baseline and not usable_evaluation(session.status.get("baseline")):
        run.update_status(baseline=await evaluate(job, recorder, "baseline", executor))
    callbacks: list[Callback] = [recorder, training]
    if config.training.early_stopping:
        spec = config.training.early_stopping
        callbacks.append(EarlyStopping(monitor=spec.monitor, patience=spec.patience, min_delta=spec.min_delta))
    job.program.stop_reason = None
    await job.program.fit(**fit_arguments(job, epoch, callbacks, initial_step=step, executor=executor))
    if job.program.stop_reason == "max_usd":  # the cap is reached: evaluating the best would cross it
        return None
    return await evaluate(job, recorder, "best", executor)


async def execute(run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None = None,
                  resume: bool = False, job: RunPlan | None = None,
                  execution: ExecutionSpec | None = None) -> dict[str, Any]:
    """Train, checkpointing every step and on interrupt; returns the final run status.

    ``execution`` says where rollouts run; a Ray instance it starts is stopped, by process id, when the run
    ends however it ends.
    """
    listeners = with_run_loggers(listeners, config, run, masker)
    training = FailureTally()
    accounting = PromptAccounting(run, training)
    session = RunAttempt(run, masker, listeners, job_type=config.job.type, resume=resume, accounting=accounting,
                         runs_on=execution.describe() if execution is not None else None)
    recorder = RunRecorder(run, session.events)
    executor = execution.executor() if execution is not None else None

    def save_interrupted() -> None:
        if recorder.program is not None and recorder.program.get_compile_config() is not None:
            recorder.save_checkpoint("interrupted")

    try:
        with session.ending(on_interrupt=save_interrupted, on_failure=lambda status: write_failure_summary(run, status)), \
                session.signals(asyncio.current_task()):
            job = job or await build_run_plan(config)
            final = await train_program(job, session, recorder, training, resume, executor, accounting.spent_usd())
    finally:
        if executor is not None:
            await executor.close()
    if final is None:  # stopped by max_usd: resumable from the last checkpoint, like an interrupted run
        job.program.save(str(run.path / "best_program.json"))
        status = session.finish(status="stopped_by_budget", announce=False)
        write_budget_summary(run, status)
        session.announce(status)
        return status
    status = session.finish(status="writing_artifacts", final=final, announce=False)
    job.program.save(str(run.path / "best_program.json"))
    write_artifacts(run, job, status)
    recorder.emit(ArtifactsWritten(files=sorted(p.name for p in run.path.iterdir() if p.is_file())))
    status = run.update_status(status="completed")
    session.announce(status)
    return status
