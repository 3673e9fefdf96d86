"""The end of an SFT run: sample answers, loss plot, GGUF export, the registry entry, summary.md.

Called by :meth:`SFTJob.run` once the last checkpoint is written; every file it makes is derived
from that checkpoint, so a run killed during the export resumes straight into it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_text
from promptgym.core.events import ModelExported, ModelRegistered
from promptgym.finetune.chat_data import describe_problems
from promptgym.finetune.checkpoint import Progress, last_checkpoint
from promptgym.finetune.device import peak_gpu_memory_mb
from promptgym.finetune.export import export_adapter, export_merged
from promptgym.finetune.history import StepHistory, plot_losses
from promptgym.finetune.loop import EventSink, peak_rss_mb
from promptgym.finetune.samples import sample_answers
from promptgym.lm.finetuned_models import FineTunedModel, register_finetuned_model


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def export_files(job: Any, folder: Path, adapter_dir: Path, name: str, on_event: EventSink) -> dict[str, str]:
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


def finish_sft_run(job: Any, folder: Path, progress: Progress, on_event: EventSink, status: Any, model_id: str,
                   elapsed_s: float) -> Any:
    from promptgym.finetune.sft_flow import SFTResult

    rows = job.data.validation_rows or job.data.train_rows
    samples = sample_answers(job.model, job.tokenizer, [row.messages for row in rows[:job.settings.summary_samples]])
    plot = plot_losses(StepHistory(folder / "history.csv").rows(), folder / "plots" / "loss.png",
                       title=f"{job.settings.base_model} SFT")
    rss, gpu_memory = peak_rss_mb(), peak_gpu_memory_mb(job.plan)
    job.release()
    adapter_dir = last_checkpoint(folder / "checkpoints")
    name = model_id.removeprefix("local/")
    files = export_files(job, folder, adapter_dir, name, on_event)
    entry = register_finetuned_model(FineTunedModel(
        name=name, base=job.settings.base_model, method="sft", merged=files.get("merged"), adapter=files.get("adapter"),
        base_gguf=str(job.source.gguf) if job.source.gguf else None, run=str(folder.resolve()),
        details={"train_file": job.settings.train_file, "train_rows": len(job.data.train), "steps": progress.step,
                 "final_eval_loss": progress.extra.get("final_eval_loss"), "lora_r": job.settings.lora.r}))
    on_event(ModelRegistered(model_id=entry.model_string, files=files))
    result = SFTResult(
        status="completed", model_id=entry.model_string, output_dir=folder, steps=progress.step,
        final_loss=progress.loss, final_eval_loss=progress.extra.get("final_eval_loss"),
        initial_eval_loss=progress.extra.get("initial_eval_loss"), checkpoints=progress.extra["checkpoints"],
        files={**files, **({"loss_plot": str(plot)} if plot else {})}, elapsed_s=round(elapsed_s, 2), peak_rss_mb=round(rss, 1),
        device=job.plan.device, peak_gpu_memory_mb=None if gpu_memory is None else round(gpu_memory, 1))
    atomic_write_text(folder / "summary.md", summary_markdown(job, result, samples))
    status(**{key: value for key, value in result.status_fields().items() if key != "output_dir"},
           samples=samples, finished=time.time())
    return result


def _loss(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _cell(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return (text[: limit - 1] + "…" if len(text) > limit else text).replace("|", "\\|")


def summary_markdown(job: Any, result: Any, samples: list[dict[str, str]]) -> str:
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
        f"- Steps: {result.steps}; time {result.elapsed_s:.1f} s; peak RSS {result.peak_rss_mb:.0f} MB"
        + (f"; peak GPU memory {result.peak_gpu_memory_mb:.0f} MB" if result.peak_gpu_memory_mb is not None else ""),
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
