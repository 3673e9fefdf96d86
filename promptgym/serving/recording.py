"""``serve --record DIR``: every served call stored as a trace, and the feedback people give on it.

A call's trace is written behind the answer: ``record`` queues it and returns its id at
once, and one writer thread commits what is queued in one transaction every
``FLUSH_SECONDS`` (one SQLite commit per request, at concurrency 32, added 14 ms to the
median answer). Shutting the server down (SIGTERM) or a feedback request flushes the
queue first; a ``kill -9`` can lose the last ``FLUSH_SECONDS`` of traces, never one committed.

Off by default: inputs and outputs are what users sent and got, personal data. A
``redact`` hook (``ServeSettings.redact``, or ``--redact FIELD`` for dotted fields) drops
fields before anything is written. The trace id comes back in the ``x-promptgym-trace-id``
header (and as ``chatcmpl-<id>`` in an OpenAI answer), and ``POST /v1/feedback`` takes it.

    recorder = Recorder.open("traces", state.programs)
    trace_id = recorder.record(served, inputs, call)
    recorder.feedback({"trace_id": trace_id, "rating": 1})
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from promptgym.modules.generator import as_json
from promptgym.programs.walk import iter_modules
from promptgym.serving.programs import ServedCall, ServedProgram
from promptgym.traces.feedback import FeedbackError, take_feedback
from promptgym.traces.store import Feedback, Redactor, TraceStore, new_trace_id

logger = logging.getLogger("promptgym.serve")

TRACE_HEADER = "x-promptgym-trace-id"
FLUSH_SECONDS = 0.05
"""How long a trace waits in the queue at most before the writer commits it."""
STORE_FILE = "traces.db"
FEEDBACK_FIELDS = ("trace_id", "rating", "correction", "comment")
MODEL_OUTPUT_SCHEMA = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}


def program_version(program: Any) -> str:
    """12 hex digits naming a program's trained state (its variables): a retrained program gets a new one.

    >>> len(program_version(type("P", (), {"get_variables": lambda self: {"a": {"v": 1}}})()))
    12
    """
    state = program.get_variables() if hasattr(program, "get_variables") else {}
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:12]


def models_of(program: Any) -> str:
    """The model strings a program's modules call, comma-separated."""
    names = []
    for module in iter_modules(program):
        model = getattr(module, "language_model", None)
        name = getattr(model, "model", None)
        if isinstance(name, str) and name not in names:
            names.append(name)
    return ",".join(names)


def redact_fields(paths: Iterable[str]) -> Redactor:
    """A redact hook dropping dotted fields from every trace before it is stored.

    ``inputs.email`` and ``outputs.answer`` drop one field; ``modules.inputs.email`` drops it
    from every module's step; ``modules`` alone drops the steps.

    >>> redact_fields(["inputs.email"])({"inputs": {"email": "a@b", "q": "hi"}})
    {'inputs': {'q': 'hi'}}
    """
    parsed = [path.split(".") for path in paths if path]

    def redact(trace: dict[str, Any]) -> dict[str, Any]:
        for parts in parsed:
            if parts[0] == "modules" and len(parts) > 1:
                for step in trace.get("modules") or []:
                    _drop(step, parts[1:])
            else:
                _drop(trace, parts)
        return trace

    return redact


def _drop(holder: Any, parts: list[str]) -> None:
    for part in parts[:-1]:
        holder = holder.get(part) if isinstance(holder, dict) else None
    if isinstance(holder, dict):
        holder.pop(parts[-1], None)


class Recorder:
    """The trace store of one server, with the versions and models of the programs it serves."""

    def __init__(self, store: TraceStore, programs: Mapping[str, ServedProgram]) -> None:
        self.store = store
        self.lost = 0
        """Traces the writer could not commit (a full disk): counted and logged, never an error to a caller."""
        self._queue: list[dict[str, Any]] = []
        self._written = 0
        self._queued = 0
        self._changed = threading.Condition()
        self._closed = False
        self._writer = threading.Thread(target=self._write_loop, name="promptgym-trace-writer", daemon=True)
        self._writer.start()
        atexit.register(self.close)  # a process leaving without the server's shutdown still commits its queue
        self.versions: dict[str, str] = {}
        self.models: dict[str, str] = {}
        for name, served in programs.items():
            self.versions[name] = program_version(served.program)
            self.models[name] = models_of(served.program)
            store.describe_program(name, self.versions[name], input_schema=served.input_schema,
                                   output_schema=served.output_schema, source=served.source)

    @classmethod
    def open(cls, folder: str | Path, programs: Mapping[str, ServedProgram], *, max_age_days: float | None = None,
             max_traces: int | None = None, redact: Redactor | None = None) -> "Recorder":
        """The recorder writing ``folder/traces.db`` (made if needed); ``ValueError`` naming the folder if it can't be."""
        path = Path(folder)
        if path.exists() and not path.is_dir():
            raise ValueError(f"--record {folder}: not a folder (traces go to {folder}/{STORE_FILE})")
        try:
            store = TraceStore(path / STORE_FILE, max_age_days=max_age_days, max_traces=max_traces, redact=redact)
        except OSError as error:
            raise ValueError(f"--record {folder}: can't write the trace store there ({error.strerror or error})") \
                from None
        return cls(store, programs)

    def describe_model(self, name: str) -> None:
        """A model chatted with directly: its traces are messages in, content out."""
        if name not in self.versions:
            self.versions[name], self.models[name] = "", name
            self.store.describe_program(name, "", input_schema={"type": "object"}, output_schema=MODEL_OUTPUT_SCHEMA)

    def record(self, program: str, inputs: Any, call: ServedCall, trace_id: str | None = None) -> str:
        """Queue one call for the writer; its trace id (the trace is committed within ``FLUSH_SECONDS``)."""
        usage = call.usage
        row = {"id": trace_id or new_trace_id(), "created": time.time(), "program": program,
               "version": self.versions.get(program, ""), "inputs": as_json(inputs) if inputs is not None else {},
               "outputs": call.output, "modules": [{"module": step.module, "inputs": step.inputs,
                                                    "outputs": step.outputs} for step in call.steps],
               "model": self.models.get(program, ""), "prompt_tokens": usage.prompt_tokens,
               "completion_tokens": usage.completion_tokens, "latency_ms": round(call.seconds * 1000, 3),
               "error": call.error}
        with self._changed:
            if self._closed:
                raise RuntimeError("the trace recorder is closed")
            self._queue.append(row)
            self._queued += 1
            self._changed.notify_all()
        return row["id"]

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every trace queued so far is committed (or given up as lost)."""
        with self._changed:
            target = self._queued
            self._changed.wait_for(lambda: self._written >= target, timeout=timeout)

    def _write_loop(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queue or self._closed)
                if not self._queue and self._closed:
                    return
            time.sleep(FLUSH_SECONDS if not self._closed else 0)  # let more traces join this transaction
            with self._changed:
                batch, self._queue = self._queue, []
            try:
                self.store.record_many(batch)
            except Exception as error:  # noqa: BLE001 - a full disk must not fail an answer or stop the writer
                self.lost += len(batch)
                logger.warning("%d traces not stored: %s: %s", len(batch), type(error).__name__, error)
            with self._changed:
                self._written += len(batch)
                self._changed.notify_all()

    def feedback(self, body: Any) -> Feedback:
        """Feedback from a request body ``{"trace_id", "rating"?, "correction"?, "comment"?}``; FeedbackError if bad."""
        if not isinstance(body, dict):
            raise FeedbackError(f"body: expected a JSON object with {', '.join(FEEDBACK_FIELDS)}, got "
                                f"{type(body).__name__}", "body", status=400)
        trace_id = body.get("trace_id")
        if not isinstance(trace_id, str) or not trace_id:
            raise FeedbackError("trace_id: expected the id of a served call (its x-promptgym-trace-id header)",
                                "trace_id")
        self.flush()  # a trace answered a moment ago may still be in the queue
        return take_feedback(self.store, trace_id, {key: value for key, value in body.items() if key != "trace_id"})

    def close(self) -> None:
        """Commit what is queued, stop the writer, close the store (again: nothing)."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._changed.notify_all()
        self._writer.join(timeout=60)
        atexit.unregister(self.close)
        self.store.close()
