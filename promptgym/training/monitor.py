"""``Monitor``: record a run (epoch/batch metrics, every trainer event, the final program) in a local folder.

synalinks' Monitor sends the same to MLflow; this one writes a folder (``tracking_uri``, default
``./runs``), and ``callbacks.MLflowLogger`` is the one that sends to MLflow (docs/observability.md)::

    monitor = Monitor(experiment_name="dates", run_name="fewshot")
    await program.fit(x, y, callbacks=[monitor])
    # runs/dates/fewshot/metrics.jsonl, events.jsonl, program.json
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from promptgym.training.callback import Callback


class Monitor(Callback):
    """See the module docstring; the arguments are synalinks' (``tags`` land in ``run.json``)."""

    def __init__(self, experiment_name: str | None = None, run_name: str | None = None,
                 tracking_uri: str | None = None, log_batch_metrics: bool = False, log_epoch_metrics: bool = True,
                 log_program_plot: bool = False, log_program_model: bool = True,
                 tags: dict[str, Any] | None = None) -> None:
        super().__init__()
        if tracking_uri and "://" in tracking_uri and not tracking_uri.startswith("file://"):
            raise ValueError(f"Monitor: tracking_uri {tracking_uri!r} is a server; promptgym records runs in a local "
                             "folder (pass a path, or nothing for ./runs)")
        self.root = Path((tracking_uri or "runs").removeprefix("file://"))
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.log_batch_metrics = log_batch_metrics
        self.log_epoch_metrics = log_epoch_metrics
        self.log_program_plot = log_program_plot
        self.log_program_model = log_program_model
        self.tags = dict(tags or {})
        self.folder: Path | None = None

    def _write(self, name: str, record: dict[str, Any]) -> None:
        if self.folder is None:
            return
        with (self.folder / name).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"time": time.time(), **record}, default=str) + "\n")

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        experiment = self.experiment_name or getattr(self.program, "name", "program")
        run = self.run_name or time.strftime("%Y%m%d-%H%M%S")
        self.folder = self.root / experiment / run
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "run.json").write_text(json.dumps({"experiment": experiment, "run": run, "tags": self.tags,
                                                          "program": getattr(self.program, "name", None)}, indent=2))
        if self.log_program_plot:
            try:
                from promptgym.utils import plot_program

                plot_program(self.program, to_file=str(self.folder / "program.png"))
            except Exception:  # noqa: BLE001 - a plot is a nicety; matplotlib may be missing
                pass

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.log_batch_metrics:
            self._write("metrics.jsonl", {"batch": batch, **(logs or {})})

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.log_epoch_metrics:
            self._write("metrics.jsonl", {"epoch": epoch, **(logs or {})})

    def on_event(self, event: Any) -> None:
        record = dict(event) if hasattr(event, "keys") else {"event": repr(event)}
        self._write("events.jsonl", record)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self.log_program_model and self.folder is not None:
            self.program.save(self.folder / "program.json")
