"""A run's loggers as listeners of its event records: each guarded, so a logger that fails never stops a run.

    listeners = [guarded("TensorBoard", TensorBoard(log_dir="tb/run-1")), guarded("OpenTelemetry", SpanFile(path))]

Which loggers a run has is the caller's choice (the CLI's ``[logging]`` table, ``promptgym.cli.run_loggers``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from promptgym.runs.events import Listener
from promptgym.tracing import disable_otel, enable_otel

logger = logging.getLogger("promptgym")


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
