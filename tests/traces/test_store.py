"""TraceStore: record, feedback, filters, retention, redaction, and many processes writing one file."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest

from promptgym.traces import TraceStore, UnknownTraceError


def test_a_recorded_trace_reads_back_with_its_feedback(tmp_path):
    store = TraceStore(tmp_path / "t" / "traces.db")
    trace_id = store.record(program="qa", version="v1", inputs={"question": "2+2?"}, outputs={"answer": "4"},
                            modules=[{"module": "generator", "output": {"answer": "4"}}], model="openai/x",
                            prompt_tokens=12, completion_tokens=3, latency_ms=41.5)
    store.add_feedback(trace_id, rating=0.0, comment="too short")
    store.add_feedback(trace_id, correction={"answer": "four"})
    trace = TraceStore(tmp_path / "t" / "traces.db").get(trace_id)  # another connection: it was committed
    assert (trace.program, trace.version, trace.inputs, trace.outputs) == ("qa", "v1", {"question": "2+2?"},
                                                                          {"answer": "4"})
    assert (trace.prompt_tokens, trace.completion_tokens, trace.latency_ms) == (12, 3, 41.5)
    assert (trace.rating, trace.correction, trace.comments) == (0.0, {"answer": "four"}, ["too short"])


def test_feedback_for_an_unknown_trace_or_with_nothing_in_it_is_refused():
    store = TraceStore(":memory:")
    with pytest.raises(UnknownTraceError):
        store.add_feedback("nope", rating=1)
    trace_id = store.record(program="qa", inputs={})
    with pytest.raises(ValueError, match="a rating, a correction or a comment"):
        store.add_feedback(trace_id)
    with pytest.raises(ValueError, match="finite"):
        store.add_feedback(trace_id, rating=float("nan"))


def test_filters_by_program_version_time_and_rating():
    store = TraceStore(":memory:")
    ids = [store.record(program=program, version=version, inputs={"i": i}, created=100.0 + i)
           for i, (program, version) in enumerate([("qa", "a"), ("qa", "b"), ("other", "a"), ("qa", "b")])]
    store.add_feedback(ids[3], rating=1)
    assert [t.inputs["i"] for t in store.traces(program="qa")] == [0, 1, 3]
    assert [t.inputs["i"] for t in store.traces(program="qa", version="b")] == [1, 3]
    assert [t.inputs["i"] for t in store.traces(since=101, until=103)] == [1, 2]
    assert [t.inputs["i"] for t in store.traces(rated=True)] == [3]
    assert [t.inputs["i"] for t in store.traces(rated=False, newest_first=True)] == [2, 1, 0]


def test_retention_deletes_the_oldest_traces_and_their_feedback():
    store = TraceStore(":memory:", max_traces=3)
    ids = [store.record(program="qa", inputs={"i": i}, created=float(i)) for i in range(5)]
    store.add_feedback(ids[0], rating=1)
    assert store.prune() == 2
    assert [t.inputs["i"] for t in store.traces()] == [2, 3, 4]
    assert store._db.execute("SELECT COUNT(*) FROM feedback").fetchone()[0] == 0
    aged = TraceStore(":memory:", max_age_days=1)
    aged.record(program="qa", inputs={"old": True}, created=0.0)
    aged.record(program="qa", inputs={"new": True})
    assert aged.prune() == 1 and [t.inputs for t in aged.traces()] == [{"new": True}]


def test_redaction_drops_what_the_hook_leaves_out_before_it_is_stored(tmp_path):
    def drop_email(record):
        return {**record, "inputs": {k: v for k, v in record["inputs"].items() if k != "email"}}

    store = TraceStore(tmp_path / "traces.db", redact=drop_email)
    trace_id = store.record(program="qa", inputs={"question": "hi", "email": "a@b.c"}, outputs={"answer": "yo"})
    assert store.get(trace_id).inputs == {"question": "hi"}
    assert b"a@b.c" not in (tmp_path / "traces.db").read_bytes() + (tmp_path / "traces.db-wal").read_bytes()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    bad = tmp_path / "traces.db"
    bad.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ValueError, match="not a readable SQLite database"):
        TraceStore(bad)


def _write_many(path: str, worker: int, n: int) -> None:
    store = TraceStore(path)
    for i in range(n):
        store.record(program="qa", inputs={"worker": worker, "i": i})


def test_four_processes_writing_at_once_lose_no_trace(tmp_path):
    path = str(tmp_path / "traces.db")
    TraceStore(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(path, w, 150)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
    assert [process.exitcode for process in workers] == [0, 0, 0, 0]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM traces").fetchone()[0] == 600
