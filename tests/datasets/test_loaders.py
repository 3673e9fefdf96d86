"""Generic JSONL/CSV loaders: mapping, types, and errors that name line and field."""

import gzip
import json

import numpy as np
import pytest

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets import (
    DatasetError,
    load_csv,
    load_jsonl,
    to_object_array,
    train_test_split,
)


class Question(DataModel):
    question: str = Field(description="A question")


class Answer(DataModel):
    answer: int = Field(description="The answer")
    unit: str = Field(default="", description="Optional unit")


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_default_mapping(tmp_path):
    p = write(tmp_path / "d.jsonl",
              '{"question": "2+2?", "answer": 4}\n\n{"question": "3+3?", "answer": 6, "unit": "cm"}\n')
    x, y = load_jsonl(p, Question, Answer)
    assert isinstance(x, np.ndarray) and x.dtype == object and x.shape == (2,)
    assert [q.question for q in x] == ["2+2?", "3+3?"]
    assert [(a.answer, a.unit) for a in y] == [(4, ""), (6, "cm")]


def test_jsonl_field_mapping_nested_keys_and_limit(tmp_path):
    rows = [{"prompt": f"q{i}", "label": {"value": i, "tags": ["kg"]}} for i in range(5)]
    p = write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    x, y = load_jsonl(p, Question, Answer, x_fields={"question": "prompt"},
                      y_fields={"answer": "label.value", "unit": "label.tags.0"}, limit=3)
    assert [q.question for q in x] == ["q0", "q1", "q2"]
    assert [(a.answer, a.unit) for a in y] == [(0, "kg"), (1, "kg"), (2, "kg")]


def test_jsonl_inputs_only_and_gzip(tmp_path):
    p = tmp_path / "d.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write('{"question": "a"}\n{"question": "b"}\n')
    x = load_jsonl(p, Question)
    assert isinstance(x, np.ndarray) and [q.question for q in x] == ["a", "b"]


def test_jsonl_missing_key_names_line_and_field(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"question": "ok", "answer": 1}\n\n{"question": "bad"}\n')
    with pytest.raises(DatasetError) as info:
        load_jsonl(p, Question, Answer)
    msg = str(info.value)
    assert "d.jsonl, line 3:" in msg
    assert "field 'answer' of Answer: key 'answer' is missing" in msg
    assert "['question']" in msg
    assert info.value.line == 3 and info.value.field == "answer"


def test_jsonl_wrong_type_names_line_field_key_and_value(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"q": "x", "a": 1}\n{"q": "y", "a": "four"}\n')
    with pytest.raises(DatasetError) as info:
        load_jsonl(p, Question, Answer, x_fields={"question": "q"}, y_fields={"answer": "a"})
    msg = str(info.value)
    assert "line 2:" in msg and "field 'answer' of Answer (from key 'a')" in msg
    assert "valid integer" in msg and "'four'" in msg
    assert (info.value.line, info.value.field) == (2, "answer")


def test_jsonl_invalid_json_and_non_object(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"question": "a"}\n{"question": \n')
    with pytest.raises(DatasetError, match=r"d\.jsonl, line 2: invalid JSON"):
        load_jsonl(p, Question)
    p = write(tmp_path / "e.jsonl", '["a list"]\n')
    with pytest.raises(DatasetError, match=r"e\.jsonl, line 1: expected a JSON object, got list"):
        load_jsonl(p, Question)


def test_mapping_errors(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"question": "a", "answer": 1}\n')
    with pytest.raises(DatasetError, match="field mapping names \\['answr'\\]"):
        load_jsonl(p, Question, Answer, y_fields={"answr": "answer"})
    with pytest.raises(DatasetError, match="field 'answer' of Answer is required but the field "
                                           "mapping does not say which key feeds it"):
        load_jsonl(p, Question, Answer, y_fields={"unit": "question"})
    with pytest.raises(DatasetError, match="no such file"):
        load_jsonl(tmp_path / "nope.jsonl", Question)


def test_extra_keys_are_ignored(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"question": "a", "answer": 1, "id": 7, "meta": {}}\n')
    x, y = load_jsonl(p, Question, Answer)
    assert x[0].question == "a" and y[0].answer == 1


def test_csv_mapping_conversion_and_defaults(tmp_path):
    p = write(tmp_path / "d.csv", 'text,label,unit\n"Hi, there",3,\n\nsecond,4,m\n')
    x, y = load_csv(p, Question, Answer, x_fields={"question": "text"},
                    y_fields={"answer": "label", "unit": "unit"})
    assert [q.question for q in x] == ["Hi, there", "second"]
    assert [(a.answer, a.unit) for a in y] == [(3, ""), (4, "m")]


def test_csv_bad_cell_names_physical_line_and_field(tmp_path):
    # Line 1 header, line 2 ok, line 3 blank, line 4 a multi-line quoted cell, line 6 bad.
    p = write(tmp_path / "d.csv", 'question,answer\na,1\n\n"multi\nline",2\nb,two\n')
    with pytest.raises(DatasetError) as info:
        load_csv(p, Question, Answer)
    assert "d.csv, line 6:" in str(info.value)
    assert "field 'answer' of Answer (from key 'answer')" in str(info.value)
    assert "'two'" in str(info.value)
    assert (info.value.line, info.value.field) == (6, "answer")


def test_csv_ragged_rows_and_empty_file(tmp_path):
    p = write(tmp_path / "d.csv", "question,answer\na,1,extra\n")
    with pytest.raises(DatasetError, match=r"line 2: 3 cells but the header has 2 columns"):
        load_csv(p, Question, Answer)
    p = write(tmp_path / "e.csv", "question,answer\na\n")
    with pytest.raises(DatasetError, match=r"line 2: 1 cells but the header has 2 columns"):
        load_csv(p, Question, Answer)
    p = write(tmp_path / "f.csv", "")
    with pytest.raises(DatasetError, match=r"line 1: empty file, expected a header row"):
        load_csv(p, Question, Answer)


def test_csv_missing_column_names_field(tmp_path):
    p = write(tmp_path / "d.tsv", "question\tresult\na\t1\n")
    with pytest.raises(DatasetError, match=r"line 2: field 'answer' of Answer: key 'answer' is missing"):
        load_csv(p, Question, Answer, delimiter="\t")
    _, y = load_csv(p, Question, Answer, y_fields={"answer": "result"}, delimiter="\t")
    assert y[0].answer == 1


def test_to_object_array_keeps_models_whole():
    arr = to_object_array([Question(question="a"), Question(question="b")])
    assert arr.shape == (2,) and arr.dtype == object and arr[1].question == "b"
    assert to_object_array([]).shape == (0,)


def test_train_test_split_seeded():
    x = to_object_array(Question(question=str(i)) for i in range(10))
    y = to_object_array(Answer(answer=i) for i in range(10))
    (xa, ya), (xt, yt) = train_test_split(x, y, test_size=0.3, seed=0)
    assert (len(xa), len(xt)) == (7, 3)
    assert all(int(q.question) == a.answer for q, a in zip([*xa, *xt], [*ya, *yt]))
    assert sorted(int(q.question) for q in [*xa, *xt]) == list(range(10))
    (xb, _), _ = train_test_split(x, y, test_size=0.3, seed=0)
    assert [q.question for q in xb] == [q.question for q in xa]
    a, b = train_test_split(x, test_size=4, seed=1)
    assert (len(a), len(b)) == (6, 4)
    with pytest.raises(ValueError, match="x has 10 items but y has 9"):
        train_test_split(x, y[:9])
    with pytest.raises(ValueError, match="must be in \\(0, 1\\)"):
        train_test_split(x, y, test_size=1.5)
