"""The tracer that module and model calls report spans to: none (the default, free) or an OpenTelemetry one.

``promptgym.tracing.enable_otel()`` sets it; lower layers only ask for it, so they carry no
OpenTelemetry import::

    tracer = current_tracer()
    if tracer is None: ...                     # the fast path: nothing recorded
    with tracer.start_as_current_span("module qa", attributes={...}) as span: ...
"""

from __future__ import annotations

from typing import Any

_state: dict[str, Any] = {"tracer": None}


def current_tracer() -> Any:
    """The tracer set by :func:`set_tracer` (an ``opentelemetry.trace.Tracer``), or None."""
    return _state["tracer"]


def set_tracer(tracer: Any) -> None:
    _state["tracer"] = tracer
