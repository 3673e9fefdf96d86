"""The Keras-style progress bar, on by default (``verbose=1``)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from promptgym.training.callback import Callback
from promptgym.training.spend import format_usd

_BAR_WIDTH = 24


HIDDEN_BY_DEFAULT = ("cost_usd_", "saved_usd", "compute_s", "epoch_cost_usd")
"""Spend details the bar leaves to History and summary.md (the total, ``cost_usd``, is shown)."""


def format_logs(logs: dict[str, Any] | None, keys: tuple[str, ...] | None = None) -> str:
    """``key: value`` pairs; dollars as ``$0.0123``, marked ``+ unknown`` when some calls had no price.

    >>> format_logs({"reward": 0.5, "cost_usd": 0.01, "unpriced_calls": 0})
    'reward: 0.5000 - cost: $0.0100'
    """
    parts = []
    logs = logs or {}
    for key, value in logs.items():
        if keys is not None and key not in keys:
            continue
        if keys is None and (key.startswith(HIDDEN_BY_DEFAULT) or key == "unpriced_calls"):
            continue
        if key == "cost_usd" and isinstance(value, (int, float)):
            parts.append(f"cost: {format_usd(float(value), int(logs.get('unpriced_calls') or 0))}")
        elif isinstance(value, float):
            parts.append(f"{key}: {value:.4f}")
        elif isinstance(value, int) and not isinstance(value, bool):
            parts.append(f"{key}: {value}")
    return " - ".join(parts)


class ProgressBar(Callback):
    """One bar per epoch (and per evaluate / predict), redrawn in place on a terminal.

    Off a terminal (CI, a pipe) it prints a line per quarter of the work, so
    logs stay short and readable.
    """

    def __init__(self, stream: TextIO | None = None, shown_keys: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stdout
        self.shown_keys = shown_keys
        self._total = 0
        self._started = 0.0
        self._label = ""
        self._last_quarter = -1
        self._done = 0

    @property
    def _interactive(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def _begin(self, label: str, total: int) -> None:
        self._label, self._total, self._started, self._last_quarter = label, total, time.perf_counter(), -1
        self._done = 0

    def _update(self, done: int, logs: dict[str, Any] | None, final: bool = False) -> None:
        total = max(self._total, 1)
        filled = int(_BAR_WIDTH * min(done, total) / total)
        bar = "=" * filled + ("." * (_BAR_WIDTH - filled))
        elapsed = time.perf_counter() - self._started
        line = f"{self._label} {done}/{self._total} [{bar}] {elapsed:.0f}s"
        details = format_logs(logs, self.shown_keys)
        if details:
            line += f" - {details}"
        if self._interactive:
            self.stream.write("\r" + line + ("\n" if final else ""))
            self.stream.flush()
            return
        quarter = int(4 * done / total)
        if final or quarter > self._last_quarter:
            self._last_quarter = quarter
            self.stream.write(line + "\n")
            self.stream.flush()

    # fit
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._epochs = (logs or {}).get("epochs", 1)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.stream.write(f"Epoch {epoch + 1}/{self._epochs}\n")
        self._begin("  train", (logs or {}).get("steps", 0))

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._update(batch + 1, logs, final=batch + 1 >= self._total)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        summary = format_logs(logs, self.shown_keys)
        self.stream.write(f"  epoch {epoch + 1} done in {time.perf_counter() - self._started:.0f}s - {summary}\n")
        self.stream.flush()

    # weights trained inside fit() (FineTune), and the stages of a chain
    def on_event(self, event: Any) -> None:
        kind = event.kind
        if kind == "stage_started":
            self.stream.write(f"Stage {event['stage']} ({event['index'] + 1}/{event['stages']})\n")
        elif kind == "sft_started":
            self._begin("  SFT", int(event["steps"]))
            self.stream.write(f"  SFT of {event['base_model']}: {event['train_rows']} rows, {event['steps']} steps\n")
        elif kind == "sft_planned":
            self._total = int(event["steps"])
            self.stream.write(f"\n  SFT plan (n_epochs='auto'): {event['steps']} steps ({event['epochs']:g} epochs), "
                              f"{event['step_s']:.3g} s a step, evaluated every {event['eval_steps']} steps\n")
        elif kind == "sft_step":
            self._update(int(event["step"]), {"loss": event["loss"]}, final=event["step"] >= event["total_steps"])
        elif kind == "model_registered":
            self.stream.write(f"  tuned model: {event['model_id']}\n")
        elif kind == "spend_cap_reached":
            self.stream.write(f"\n  stopped by max_usd={format_usd(event['limit_usd'])}: {format_usd(event['spent_usd'])} "
                              f"spent; the best program so far is kept (resume goes on at epoch {event['epoch'] + 1}, "
                              f"step {event['step'] + 1})\n")
        else:
            return
        self.stream.flush()

    # evaluate / predict
    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if not (logs or {}).get("in_fit"):
            self._begin("  evaluate", (logs or {}).get("total", 0))

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        if not (logs or {}).get("in_fit"):
            self._update(self._total, logs, final=True)

    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._begin("  predict", (logs or {}).get("total", 0))

    def on_predict_end(self, logs: dict[str, Any] | None = None) -> None:
        self._update(self._total, logs, final=True)

    def on_example_end(self, stage: str, logs: dict[str, Any] | None = None) -> None:
        # The last example is drawn by on_test_end / on_predict_end, with the final numbers.
        self._done += 1
        if self._done < self._total:
            self._update(self._done, logs)
