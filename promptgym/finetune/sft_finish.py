"""What an SFT run's finish leaves of its own: its result (:class:`SFTResult`) and ``summary.md`` (losses, sample
answers, skipped rows, files).

The finish itself (export, registry entry, final status) is the weight-run skeleton's
(:meth:`promptgym.finetune.weight_run.WeightRun.finish`); :class:`promptgym.finetune.sft_run.SFTRun`
calls :func:`summary_markdown` from it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from promptgym.finetune.auto_epochs import BudgetPlan
from promptgym.finetune.chat_data import describe_problems
from promptgym.finetune.sft_job import SFTJob
from promptgym.finetune.weight_run import WeightRunResult, export_files
from promptgym.runs.history import StepHistory

__all__ = ["SFTResult", "export_files", "summary_markdown"]  # export_files: now the skeleton's, kept importable here


@dataclass(kw_only=True)
class SFTResult(WeightRunResult):
    """What a finished (or stopped) run left: the model id, losses, checkpoints and files."""

    steps: int
    final_loss: float | None
    final_eval_loss: float | None
    initial_eval_loss: float | None
    device: str = "cpu"
    epochs: float = 0.0
    """Passes over the training rows (the last one may be partial)."""
    eval_losses: list[list[float]] = field(default_factory=list)
    """``[step, validation loss]`` of every evaluation, the one before training at step 0."""
    exported_step: int | None = None
    """The step whose adapter was exported: the last, or the best evaluation's (``keep_best``, ``n_epochs="auto"``)."""
    best_eval_loss: float | None = None
    """The exported step's validation loss when it was kept as the best."""
    stop_reason: str = ""
    plan: dict[str, Any] | None = None
    """What ``n_epochs="auto"`` planned (:class:`promptgym.finetune.auto_epochs.BudgetPlan`), or None."""

    def status_fields(self) -> dict[str, Any]:
        data = asdict(self)
        data["output_dir"] = str(self.output_dir)
        return data


def _loss(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _cell(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return (text[: limit - 1] + "…" if len(text) > limit else text).replace("|", "\\|")


def summary_markdown(job: SFTJob, result: SFTResult, samples: list[dict[str, str]]) -> str:
    settings, data = job.settings, job.data
    hyper = {key: value for key, value in settings.model_dump().items()
             if key not in ("base_model", "train_file", "validation_file", "lora", "export", "model_name")}
    history = StepHistory(result.output_dir / "history.csv").rows()
    losses = [(int(row["step"]), row["loss"]) for row in history if row.get("loss") is not None]
    shown = losses if len(losses) <= 12 else [losses[round(i * (len(losses) - 1) / 11)] for i in range(12)]
    lines = [
        f"# SFT run `{result.output_dir.name}`", "",
        f"- Model: **`{result.model_id}`** (use it as `LanguageModel(model=\"{result.model_id}\")` or `[model] name`)",
        f"- Base: `{settings.base_model}`" + (f" (GGUF `{job.source.gguf}`)" if job.source.gguf else ""),
        f"- Data: `{settings.train_file}`: {len(data.train)} training rows, {len(data.validation)} validation rows "
        f"({data.validation_source}); {len(data.skipped)} invalid row(s) skipped; train_on = {settings.train_on}",
        f"- LoRA: r={settings.lora.r}, alpha={settings.lora.alpha}, dropout={settings.lora.dropout}, "
        f"modules {', '.join(settings.lora.target_modules)}; {job.trainable_parameters:,} trainable of "
        f"{job.total_parameters:,} parameters",
        f"- Hyperparameters: {json.dumps(hyper)}",
        f"- Steps: {result.steps} ({result.epochs:g} epochs); time {result.elapsed_s:.1f} s; peak RSS "
        f"{result.peak_rss_mb:.0f} MB"
        + (f"; peak GPU memory {result.peak_gpu_memory_mb:.0f} MB" if result.peak_gpu_memory_mb is not None else ""),
        f"- Stopped: {result.stop_reason}; exported the adapter of step {result.exported_step}"
        + (f" (the best validation loss, {_loss(result.best_eval_loss)})" if result.best_eval_loss is not None else ""),
        *([f"- Plan (n_epochs = \"auto\"): {BudgetPlan.from_dict(result.plan).describe()}"] if result.plan else []),
        f"- Device: {job.plan.describe()}" + ("; shared prefix on" if job.shares_prefix else ""), "",
        "## Loss", "",
        "| | eval loss |", "|---|---|",
        f"| before training | {_loss(result.initial_eval_loss)} |",
        f"| after training | {_loss(result.final_eval_loss)} |", "",
        "![loss](plots/loss.png)", "",
        "| step | " + " | ".join(str(step) for step, _ in shown) + " |",
        "|---|" + "---|" * len(shown),
        "| train loss | " + " | ".join(f"{loss:.3f}" for _, loss in shown) + " |", "",
        "## Sample answers (greedy)", "",
        "| prompt | expected | base model | tuned model |", "|---|---|---|---|",
    ]
    lines += [f"| {_cell(s['prompt'])} | {_cell(s['expected'])} | {_cell(s['base'])} | {_cell(s['tuned'])} |" for s in samples]
    if data.skipped:
        lines += ["", "## Rows skipped (skip_invalid_rows = true)", "", "```", describe_problems(data.skipped), "```"]
    lines += ["", "## Files", ""]
    lines += [f"- {kind}: `{path}`" for kind, path in result.files.items()]
    lines += ["- checkpoints: " + ", ".join(f"`{c['path']}` (step {c['step']})" for c in result.checkpoints),
              "- `history.csv`, `events.jsonl`", ""]
    return "\n".join(lines)
