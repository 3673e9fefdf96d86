"""Process-wide switches: ``clear_session()``, ``enable_logging()``, ``enable_observability()``.

    import promptgym as synalinks
    synalinks.clear_session()        # module names start again at generator, generator_1, ...
    synalinks.enable_logging()       # promptgym's log lines on stderr
"""

from __future__ import annotations

import logging
from typing import Any

from promptgym.lm.usage import reset_phase_wall_clock
from promptgym.modules.naming import reset_names

logger = logging.getLogger("promptgym")


def clear_session(free_memory: bool = True) -> None:
    """Forget automatic names (the next Generator is ``generator`` again), as at the start of a script.

    The per-phase wall clocks (throughput metrics) start again from zero. Models, caches and defaults
    are kept (``free_memory`` is accepted for synalinks' signature; promptgym holds nothing per session to free).
    """
    reset_names()
    reset_phase_wall_clock()


def enable_logging(log_level: str | int = "info", **_: Any) -> None:
    """Print promptgym's log lines (run progress, failures, warnings) on stderr at ``log_level``."""
    level = logging.getLevelName(log_level.upper()) if isinstance(log_level, str) else log_level
    if not any(getattr(handler, "_promptgym_console", False) for handler in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._promptgym_console = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level)


_seed = {"value": 0}


def set_seed(seed: int) -> None:
    """The seed ``fit()`` uses when it is given none (data order, sampling of examples and candidates)."""
    _seed["value"] = int(seed)


def get_seed() -> int:
    return _seed["value"]


_observability_warned = False


def enable_observability(*_: Any, **__: Any) -> None:
    """Accepted and ignored: promptgym's tracing is ``promptgym.tracing.enable_otel()`` (OpenTelemetry spans).

    Metrics go to MLflow with ``callbacks.MLflowLogger``; every run also records its events
    (``runs/<id>/events.jsonl`` with the CLI, ``Callback.on_event`` in Python); see docs/observability.md.
    """
    global _observability_warned
    if not _observability_warned:
        _observability_warned = True
        logger.warning("enable_observability() is ignored: trace calls with promptgym.tracing.enable_otel() "
                       "(OpenTelemetry) and log runs with callbacks.MLflowLogger (see docs/observability.md)")
