"""The ``[logging]`` table of a run config: MLflow, TensorBoard and OpenTelemetry for every flow.

    [logging]
    mlflow = { tracking_uri = "http://127.0.0.1:5000", experiment = "dates" }
    tensorboard = "tb"          # one subfolder per run: tensorboard --logdir tb
    otel = true                 # spans.jsonl in the run folder

Each is a listener of the run's event records, so prompt learning, SFT and RL report the same
way. A logger that fails (a server down) warns once and stops; the run goes on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from promptgym.cli.config import JobConfig, resolved_dict
from promptgym.training.run_recorder import Listener
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.tracing import disable_otel, enable_otel
from promptgym.training.mlflow_logger import MLflowLogger
from promptgym.training.tensorboard import TensorBoard

logger = logging.getLogger("promptgym")


def with_run_loggers(listeners: list[Listener] | None, config: JobConfig, run: RunFolder,
                     masker: Masker) -> list[Listener]:
    """``listeners`` plus one for each logger the config's ``[logging]`` table asks for."""
    section = config.logging
    added: list[Listener] = []
    if section.tensorboard:
        added.append(guarded("TensorBoard", TensorBoard(log_dir=Path(section.tensorboard) / run.id)))
    if section.mlflow is not None:
        spec = section.mlflow
        added.append(guarded("MLflow", MLflowLogger(
            tracking_uri=spec.tracking_uri, experiment_name=spec.experiment or config.job.name,
            run_name=spec.run_name or run.id, tags={"promptgym.job_type": config.job.type, **spec.tags},
            params=masker.mask_data(resolved_dict(config)), artifacts_dir=run.path)))
    if section.otel:
        added.append(guarded("OpenTelemetry", SpanFile(run.path / "spans.jsonl")))
    return [*(listeners or []), *added]


def guarded(name: str, listener: Callable[[dict[str, Any]], Any]) -> Listener:
    """``listener``, switched off with one warning the first time it raises."""
    state = {"on": True}

    def listen(record: dict[str, Any]) -> None:
        if not state["on"]:
            return
        try:
            listener(record)
        except Exception as error:  # noqa: BLE001 - observability must never stop a training run
            state["on"] = False
            logger.warning("[logging] %s stopped: %s: %s (the run goes on without it)", name, type(error).__name__,
                           error)

    return listen


class SpanFile:
    """OpenTelemetry spans of this run's program, module and LM calls, one JSON object a line."""

    def __init__(self, path: Path) -> None:
        from opentelemetry.sdk.trace import TracerProvider  # deferred: only runs that trace load OpenTelemetry
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        self.path = path
        self.file = path.open("a", encoding="utf-8")
        self.provider = TracerProvider()
        exporter = ConsoleSpanExporter(out=self.file, formatter=lambda span: span.to_json(indent=None) + "\n")
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        enable_otel(self.provider)

    def __call__(self, record: dict[str, Any]) -> None:
        if record.get("event") == "run_finished":
            self.close()

    def close(self) -> None:
        disable_otel()
        self.provider.shutdown()  # flushes the spans still queued
        if not self.file.closed:
            self.file.close()
