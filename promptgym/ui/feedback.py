"""A reviewer's rating, correction or comment on a trace, checked before it is stored.

The correction is validated against the output schema the trace store kept for the
trace's program version (``check_correction``), the same check ``POST /v1/feedback``
makes, so a label that would break the retraining run is refused while the reviewer
is still looking at the form, with the field that is wrong.

    store = TraceStore(":memory:")
    trace_id = store.record(program="qa", inputs={"question": "2+2?"}, outputs={"answer": "5"})
    review(store, trace_id, {"rating": 0, "correction": {"answer": "4"}}).correction   # {'answer': '4'}
"""

from __future__ import annotations

import math
from typing import Any

from promptgym.traces import CorrectionError, Feedback, TraceStore, UnknownTraceError, check_correction

FIELDS = ("rating", "correction", "comment")


class ReviewError(ValueError):
    """Feedback the page can't store; ``field`` names the part that is wrong (``correction.answer``)."""

    def __init__(self, message: str, field: str | None = None, status: int = 422) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


def review(store: TraceStore, trace_id: str, body: Any) -> Feedback:
    """Store ``body`` (``{"rating"?, "correction"?, "comment"?}``) on the trace; :class:`ReviewError` if bad."""
    if not isinstance(body, dict):
        raise ReviewError(f"body: expected a JSON object with {', '.join(FIELDS)}", "body", status=400)
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise ReviewError(f"{unknown[0]}: unknown field; feedback takes {', '.join(FIELDS)}", unknown[0])
    rating, correction, comment = body.get("rating"), body.get("correction"), body.get("comment")
    if rating is not None and (isinstance(rating, bool) or not isinstance(rating, (int, float))
                               or not math.isfinite(rating)):
        raise ReviewError(f"rating: expected a finite number, got {rating!r}", "rating")
    if comment is not None and not isinstance(comment, str):
        raise ReviewError(f"comment: expected a string, got {type(comment).__name__}", "comment")
    if rating is None and correction is None and not (comment or "").strip():
        raise ReviewError("give a rating, a correction or a comment", "body")
    trace = store.get(trace_id)
    if trace is None:
        raise ReviewError(f"no trace {trace_id!r} in {store.path} (never recorded, or deleted by retention)",
                          "trace_id", status=404)
    if correction is not None:
        schemas = store.program_schemas(trace.program, trace.version)
        try:
            correction = check_correction(schemas[1] if schemas else None, correction)
        except CorrectionError as error:
            raise ReviewError(str(error), error.field) from None
    try:
        return store.add_feedback(trace_id, rating=rating, correction=correction, comment=comment or None)
    except UnknownTraceError:  # deleted by retention between the two reads
        raise ReviewError(f"no trace {trace_id!r} in {store.path}", "trace_id", status=404) from None
