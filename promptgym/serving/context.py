"""What one server holds: its programs, the models it chats with directly, limits, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from promptgym.lm.language_model import LanguageModel
from promptgym.serving.admission import Admission
from promptgym.serving.metrics import ServingMetrics
from promptgym.serving.programs import ServedProgram
from promptgym.serving.recording import Recorder

DEFAULT_CONCURRENCY = 32
DEFAULT_QUEUE = 256
DEFAULT_MAX_BODY_BYTES = 1_000_000


@dataclass
class ServeSettings:
    """A server's limits and switches (the ``promptgym serve`` flags).

    Args:
        api_key: the key requests must carry (None: no key needed); never logged.
        concurrency: requests that run at once; ``queue`` more wait, the rest get 429.
        max_body_bytes: larger bodies get 413 before they are read.
        log_inputs: put each request's body in its log line (off: inputs may be private).
        record: a folder to store every served call in as a trace (``record/traces.db``); None: nothing stored.
        redact: a function of each trace's dict returning what to store (drop private fields here).
        record_max_age_days, record_max_traces: the trace store's retention.
    """

    api_key: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    queue: int = DEFAULT_QUEUE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_inputs: bool = False
    record: str | None = None
    redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    record_max_age_days: float | None = None
    record_max_traces: int | None = None


@dataclass
class ServerContext:
    programs: dict[str, ServedProgram]
    models: dict[str, LanguageModel] = field(default_factory=dict)
    settings: ServeSettings = field(default_factory=ServeSettings)
    metrics: ServingMetrics = field(default_factory=ServingMetrics)
    admission: Admission | None = None
    recorder: Recorder | None = None

    def __post_init__(self) -> None:
        if self.admission is None:
            self.admission = Admission(self.settings.concurrency, self.settings.queue)
        if self.recorder is None and self.settings.record:
            self.recorder = Recorder.open(self.settings.record, self.programs,
                                          max_age_days=self.settings.record_max_age_days,
                                          max_traces=self.settings.record_max_traces, redact=self.settings.redact)

    def model_names(self) -> list[str]:
        return sorted(self.models)
