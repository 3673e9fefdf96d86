"""OpenTelemetry spans: program > module > LM call, with tokens and latency; off by default."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from promptgym import tracing
from tests.serving.programs import Question, qa_program


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable_otel(provider)
    yield exporter
    tracing.disable_otel()


async def test_a_program_call_is_a_tree_of_spans_with_tokens_and_latency(spans) -> None:
    program = await qa_program()
    await program(Question(question="traced"))
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert sorted(name.split(" ")[0] for name in finished) == ["lm", "module", "program"]
    assert "lm scripted/test" in finished
    program_span = finished["program qa"]
    module_span = next(span for name, span in finished.items() if name.startswith("module"))
    lm_span = next(span for name, span in finished.items() if name.startswith("lm"))
    assert module_span.parent.span_id == program_span.context.span_id
    assert lm_span.parent.span_id == module_span.context.span_id
    assert lm_span.attributes["gen_ai.usage.output_tokens"] == 2  # the scripted model counts words
    assert lm_span.attributes["gen_ai.usage.input_tokens"] > 0
    assert program_span.attributes["promptgym.lm_calls"] == 1
    assert program_span.attributes["gen_ai.usage.input_tokens"] == lm_span.attributes["gen_ai.usage.input_tokens"]
    assert program_span.attributes["promptgym.latency_ms"] >= lm_span.attributes["promptgym.latency_ms"] >= 0
    assert all("traced" not in str(dict(span.attributes)) for span in finished.values())  # no inputs in spans


async def test_a_failed_model_call_marks_its_spans_as_errors(spans) -> None:
    program = await qa_program()
    with pytest.raises(Exception):
        await program(Question(question="fail"))
    statuses = {span.name.split(" ")[0]: span.status.status_code.name for span in spans.get_finished_spans()}
    assert statuses["program"] == "ERROR" and statuses["lm"] == "ERROR"


async def test_nothing_is_recorded_once_disabled(spans) -> None:
    tracing.disable_otel()
    program = await qa_program()
    await program(Question(question="quiet"))
    assert list(spans.get_finished_spans()) == []
    assert not tracing.is_otel_enabled()
