"""What an RL run's finish leaves of its own: its result (:class:`RLResult`), the reward curve, ``summary.md`` and
``final_status.json``'s name.

The finish itself (export, registry entry, final status) is the weight-run skeleton's
(:meth:`promptgym.finetune.weight_run.WeightRun.finish`); :class:`promptgym.finetune.rl.grpo.RLRun` calls these.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Protocol

from promptgym.finetune.base_model import BaseModelSource
from promptgym.finetune.checkpoint import Progress
from promptgym.finetune.device import DevicePlan
from promptgym.finetune.rl.settings import RLSettings
from promptgym.finetune.weight_run import WeightRunResult
from promptgym.utils.plotting import _new_figure, save_figure

logger = logging.getLogger("promptgym")
FINAL_STATUS_FILE = "final_status.json"


class RLJob(Protocol):
    """What the summary reads of a prepared job (a ``grpo.RLJob``; grpo imports this module: named by shape)."""

    settings: RLSettings
    source: BaseModelSource
    plan: DevicePlan
    trainable_parameters: int
    total_parameters: int


@dataclass(kw_only=True)
class RLResult(WeightRunResult):
    """What a finished run left; :meth:`final_status` is the JSON the CLI prints."""

    iterations: int
    final_reward: float | None
    eval_reward_before: float | None
    eval_reward_after: float | None
    groups: int = 0
    zero_signal_groups: int = 0
    failed_rollouts: int = 0

    def final_status(self) -> dict[str, Any]:
        return {"status": self.status, "final_reward": self.final_reward, "eval_reward_before": self.eval_reward_before,
                "eval_reward_after": self.eval_reward_after, "model_id": self.model_id,
                "checkpoints": [{"iteration": c["iteration"], "path": c["path"]} for c in self.checkpoints]}


def plot_rewards(rows: list[dict[str, Any]], evaluations: list[dict[str, Any]], target: Path,
                 title: str = "reward") -> Path | None:
    """Mean training reward per iteration (with the groups' spread) and the greedy evaluations, as a PNG."""
    train = [(row["iteration"], row["mean_reward"], row.get("reward_spread") or 0.0) for row in rows
             if row.get("mean_reward") is not None]
    if not train and not evaluations:
        return None
    try:
        figure = _new_figure(7, 4)
    except ImportError as error:  # pragma: no cover - matplotlib is part of the default install
        logger.warning("reward plot skipped: %s", error)
        return None
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


def summary_markdown(job: RLJob, result: RLResult, rows: list[dict[str, Any]], progress: Progress) -> str:
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
