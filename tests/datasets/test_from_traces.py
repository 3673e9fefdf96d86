"""datasets.from_traces: corrections as labels, good ratings as labels, dedup, a held-out split by time."""

from __future__ import annotations

import pytest

import promptgym as pg
from promptgym.datasets import DatasetError, from_traces
from promptgym.traces import TraceStore


class Question(pg.DataModel):
    question: str


class Answer(pg.DataModel):
    answer: str


def filled_store() -> TraceStore:
    store = TraceStore(":memory:")
    for i in range(10):
        trace_id = store.record(program="qa", version="v1", inputs={"question": f"q{i}"},
                                outputs={"answer": f"wrong{i}"}, created=1000.0 + i)
        if i % 2 == 0:
            store.add_feedback(trace_id, correction={"answer": f"right{i}"})
        elif i in (3, 5):
            store.add_feedback(trace_id, rating=1.0)
        else:
            store.add_feedback(trace_id, rating=0.0)
    store.record(program="other", inputs={"question": "x"}, outputs={"answer": "y"}, created=2000.0)
    return store


def test_corrections_are_labels_and_unrated_or_badly_rated_traces_are_left_out():
    x, y = from_traces(filled_store(), Question, Answer, program="qa")
    assert [item.question for item in x] == ["q0", "q2", "q4", "q6", "q8"]
    assert [item.answer for item in y] == ["right0", "right2", "right4", "right6", "right8"]


def test_min_rating_takes_a_well_rated_output_as_its_label():
    x, y = from_traces(filled_store(), Question, Answer, program="qa", min_rating=0.5)
    assert [item.question for item in x] == ["q0", "q2", "q3", "q4", "q5", "q6", "q8"]
    assert y[2].answer == "wrong3"


def test_holdout_keeps_the_newest_traces_apart_in_time_order():
    (x_train, _), (x_test, y_test) = from_traces(filled_store(), Question, Answer, program="qa", holdout=0.4)
    assert [item.question for item in x_train] == ["q0", "q2", "q4"]
    assert [item.question for item in x_test] == ["q6", "q8"] and y_test[1].answer == "right8"


def test_an_input_seen_twice_is_one_example_with_its_latest_label():
    store = filled_store()
    again = store.record(program="qa", inputs={"question": "q0"}, outputs={"answer": "?"}, created=3000.0)
    store.add_feedback(again, correction={"answer": "newest"})
    x, y = from_traces(store, Question, Answer, program="qa")
    assert [item.question for item in x] == ["q2", "q4", "q6", "q8", "q0"] and y[-1].answer == "newest"


def test_a_stored_label_that_no_longer_fits_names_the_trace(tmp_path):
    store = TraceStore(tmp_path / "traces.db")
    trace_id = store.record(program="qa", inputs={"question": "q"})
    store.add_feedback(trace_id, correction={"reply": "x"})
    with pytest.raises(DatasetError, match=f"trace {trace_id}: its label does not fit Answer"):
        from_traces(tmp_path, Question, Answer)
    with pytest.raises(DatasetError, match="no trace store"):
        from_traces(tmp_path / "missing", Question, Answer)
