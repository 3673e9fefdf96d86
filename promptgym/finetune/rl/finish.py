"""The end of an RL run: the reward curve, GGUF export, the registry entry, summary.md and the final status JSON.

Called by the run once its last checkpoint is written; every file it makes is derived from that checkpoint
and the run's history, so a run killed during the export resumes straight into it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_json, atomic_write_text
from promptgym.core.events import ModelRegistered
from promptgym.finetune.checkpoint import Progress, last_checkpoint
from promptgym.finetune.history import StepHistory
from promptgym.finetune.device import peak_gpu_memory_mb
from promptgym.finetune.loop import EventSink, peak_rss_mb
from promptgym.finetune import sft_finish
from promptgym.lm.finetuned_models import FineTunedModel, register_finetuned_model

logger = logging.getLogger("promptgym")
FINAL_STATUS_FILE = "final_status.json"


def plot_rewards(rows: list[dict[str, Any]], evaluations: list[dict[str, Any]], target: Path,
                 title: str = "reward") -> Path | None:
    """Mean training reward per iteration (with the groups' spread) and the greedy evaluations, as a PNG."""
    train = [(row["iteration"], row["mean_reward"], row.get("reward_spread") or 0.0) for row in rows
             if row.get("mean_reward") is not None]
    if not train and not evaluations:
        return None
    try:
        from promptgym.utils.plotting import _new_figure, save_figure
    except ImportError as error:  # pragma: no cover - matplotlib is part of the default install
        logger.warning("reward plot skipped: %s", error)
        return None
    figure = _new_figure(7, 4)
    axes = figure.add_subplot(1, 1, 1)
    if train:
        xs, ys, spread = [t[0] for t in train], [t[1] for t in train], [t[2] for t in train]
        axes.plot(xs, ys, label="train reward (mean of the iteration's rollouts)", color="#1f77b4", linewidth=1.2)
        axes.fill_between(xs, [y - s for y, s in zip(ys, spread)], [y + s for y, s in zip(ys, spread)],
                          color="#1f77b4", alpha=0.12, linewidth=0, label="within-group spread (std)")
    for label, color, marker in (("during", "#d62728", "o-"), ("before", "#2ca02c", "s"), ("after", "#2ca02c", "s")):
        points = [(e["iteration"], e["reward"]) for e in evaluations if e["label"] == label and e["reward"] is not None]
        if points:
            split = next(e["split"] for e in evaluations if e["label"] == label)
            shown = "eval reward" if label == "during" else f"{label} ({split})"
            axes.plot([p[0] for p in points], [p[1] for p in points], marker, color=color, label=f"{shown}, greedy")
    axes.set_xlabel("iteration")
    axes.set_ylabel("reward")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, target)


def _reward(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def summary_markdown(job: Any, result: Any, rows: list[dict[str, Any]], progress: Progress) -> str:
    settings = job.settings
    evaluations = progress.extra.get("evaluations", [])
    before, after = progress.extra.get("eval_before") or {}, progress.extra.get("eval_after") or {}
    hyper = {key: value for key, value in settings.model_dump().items()
             if key not in ("base_model", "lora", "export", "model_name")}
    shown = rows if len(rows) <= 12 else [rows[round(i * (len(rows) - 1) / 11)] for i in range(12)]
    lines = [
        f"# RL run `{result.output_dir.name}`", "",
        f"- Model: **`{result.model_id}`** (use it as `LanguageModel(model=\"{result.model_id}\")` or `[model] name`)",
        f"- Base: `{settings.base_model}`" + (f" (GGUF `{job.source.gguf}`)" if job.source.gguf else ""),
        f"- GRPO: {settings.iterations} iterations x {settings.batch_size} seeds x {settings.group_size} rollouts, "
        f"{settings.updates_per_batch} update(s) per batch, temperature {settings.temperature:g}, beta {settings.beta:g}",
        f"- LoRA: r={settings.lora.r}, alpha={settings.lora.alpha}, dropout={settings.lora.dropout}, modules "
        f"{', '.join(settings.lora.target_modules)}; {job.trainable_parameters:,} trainable of {job.total_parameters:,}",
        f"- Hyperparameters: {json.dumps(hyper)}",
        f"- Time {result.elapsed_s:.1f} s; peak RSS {result.peak_rss_mb:.0f} MB; device {job.plan.describe()}", "",
        "## Reward", "",
        "| | split | seeds | reward (greedy) | failed |", "|---|---|---|---|---|",
        f"| before training | {before.get('split', '')} | {before.get('size', '')} | {_reward(before.get('reward'))} | "
        f"{before.get('failures', 0)} |",
        f"| after training | {after.get('split', '')} | {after.get('size', '')} | {_reward(after.get('reward'))} | "
        f"{after.get('failures', 0)} |", "",
        "![reward](plots/reward.png)", "",
        f"Groups with no signal (all rewards equal, left out of the update): {result.zero_signal_groups} of "
        f"{result.groups}" + (" - give partial credit so that rollouts of a seed differ." if result.groups and
                              result.zero_signal_groups > result.groups / 2 else "."),
        f"Failed rollouts (left out): {result.failed_rollouts}.", "",
        "| iteration | " + " | ".join(str(int(row["iteration"])) for row in shown) + " |",
        "|---|" + "---|" * len(shown),
        "| train reward | " + " | ".join(_reward(row.get("mean_reward")) for row in shown) + " |",
        "| zero-signal groups | " + " | ".join(str(int(row.get("zero_signal_groups") or 0)) for row in shown) + " |",
    ]
    during = [e for e in evaluations if e["label"] == "during"]
    if during:
        lines += ["", "Validation reward (greedy): " + ", ".join(f"iteration {e['iteration']}: {_reward(e['reward'])}"
                                                                 for e in during)]
    lines += ["", "## Files", ""]
    lines += [f"- {kind}: `{path}`" for kind, path in result.files.items()]
    lines += ["- checkpoints: " + ", ".join(f"`{c['path']}` (iteration {c['iteration']})" for c in result.checkpoints),
              "- `history.csv`, `events.jsonl`, `final_status.json`", "", "## Final status", "", "```json",
              json.dumps(result.final_status(), indent=2), "```", ""]
    return "\n".join(lines)


def finish_rl_run(job: Any, folder: Path, progress: Progress, on_event: EventSink, status: Any, model_id: str,
                  elapsed_s: float) -> Any:
    from promptgym.finetune.rl.grpo import HISTORY_COLUMNS, RLResult

    extra = progress.extra
    rows = StepHistory(folder / "history.csv", HISTORY_COLUMNS, key="iteration").rows()
    plot = plot_rewards(rows, extra.get("evaluations", []), folder / "plots" / "reward.png",
                        title=f"{job.settings.base_model} GRPO")
    rss, gpu_memory = peak_rss_mb(), peak_gpu_memory_mb(job.plan)
    job.release()
    name = model_id.removeprefix("local/")
    files = sft_finish.export_files(job, folder, last_checkpoint(folder / "checkpoints"), name, on_event)
    before, after = extra.get("eval_before") or {}, extra.get("eval_after") or {}
    entry = register_finetuned_model(FineTunedModel(
        name=name, base=job.settings.base_model, method="rl", merged=files.get("merged"), adapter=files.get("adapter"),
        base_gguf=str(job.source.gguf) if job.source.gguf else None, run=str(folder.resolve()),
        details={"iterations": progress.step, "group_size": job.settings.group_size,
                 "eval_reward_before": before.get("reward"), "eval_reward_after": after.get("reward"),
                 "lora_r": job.settings.lora.r}))
    on_event(ModelRegistered(model_id=entry.model_string, files=files))
    result = RLResult(
        status="completed", model_id=entry.model_string, output_dir=folder, iterations=progress.step,
        final_reward=extra.get("last_mean_reward"), eval_reward_before=before.get("reward"),
        eval_reward_after=after.get("reward"), checkpoints=extra["checkpoints"],
        files={**files, **({"reward_plot": str(plot)} if plot else {})}, elapsed_s=round(elapsed_s, 2),
        peak_rss_mb=round(rss, 1), groups=extra.get("groups", 0), zero_signal_groups=extra.get("zero_signal_groups", 0),
        failed_rollouts=extra.get("failed_rollouts", 0))
    final = result.final_status()
    atomic_write_json(folder / FINAL_STATUS_FILE, final)
    atomic_write_text(folder / "summary.md", summary_markdown(job, result, rows, progress))
    status(**{key: value for key, value in final.items() if key != "checkpoints"}, iterations_done=progress.step,
           checkpoints=extra["checkpoints"], files=result.files, elapsed_s=result.elapsed_s,
           peak_rss_mb=result.peak_rss_mb, groups=result.groups, zero_signal_groups=result.zero_signal_groups,
           failed_rollouts=result.failed_rollouts, finished=time.time(),
           peak_gpu_memory_mb=None if gpu_memory is None else round(gpu_memory, 1))
    return result
