"""``TraceStore``: served calls and their feedback in one SQLite file that many server processes write at once.

SQLite rather than DuckDB (the knowledge base's engine): DuckDB lets one
process hold a database file for writing, while ``serve --workers N`` runs N
processes that each append; SQLite's write-ahead log lets every one of them
commit (each waits its turn, ``busy_timeout``) and readers never block
writers. Every write is one transaction: a kill loses at most the call being
recorded, never one already committed.

Inputs and outputs are what users sent and got: personal data. ``redact``
(a function of the trace's dict, returning the dict to store) drops or masks
fields before anything reaches the disk; retention (``max_age_days``,
``max_traces``) deletes the oldest traces and their feedback.

    store = TraceStore(":memory:")
    trace_id = store.record(program="qa", inputs={"q": "hi"}, outputs={"a": "hello"})
    store.get(trace_id).outputs                     # {'a': 'hello'}
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    program TEXT NOT NULL,
    version TEXT NOT NULL DEFAULT '',
    inputs TEXT NOT NULL,
    outputs TEXT,
    modules TEXT NOT NULL DEFAULT '[]',
    model TEXT NOT NULL DEFAULT '',
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL NOT NULL DEFAULT 0,
    error TEXT
);
CREATE INDEX IF NOT EXISTS traces_by_program ON traces (program, version, created);
CREATE INDEX IF NOT EXISTS traces_by_time ON traces (created);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trace_id TEXT NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    created REAL NOT NULL,
    rating REAL,
    correction TEXT,
    comment TEXT
);
CREATE INDEX IF NOT EXISTS feedback_by_trace ON feedback (trace_id);
CREATE TABLE IF NOT EXISTS programs (
    program TEXT NOT NULL,
    version TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    output_schema TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (program, version)
);
"""

PRUNE_EVERY = 200
"""Records between two retention passes (a pass is one indexed DELETE)."""

Redactor = Callable[[dict[str, Any]], dict[str, Any]]


class UnknownTraceError(KeyError):
    """Feedback for a trace id the store does not hold (never recorded, or past retention)."""


@dataclass(frozen=True)
class Feedback:
    """What a person said about a trace: a rating, a corrected output, a comment (any of them)."""

    trace_id: str
    created: float
    rating: float | None = None
    correction: dict[str, Any] | None = None
    comment: str | None = None


@dataclass(frozen=True)
class Trace:
    """One served call: the program and version, what came in and went out, each module's output, cost."""

    id: str
    created: float
    program: str
    version: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    modules: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    error: str | None = None
    feedback: tuple[Feedback, ...] = ()

    @property
    def rating(self) -> float | None:
        """The latest rating given, or None."""
        rated = [item.rating for item in self.feedback if item.rating is not None]
        return rated[-1] if rated else None

    @property
    def correction(self) -> dict[str, Any] | None:
        """The latest corrected output given, or None."""
        corrected = [item.correction for item in self.feedback if item.correction is not None]
        return corrected[-1] if corrected else None

    @property
    def comments(self) -> list[str]:
        return [item.comment for item in self.feedback if item.comment]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "created": self.created, "program": self.program, "version": self.version,
                "inputs": self.inputs, "outputs": self.outputs, "modules": self.modules, "model": self.model,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "latency_ms": self.latency_ms, "error": self.error,
                "feedback": [{"created": item.created, "rating": item.rating, "correction": item.correction,
                              "comment": item.comment} for item in self.feedback]}


def new_trace_id() -> str:
    """A 32-hex-digit id, unique across processes (it also becomes the OpenAI answer's ``id``)."""
    return uuid.uuid4().hex


class TraceStore:
    """Traces and feedback in SQLite at ``path`` (``":memory:"`` for tests); safe across threads and processes.

    Args:
        path: the database file (its folder is made); ``":memory:"`` keeps it in this process.
        max_age_days: traces older than this are deleted (None: kept).
        max_traces: past this many, the oldest are deleted (None: no bound).
        redact: applied to each trace's dict (``inputs``, ``outputs``, ``modules``...) before it is stored.
    """

    def __init__(self, path: str | Path, *, max_age_days: float | None = None, max_traces: int | None = None,
                 redact: Redactor | None = None) -> None:
        if max_age_days is not None and not max_age_days > 0:
            raise ValueError(f"TraceStore: max_age_days must be > 0 or None, got {max_age_days!r}")
        if max_traces is not None and not (isinstance(max_traces, int) and max_traces >= 1):
            raise ValueError(f"TraceStore: max_traces must be an integer >= 1 or None, got {max_traces!r}")
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.max_age_days, self.max_traces, self.redact = max_age_days, max_traces, redact
        self._lock = threading.Lock()
        self._since_prune = 0
        try:
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a commit survives a process kill
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as error:
            raise ValueError(f"trace store {self.path}: not a readable SQLite database ({error})") from None

    # -- writing ---------------------------------------------------------------------------

    def record(self, *, program: str, inputs: dict[str, Any], outputs: dict[str, Any] | None = None,
               version: str = "", modules: list[dict[str, Any]] | None = None, model: str = "",
               prompt_tokens: int = 0, completion_tokens: int = 0, latency_ms: float = 0.0,
               error: str | None = None, trace_id: str | None = None, created: float | None = None) -> str:
        """Store one served call; its id (``trace_id`` if given)."""
        row = {"id": trace_id or new_trace_id(), "created": time.time() if created is None else created,
               "program": program, "version": version, "inputs": inputs, "outputs": outputs,
               "modules": modules or [], "model": model, "prompt_tokens": int(prompt_tokens),
               "completion_tokens": int(completion_tokens), "latency_ms": float(latency_ms), "error": error}
        self.record_many([row])
        return row["id"]

    def record_many(self, rows: list[dict[str, Any]]) -> None:
        """Store several calls (dicts with :meth:`record`'s keywords, ``id`` and ``created`` set) in one transaction."""
        if self.redact is not None:
            rows = [self._redacted(row) for row in rows]
        values = [(row["id"], row["created"], row["program"], row.get("version", ""), _dump(row.get("inputs") or {}),
                   None if row.get("outputs") is None else _dump(row["outputs"]), _dump(row.get("modules") or []),
                   row.get("model", ""), int(row.get("prompt_tokens", 0)), int(row.get("completion_tokens", 0)),
                   float(row.get("latency_ms", 0.0)), row.get("error")) for row in rows]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO traces (id, created, program, version, inputs, outputs, modules, model, prompt_tokens,"
                    " completion_tokens, latency_ms, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._since_prune += len(values)
            if self._since_prune >= PRUNE_EVERY:
                self._prune_locked()

    def _redacted(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` through the user's hook: a field it leaves out is not stored; id and time are the store's."""
        kept = self.redact(dict(row))
        if not isinstance(kept, dict):
            raise TypeError(f"TraceStore's redact hook must return a dict, got {type(kept).__name__}")
        defaults = {"program": row["program"], "version": "", "inputs": {}, "outputs": None, "modules": [],
                    "model": "", "prompt_tokens": 0, "completion_tokens": 0, "latency_ms": 0.0, "error": None}
        return {**defaults, **{key: kept[key] for key in defaults if key in kept},
                "id": row["id"], "created": row["created"]}

    def describe_program(self, program: str, version: str, *, input_schema: dict[str, Any],
                         output_schema: dict[str, Any], source: str = "") -> None:
        """Keep a served program's schemas, so feedback and the review page can check corrections without it."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO programs (program, version, input_schema, output_schema, source)"
                             " VALUES (?, ?, ?, ?, ?)", (program, version, _dump(input_schema), _dump(output_schema),
                                                         source))

    def program_schemas(self, program: str, version: str = "") -> tuple[dict[str, Any], dict[str, Any]] | None:
        """``(input_schema, output_schema)`` of a described program version, or None."""
        with self._lock:
            row = self._db.execute("SELECT input_schema, output_schema FROM programs WHERE program = ? AND version = ?",
                                   (program, version)).fetchone()
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    def programs(self) -> list[tuple[str, str]]:
        """Every ``(program, version)`` that has traces, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT program, version FROM traces GROUP BY program, version"
                                    " ORDER BY MIN(created)").fetchall()
        return [(row[0], row[1]) for row in rows]

    def add_feedback(self, trace_id: str, *, rating: float | None = None, correction: dict[str, Any] | None = None,
                     comment: str | None = None) -> Feedback:
        """Attach feedback to a trace (UnknownTraceError if the store has no such trace)."""
        if rating is None and correction is None and not comment:
            raise ValueError("feedback needs a rating, a correction or a comment")
        if rating is not None and not (isinstance(rating, (int, float)) and math.isfinite(rating)):
            raise ValueError(f"rating must be a finite number, got {rating!r}")
        item = Feedback(trace_id=trace_id, created=time.time(), rating=None if rating is None else float(rating),
                        correction=correction, comment=comment)
        with self._lock:
            if self._db.execute("SELECT 1 FROM traces WHERE id = ?", (trace_id,)).fetchone() is None:
                raise UnknownTraceError(trace_id)
            self._db.execute("INSERT INTO feedback (trace_id, created, rating, correction, comment) VALUES (?, ?, ?, ?, ?)",
                             (trace_id, item.created, item.rating, None if correction is None else _dump(correction),
                              comment))
        return item

    def prune(self) -> int:
        """Apply retention now; the number of traces deleted."""
        with self._lock:
            return self._prune_locked()

    def _prune_locked(self) -> int:
        self._since_prune = 0
        deleted = 0
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if self.max_age_days is not None:
                cutoff = time.time() - self.max_age_days * 86400
                deleted += self._db.execute("DELETE FROM traces WHERE created < ?", (cutoff,)).rowcount
            if self.max_traces is not None:
                deleted += self._db.execute(
                    "DELETE FROM traces WHERE id IN (SELECT id FROM traces ORDER BY created DESC LIMIT -1 OFFSET ?)",
                    (self.max_traces,)).rowcount
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return deleted

    # -- reading ---------------------------------------------------------------------------

    def get(self, trace_id: str) -> Trace | None:
        """The trace with its feedback, or None."""
        found = self.traces(ids=[trace_id])
        return found[0] if found else None

    def traces(self, *, program: str | None = None, version: str | None = None, since: float | None = None,
               until: float | None = None, rated: bool | None = None, corrected: bool | None = None,
               ids: list[str] | None = None, limit: int | None = None, newest_first: bool = False) -> list[Trace]:
        """Traces matching every filter given, oldest first (``newest_first`` for a review page)."""
        where, params = [], []
        for column, value in (("program", program), ("version", version)):
            if value is not None:
                where.append(f"t.{column} = ?")
                params.append(value)
        if since is not None:
            where.append("t.created >= ?")
            params.append(since)
        if until is not None:
            where.append("t.created < ?")
            params.append(until)
        if ids is not None:
            where.append(f"t.id IN ({', '.join('?' * len(ids))})")
            params.extend(ids)
        if rated is not None:
            where.append(("" if rated else "NOT ") + "EXISTS (SELECT 1 FROM feedback f WHERE f.trace_id = t.id"
                         " AND f.rating IS NOT NULL)")
        if corrected is not None:
            where.append(("" if corrected else "NOT ") + "EXISTS (SELECT 1 FROM feedback f WHERE f.trace_id = t.id"
                         " AND f.correction IS NOT NULL)")
        query = ("SELECT id, created, program, version, inputs, outputs, modules, model, prompt_tokens,"
                 " completion_tokens, latency_ms, error FROM traces t")
        if where:
            query += " WHERE " + " AND ".join(where)
        query += f" ORDER BY t.created {'DESC' if newest_first else 'ASC'}, t.id"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
            feedback = self._feedback_locked([row[0] for row in rows])
        return [Trace(id=row[0], created=row[1], program=row[2], version=row[3], inputs=json.loads(row[4]),
                      outputs=None if row[5] is None else json.loads(row[5]), modules=json.loads(row[6]),
                      model=row[7], prompt_tokens=row[8], completion_tokens=row[9], latency_ms=row[10],
                      error=row[11], feedback=tuple(feedback.get(row[0], ()))) for row in rows]

    def _feedback_locked(self, trace_ids: list[str]) -> dict[str, list[Feedback]]:
        found: dict[str, list[Feedback]] = {}
        for start in range(0, len(trace_ids), 500):  # SQLite's bound on host parameters
            chunk = trace_ids[start:start + 500]
            rows = self._db.execute(
                f"SELECT trace_id, created, rating, correction, comment FROM feedback WHERE trace_id IN "
                f"({', '.join('?' * len(chunk))}) ORDER BY created, id", chunk).fetchall()
            for trace_id, created, rating, correction, comment in rows:
                found.setdefault(trace_id, []).append(Feedback(
                    trace_id=trace_id, created=created, rating=rating,
                    correction=None if correction is None else json.loads(correction), comment=comment))
        return found

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM traces").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "TraceStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TraceStore({self.path!r})"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
