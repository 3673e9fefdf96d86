"""What ``promptgym serve --record DIR`` stores: every served call as a trace, and people's feedback on it.

    store = TraceStore("traces/traces.db")
    trace_id = store.record(program="qa", version="3f2a", inputs={"question": "2+2?"},
                            outputs={"answer": "4"}, model="openai/gpt-4o-mini")
    store.add_feedback(trace_id, rating=1.0, comment="right")
    [trace.outputs for trace in store.traces(program="qa", rated=True)]   # [{'answer': '4'}]

A trace store is a data source like any dataset: ``promptgym.datasets.from_traces``.
"""

from promptgym.traces.corrections import CorrectionError, check_correction
from promptgym.traces.store import Feedback, Trace, TraceStore, UnknownTraceError

__all__ = ["CorrectionError", "check_correction", "Feedback", "Trace", "TraceStore", "UnknownTraceError"]
