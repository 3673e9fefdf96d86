"""OpenTelemetry spans for every program call, module call and language-model call.

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(my_exporter))   # OTLP, console, Jaeger, ...
    promptgym.tracing.enable_otel(provider)
    await program(inputs)       # spans: "program qa" > "module generator" > "lm local/..."

Spans nest as the calls do and carry ``gen_ai.usage.input_tokens`` / ``output_tokens``,
``promptgym.lm_calls`` and ``promptgym.latency_ms``; a failed call's span records the error.
Inputs and outputs are never put in a span. Without ``enable_otel`` nothing is recorded and
nothing is imported (``opentelemetry-api`` is needed only to enable it; the SDK is what exports).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from promptgym.core.spans import current_tracer, set_tracer

TRACER_NAME = "promptgym"


def enable_otel(tracer_provider: Any = None) -> Any:
    """Send spans to ``tracer_provider`` (default: OpenTelemetry's global one); returns the tracer."""
    try:
        from opentelemetry import trace  # deferred: only code that traces needs OpenTelemetry
    except ImportError:
        raise ImportError("enable_otel needs OpenTelemetry: pip install 'promptgym[observability]' "
                          "(opentelemetry-api and -sdk)") from None
    try:
        release = version("promptgym")
    except PackageNotFoundError:
        release = None
    provider = tracer_provider or trace.get_tracer_provider()
    tracer = provider.get_tracer(TRACER_NAME, release)
    set_tracer(tracer)
    return tracer


def disable_otel() -> None:
    """Stop recording spans (the calls made afterwards cost nothing extra)."""
    set_tracer(None)


def is_otel_enabled() -> bool:
    return current_tracer() is not None
