"""Live progress of weight-training runs: one line per event (``cli``) or a loss chart (``chart``)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console

SFT_EVENTS = ("sft_started", "sft_step", "sft_eval", "checkpoint_saved", "model_exported", "model_registered")


def _num(value: Any, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def describe_sft(event: dict[str, Any]) -> str | None:
    """One human line per SFT event."""
    kind = event.get("event")
    if kind == "sft_started":
        resumed = f", resuming after step {event['resume_from_step']}" if event.get("resume_from_step") else ""
        return (f"fine-tuning {event['base_model']}: {event['train_rows']} training / {event['validation_rows']} "
                f"validation rows, {event['epochs']} epoch(s), {event['steps']} steps, "
                f"{event['trainable_parameters']:,} trainable parameters{resumed}")
    if kind == "sft_step":
        return (f"step {event['step']}/{event['total_steps']}  loss {_num(event.get('loss'))}  "
                f"lr {event.get('lr', 0):.2e}  {_num(event.get('tokens_per_s'), 0)} tokens/s"
                + (f"  eval loss {_num(event['eval_loss'])}" if event.get("eval_loss") is not None else ""))
    if kind == "sft_eval" and event.get("label") != "step":
        when = {"before": "before training", "final": "after training"}.get(event["label"], event["label"])
        return f"eval loss {_num(event['eval_loss'])} ({when}, step {event['step']})"
    if kind == "checkpoint_saved" and "step" in event:
        return f"  checkpoint {event['path']} ({event.get('reason', '')})"
    if kind == "model_exported":
        return f"exported {event['part']} GGUF ({event['format']}, {event['size']}): {event['path']}"
    if kind == "model_registered":
        return f"model ready: {event['model_id']}  (LanguageModel(model=\"{event['model_id']}\"), or [model] name)"
    return None


def loss_chart(train: list[tuple[int, float]], evals: list[tuple[int, float]], width: int = 64, height: int = 12,
               title: str = "loss") -> str:
    """A plain-text chart of losses per step, scaled to their range: ``*`` training, ``E`` evaluation."""
    points = train + evals
    if not points:
        return title
    steps, values = [x for x, _ in points], [y for _, y in points if math.isfinite(y)]
    left, right = min(steps), max(max(steps), min(steps) + 1)
    low, high = min(values), max(max(values), min(values) + 1e-6)
    grid = [[" "] * width for _ in range(height)]
    for marks, mark in ((train, "*"), (evals, "E")):
        for x, y in marks:
            column = round((x - left) / (right - left) * (width - 1))
            row = height - 1 - round((min(max(y, low), high) - low) / (high - low) * (height - 1))
            grid[row][column] = mark
    lines = [title[: width + 8], "        * train loss per step   E eval loss"]
    for number, row in enumerate(grid):
        value = high - number * (high - low) / (height - 1)
        label = f"{value:7.3f} |" if number % max(1, (height - 1) // 4) == 0 else "        |"
        lines.append(label + "".join(row))
    lines.append("        +" + "-" * width)
    lines.append(f"         step {left}".ljust(width) + f"step {right}")
    return "\n".join(lines)


class LossChartRenderer:
    """Training and evaluation loss as a live terminal chart (rich Live); plain text when not a terminal."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.train: list[tuple[int, float]] = []
        self.evals: list[tuple[int, float]] = []
        self.status = ""
        self._live: Any = None
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(console=self.console, auto_refresh=False, transient=False)
            self._live.start()

    def chart(self) -> str:
        return loss_chart(self.train, self.evals, title=self.status or "loss")

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "sft_step" and event.get("loss") is not None:
            self.train.append((int(event["step"]), float(event["loss"])))
        elif kind == "sft_eval" and event.get("eval_loss") is not None:
            self.evals.append((int(event["step"]), float(event["eval_loss"])))
        if kind not in ("sft_step", "sft_eval", "model_registered", "run_finished"):
            return
        self.status = describe_sft(event) or self.status
        if kind == "run_finished":
            self.status = f"run {event.get('status')} in {event.get('elapsed_s', 0):.1f} s"
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(self.chart()), refresh=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
        elif self.train or self.evals:
            self.console.print(self.chart(), markup=False, highlight=False)
