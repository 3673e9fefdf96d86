"""What one server holds: its programs, the models it chats with directly, limits, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from promptgym.lm.language_model import LanguageModel
from promptgym.serving.admission import Admission
from promptgym.serving.metrics import ServingMetrics
from promptgym.serving.programs import ServedProgram

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
    """

    api_key: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    queue: int = DEFAULT_QUEUE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_inputs: bool = False


@dataclass
class ServerState:
    programs: dict[str, ServedProgram]
    models: dict[str, LanguageModel] = field(default_factory=dict)
    settings: ServeSettings = field(default_factory=ServeSettings)
    metrics: ServingMetrics = field(default_factory=ServingMetrics)
    admission: Admission | None = None

    def __post_init__(self) -> None:
        if self.admission is None:
            self.admission = Admission(self.settings.concurrency, self.settings.queue)

    def model_names(self) -> list[str]:
        return sorted(self.models)
