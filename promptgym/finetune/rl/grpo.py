"""Reinforcement learning with GRPO and LoRA on a CPU: a task's rewards in, a ``local/<name>`` model out.

    job = RLJob.prepare(RLSettings(base_model="local/smollm2-135m-instruct", iterations=30))
    result = await job.run(environment, "runs/acronyms-rl")      # an Environment, e.g. a TaskAppEnvironment
    result.model_id, result.eval_reward_before, result.eval_reward_after

Each iteration rolls out ``batch_size`` training seeds ``group_size`` times against the policy server (the
current weights, sampled at ``temperature``), turns each group's rewards into advantages, and takes
``updates_per_batch`` optimiser steps on the tokens the server sampled. Evaluation is greedy, one rollout
per seed: on the test seeds before and after training, on the validation seeds every ``eval_every``
iterations. Checkpoints (adapter, optimiser, schedule, RNG, progress) come every ``save_steps`` iterations,
on a stop request and at the end; ``resume=True`` continues from the newest.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from promptgym.core.atomic import atomic_write_json
from promptgym.core.events import Event, RLEvaluation, RLIteration, RLStarted, RolloutFailedEvent
from promptgym.finetune.base_model import BaseModelSource, load_base_model, resolve_base_model
from promptgym.finetune.device import DevicePlan, plan_device
from promptgym.finetune.lora import add_lora, parameter_counts
from promptgym.finetune.loop import EventSink, ignore_event
from promptgym.runs.stop import StopRequest
from promptgym.finetune.rl.environment import Environment
from promptgym.finetune.rl.finish import FINAL_STATUS_FILE, RLResult, plot_rewards, summary_markdown
from promptgym.finetune.rl.policy_server import PolicyServer
from promptgym.finetune.rl.rollouts import (
    RolloutResult,
    check_policy_called,
    evaluation_reward,
    group_results,
    iteration_tasks,
    run_rollouts,
    training_rows,
)
from promptgym.finetune.rl.settings import RLSettings
from promptgym.finetune.rl.update import TrainingRow, grpo_update
from promptgym.finetune.weight_run import StatusSink, WeightRun

HISTORY_COLUMNS = ("iteration", "mean_reward", "reward_spread", "zero_signal_groups", "groups", "failed_rollouts",
                   "eval_reward", "loss", "kl", "clip_fraction", "lr", "completion_tokens", "tokens_per_s",
                   "rollout_s", "update_s", "seconds", "elapsed_s")


class RLAborted(RuntimeError):
    """Too many rollouts failed (``max_errors``), or every rollout of an iteration did: the task app is broken."""


class _Stopped(Exception):
    """A stop was requested while rollouts were in flight."""


@dataclass
class SeedSplits:
    """The seeds a run uses: trains on ``train``, evaluates on ``validation`` during and ``test`` before/after."""

    train: list[int]
    validation: list[int] = field(default_factory=list)
    test: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, splits: dict[str, list[int]]) -> "SeedSplits":
        if not splits.get("train"):
            raise ValueError("the task has no training seeds (its splits need a non-empty 'train')")
        return cls(list(splits["train"]), list(splits.get("validation") or []), list(splits.get("test") or []))

    @property
    def held_out(self) -> tuple[str, list[int]]:
        """Where before/after is measured: the test seeds, else the validation seeds, else the training seeds."""
        for name in ("test", "validation", "train"):
            if getattr(self, name):
                return name, getattr(self, name)
        return "train", self.train


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


class RLJob:
    """A prepared RL job: the base model with fresh adapters, its tokenizer."""

    def __init__(self, settings: RLSettings, source: BaseModelSource, model: Any, tokenizer: Any, seed: int,
                 name: str, plan: DevicePlan | None = None) -> None:
        self.settings, self.source, self.model, self.tokenizer, self.seed, self.name = (
            settings, source, model, tokenizer, seed, name)
        self.plan = plan or DevicePlan(device="cpu", compute="fp32")
        self.trainable_parameters, self.total_parameters = parameter_counts(model)

    @classmethod
    def prepare(cls, settings: RLSettings, seed: int | None = None, name: str = "rl") -> "RLJob":
        """Load the base model (raises BaseModelError, LoraTargetError) and add the adapters."""
        seed = settings.seed if settings.seed is not None else (seed or 0)
        # "auto" keeps the CPU in fp32: the update's ratio compares the sampled and the scored log-probabilities,
        # which bf16 rounds apart, and on 2 cores sampling, not the matrix products, sets the pace
        plan = plan_device(settings.device, settings.precision, cpu_bf16=False)
        source = resolve_base_model(settings.base_model)
        model, tokenizer = load_base_model(source, plan=plan)
        return cls(settings, source, add_lora(model, settings.lora, seed), tokenizer, seed, name, plan)

    @property
    def total_steps(self) -> int:
        return self.settings.iterations * self.settings.updates_per_batch

    def release(self) -> None:
        """Drop the model from memory (before an export, which loads the weights afresh)."""
        self.model = None
        gc.collect()

    async def run(self, environment: Environment, output_dir: str | Path, on_event: EventSink = ignore_event,
                  status: StatusSink | None = None, resume: bool = False, stop: StopRequest | None = None,
                  splits: SeedSplits | None = None) -> RLResult:
        """Train against ``environment`` (continuing from the last checkpoint when ``resume``), export, register.

        ``status`` takes keyword changes to the run's status (default: ``output_dir/run.json``). Raises
        TrainingInterrupted, after a checkpoint, when ``stop`` is requested; RLAborted past ``max_errors``.
        """
        run = RLRun(self, environment, splits or SeedSplits.of(environment.splits), output_dir, on_event, status, stop)
        return await run.run_async(resume)  # type: ignore[return-value]


class RLRun(WeightRun):
    """One session of an RL run on the skeleton: the policy server, the iterations, the evaluations."""

    method = "rl"
    step_key = "iteration"
    done_key = "iterations_done"
    history_columns = HISTORY_COLUMNS
    job: RLJob
    settings: RLSettings

    def __init__(self, job: RLJob, environment: Environment, splits: SeedSplits, folder: str | Path,
                 on_event: EventSink = ignore_event, status: StatusSink | None = None,
                 stop: StopRequest | None = None) -> None:
        super().__init__(job, folder, on_event, status, stop)
        self.environment, self.splits = environment, splits
        self.server: PolicyServer | None = None
        self.failed_total = 0
        self.rows: list[dict[str, Any]] = []

    @property
    def units(self) -> int:
        return self.settings.iterations

    def running_status(self) -> dict[str, Any]:
        return {"iterations": self.settings.iterations}

    def fresh_extra(self) -> dict[str, Any]:
        return {"evaluations": [], "groups": 0, "zero_signal_groups": 0, "failed_rollouts": 0}

    def started_event(self, resume: bool) -> Event:
        assert self.server is not None
        settings = self.settings
        return RLStarted(
            base_model=settings.base_model, environment=getattr(self.environment, "name", "task"),
            iterations=settings.iterations, group_size=settings.group_size, batch_size=settings.batch_size,
            train_seeds=len(self.splits.train), validation_seeds=len(self.splits.validation),
            test_seeds=len(self.splits.test), trainable_parameters=self.job.trainable_parameters,
            policy_url=self.server.base_url, resume_from_iteration=self.progress.step if resume else None)

    async def train_steps_async(self) -> None:
        job, settings = self.job, self.settings
        self.failed_total = int(self.progress.extra.get("failed_rollouts", 0))
        self.server = PolicyServer(job.model, job.tokenizer, settings.max_new_tokens, settings.temperature, seed=job.seed,
                                   autocast=job.plan.autocast)
        try:
            await self.server.start()
            self.on_event(self.started_event(self.resumed))
            await self._train()
        finally:
            await self.server.stop()

    async def _train(self) -> None:
        extra = self.progress.extra
        if "eval_before" not in extra:
            extra["eval_before"] = await self._evaluate("before", self.progress.step)
        for iteration in range(self.progress.step, self.settings.iterations):
            self.stop_if_requested()
            try:
                row = await self._iteration(iteration)
            except _Stopped:
                self.interrupt()
            number = iteration + 1
            self.progress.step = number
            if self.stop.requested:  # before the evaluation: a stop should not wait for it
                self.record(row)
                self.interrupt()
            if (self.settings.eval_every and self.splits.validation and number % self.settings.eval_every == 0
                    and number < self.settings.iterations):
                row["eval_reward"] = (await self._evaluate("during", number))["reward"]
            self.record(row)
            self.save_if_due()
        if "eval_after" not in extra:
            extra["eval_after"] = await self._evaluate("after", self.progress.step)

    async def _iteration(self, iteration: int) -> dict[str, Any]:
        settings, server = self.settings, self.server
        assert server is not None
        started = time.perf_counter()
        server.reseed(self.job.seed * 1_000_003 + iteration)
        tasks = iteration_tasks(self.splits.train, settings.batch_size, settings.group_size, self.job.seed, iteration)
        results = await self._rollouts(tasks, greedy=False, iteration=iteration + 1)
        rollout_s = time.perf_counter() - started
        rows, stats = training_rows(group_results(results, settings.group_size), settings.scale_rewards)
        extra = self.progress.extra
        extra["groups"] = extra.get("groups", 0) + stats.groups
        extra["zero_signal_groups"] = extra.get("zero_signal_groups", 0) + stats.zero_signal_groups
        if stats.failed_rollouts == len(results):
            raise RLAborted(f"every rollout of iteration {iteration + 1} failed ({len(results)}); last: {results[-1].error}")
        measured = await asyncio.to_thread(self._update, rows) if rows else {}
        extra["last_mean_reward"] = _round(stats.mean_reward)
        seconds = time.perf_counter() - started
        row = {"iteration": iteration + 1, "mean_reward": _round(stats.mean_reward),
               "reward_spread": _round(stats.reward_spread), "zero_signal_groups": stats.zero_signal_groups,
               "groups": stats.groups, "failed_rollouts": stats.failed_rollouts,
               "loss": _round(measured.get("loss"), 6), "kl": _round(measured.get("kl"), 6),
               "clip_fraction": _round(measured.get("clip_fraction")),
               "lr": float(f"{measured['lr']:.6g}") if measured.get("lr") is not None else None,
               "completion_tokens": stats.completion_tokens,
               "tokens_per_s": round(stats.completion_tokens / rollout_s, 1) if rollout_s > 0 else None,
               "rollout_s": round(rollout_s, 3), "update_s": round(measured.get("update_s", 0.0), 3),
               "seconds": round(seconds, 3), "elapsed_s": round(self.elapsed, 2)}
        self.on_event(RLIteration(iterations=settings.iterations, updated=bool(rows),
                                  **{key: value for key, value in row.items() if key not in ("eval_reward",)}))
        return row

    def _update(self, rows: list[TrainingRow]) -> dict[str, Any]:
        assert self.server is not None and self.training is not None
        with self.server.lock, self.job.plan.autocast():
            return grpo_update(self.job.model, self.training.optimizer, self.training.scheduler, rows, self.settings,
                               self.job.tokenizer.pad_token_id)

    async def _rollouts(self, tasks: Sequence[tuple[int, str]], greedy: bool, iteration: int) -> list[RolloutResult]:
        """Run ``tasks``, watching for a stop request; failures are logged and counted against ``max_errors``."""
        assert self.server is not None
        gathered = asyncio.ensure_future(run_rollouts(self.environment, self.server, tasks, greedy, iteration))
        while True:
            done, _ = await asyncio.wait({gathered}, timeout=0.2)
            if done:
                break
            if self.stop.requested:
                gathered.cancel()
                await asyncio.gather(gathered, return_exceptions=True)
                raise _Stopped
        results = gathered.result()
        for result in results:
            if result.error is not None:
                self.failed_total += 1
                self.on_event(RolloutFailedEvent(iteration=iteration, seed=result.seed, split=result.split,
                                                 error=result.error))
        self.progress.extra["failed_rollouts"] = self.failed_total
        check_policy_called(results, f"the evaluation at iteration {iteration}" if greedy else f"iteration {iteration}")
        limit = self.settings.max_errors
        if limit is not None and self.failed_total > limit:
            raise RLAborted(f"{self.failed_total} rollouts failed, more than max_errors = {limit}; last: "
                            f"{next(r.error for r in reversed(results) if r.error) if any(r.error for r in results) else ''}")
        return results

    async def _evaluate(self, label: str, iteration: int) -> dict[str, Any]:
        split, seeds = ("validation", self.splits.validation) if label == "during" else self.splits.held_out
        try:
            results = await self._rollouts([(seed, split) for seed in seeds], greedy=True, iteration=iteration)
        except _Stopped:
            self.interrupt()
        reward, failures = evaluation_reward(results)
        entry = {"iteration": iteration, "label": label, "split": split, "size": len(seeds), "reward": _round(reward),
                 "failures": failures}
        self.progress.extra.setdefault("evaluations", []).append(entry)
        self.on_event(RLEvaluation(**entry))
        return entry

    # -- the finish -------------------------------------------------------------------------

    def before_release(self) -> dict[str, str]:
        self.rows = self.history.rows()
        plot = plot_rewards(self.rows, self.progress.extra.get("evaluations", []), self.folder / "plots" / "reward.png",
                            title=f"{self.settings.base_model} GRPO")
        return {"reward_plot": str(plot)} if plot else {}

    def _evaluation(self, label: str) -> dict[str, Any]:
        return self.progress.extra.get(f"eval_{label}") or {}

    def registry_details(self) -> dict[str, Any]:
        return {"iterations": self.progress.step, "group_size": self.settings.group_size,
                "eval_reward_before": self._evaluation("before").get("reward"),
                "eval_reward_after": self._evaluation("after").get("reward"), "lora_r": self.settings.lora.r}

    def result(self, **base: Any) -> RLResult:
        extra = self.progress.extra
        return RLResult(**base, iterations=self.progress.step, final_reward=extra.get("last_mean_reward"),
                        eval_reward_before=self._evaluation("before").get("reward"),
                        eval_reward_after=self._evaluation("after").get("reward"), groups=extra.get("groups", 0),
                        zero_signal_groups=extra.get("zero_signal_groups", 0),
                        failed_rollouts=extra.get("failed_rollouts", 0))

    def write_outputs(self, result: RLResult) -> None:
        atomic_write_json(self.folder / FINAL_STATUS_FILE, result.final_status())
        super().write_outputs(result)

    def summary_markdown(self, result: RLResult) -> str:
        return summary_markdown(self.job, result, self.rows, self.progress)

    def finished_status(self, result: RLResult) -> dict[str, Any]:
        final = {key: value for key, value in result.final_status().items() if key != "checkpoints"}
        return {**final, "iterations_done": self.progress.step, "checkpoints": result.checkpoints,
                "files": result.files,
                "elapsed_s": result.elapsed_s, "peak_rss_mb": result.peak_rss_mb, "groups": result.groups,
                "zero_signal_groups": result.zero_signal_groups, "failed_rollouts": result.failed_rollouts,
                "peak_gpu_memory_mb": result.peak_gpu_memory_mb}
