"""A rating, correction or comment on a trace, checked before it is stored: ``POST /v1/feedback`` and the review page.

The correction is validated against the output schema the trace store kept for the
trace's program version (``check_correction``), so a label that would break the
retraining run is refused when it is given, with the field that is wrong.

    store = TraceStore(":memory:")
    trace_id = store.record(program="qa", inputs={"question": "2+2?"}, outputs={"answer": "5"})
    take_feedback(store, trace_id, {"rating": 0, "correction": {"answer": "4"}}).correction   # {'answer': '4'}
"""

from __future__ import annotations

import math
from typing import Any

from promptgym.traces.corrections import CorrectionError, check_correction
from promptgym.traces.store import Feedback, TraceStore, UnknownTraceError

FIELDS = ("rating", "correction", "comment")


class FeedbackError(ValueError):
    """Feedback that can't be stored; ``field`` names the part that is wrong (``correction.answer``)."""

    def __init__(self, message: str, field: str | None = None, status: int = 422) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


def take_feedback(store: TraceStore, trace_id: str, body: Any) -> Feedback:
    """Store ``body`` (``{"rating"?, "correction"?, "comment"?}``) on the trace; :class:`FeedbackError` if bad."""
    if not isinstance(body, dict):
        raise FeedbackError(f"body: expected a JSON object with {', '.join(FIELDS)}", "body", status=400)
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise FeedbackError(f"{unknown[0]}: unknown field; feedback takes {', '.join(FIELDS)}", unknown[0])
    rating, correction, comment = body.get("rating"), body.get("correction"), body.get("comment")
    if rating is not None and (isinstance(rating, bool) or not isinstance(rating, (int, float))
                               or not math.isfinite(rating)):
        raise FeedbackError(f"rating: expected a finite number, got {rating!r}", "rating")
    if comment is not None and not isinstance(comment, str):
        raise FeedbackError(f"comment: expected a string, got {type(comment).__name__}", "comment")
    if rating is None and correction is None and not (comment or "").strip():
        raise FeedbackError("give a rating, a correction or a comment", "body")
    trace = store.get(trace_id)
    if trace is None:
        raise FeedbackError(f"no trace {trace_id!r} in {store.path} (never recorded, or deleted by retention)",
                          "trace_id", status=404)
    if correction is not None:
        schemas = store.program_schemas(trace.program, trace.version)
        try:
            correction = check_correction(schemas[1] if schemas else None, correction)
        except CorrectionError as error:
            raise FeedbackError(str(error), error.field) from None
    try:
        return store.add_feedback(trace_id, rating=rating, correction=correction, comment=comment or None)
    except UnknownTraceError:  # deleted by retention between the two reads
        raise FeedbackError(f"no trace {trace_id!r} in {store.path}", "trace_id", status=404) from None
