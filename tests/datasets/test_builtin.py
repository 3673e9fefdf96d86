"""The built-in datasets: sizes, fields, labels, determinism, disjoint splits."""

import importlib
from collections import Counter

import numpy as np
import pytest

from promptgym.core.data_model import DataModel
from promptgym.datasets import (
    arithmetic,
    boolq,
    commonsense_qa,
    gsm8k,
    mmlu_topics,
    nq_open,
)

BUNDLED = [
    # module, default (n_train, n_test), input model, output model, output fields
    (gsm8k, (300, 1019), gsm8k.Question, gsm8k.Answer, ["thinking", "answer"]),
    (boolq, (500, 500), boolq.Question, boolq.Answer, ["answer"]),
    (commonsense_qa, (300, 921), commonsense_qa.Question, commonsense_qa.Answer, ["answer"]),
    (mmlu_topics, (400, 600), mmlu_topics.Question, mmlu_topics.Topic, ["topic"]),
    (nq_open, (500, 3110), nq_open.Question, nq_open.Answer, ["answer"]),
]
IDS = [m.__name__.rsplit(".", 1)[-1] for m, *_ in BUNDLED]


def _key(x):
    return x.model_dump_json()


@pytest.mark.parametrize("module,sizes,x_model,y_model,y_fields", BUNDLED, ids=IDS)
def test_default_sizes_types_and_models(module, sizes, x_model, y_model, y_fields):
    (x_train, y_train), (x_test, y_test) = module.load_data()
    assert (len(x_train), len(x_test)) == sizes
    assert len(y_train) == sizes[0] and len(y_test) == sizes[1]
    assert sum(sizes) == module.SOURCE_SIZE
    for arr in (x_train, y_train, x_test, y_test):
        assert isinstance(arr, np.ndarray) and arr.dtype == object and arr.ndim == 1
    assert all(type(x) is x_model for x in x_train) and all(type(y) is y_model for y in y_test)
    assert issubclass(x_model, DataModel) and issubclass(y_model, DataModel)
    assert list(y_model.model_fields) == y_fields
    assert module.get_input_data_model() is x_model
    assert module.get_output_data_model() is y_model


@pytest.mark.parametrize("module", [m for m, *_ in BUNDLED], ids=IDS)
def test_split_is_seeded_and_disjoint(module):
    (a_x, a_y), (a_tx, _) = module.load_data(seed=0)
    (b_x, b_y), (b_tx, _) = module.load_data(seed=0)
    (c_x, _), _ = module.load_data(seed=1)
    assert [_key(x) for x in a_x] == [_key(x) for x in b_x]
    assert [_key(y) for y in a_y] == [_key(y) for y in b_y]
    assert [_key(x) for x in a_tx] == [_key(x) for x in b_tx]
    assert [_key(x) for x in a_x] != [_key(x) for x in c_x]
    # No example sits in both splits (compare input + target, since a few
    # sources repeat a question text with a different answer).
    train = {(_key(x), _key(y)) for x, y in zip(a_x, a_y)}
    (_, _), (tx, ty) = module.load_data(seed=0)
    assert not train & {(_key(x), _key(y)) for x, y in zip(tx, ty)}


@pytest.mark.parametrize("module", [m for m, *_ in BUNDLED], ids=IDS)
def test_limit_caps_each_split_and_is_a_prefix(module):
    (x_train, y_train), (x_test, y_test) = module.load_data(limit=7)
    assert (len(x_train), len(y_train), len(x_test), len(y_test)) == (7, 7, 7, 7)
    (full_x, _), (full_tx, _) = module.load_data()
    assert [_key(x) for x in x_train] == [_key(x) for x in full_x[:7]]
    assert [_key(x) for x in x_test] == [_key(x) for x in full_tx[:7]]


@pytest.mark.parametrize("module", [m for m, *_ in BUNDLED], ids=IDS)
def test_bad_arguments_are_rejected(module):
    with pytest.raises(ValueError, match="n_train=100000 but the source has only"):
        module.load_data(n_train=100000)
    with pytest.raises(ValueError, match="limit must be a non-negative int"):
        module.load_data(limit=-1)


def test_gsm8k_values():
    (_, _), (x_test, y_test) = gsm8k.load_data(n_train=0)
    assert len(x_test) == 1319  # the whole official test split
    janet = [i for i, x in enumerate(x_test) if x.question.startswith("Janet\u2019s ducks lay 16 eggs")]
    assert len(janet) == 1
    y = y_test[janet[0]]
    assert y.answer == 18.0
    assert "<<" not in y.thinking and "####" not in y.thinking
    assert "16 - 3 - 4 = 9" in y.thinking
    assert all(isinstance(y.answer, float) for y in y_test)
    # Answers written with thousands separators in the source are parsed.
    assert any(y.answer == 1600.0 for y in y_test)
    assert gsm8k.MathQuestion is gsm8k.Question and gsm8k.NumericalAnswerWithThinking is gsm8k.Answer
    assert gsm8k.Question.model_fields["question"].description == "The math word problem"


def test_classification_labels():
    (_, y_train), (_, y_test) = mmlu_topics.load_data()
    counts = Counter(y.topic for y in [*y_train, *y_test])
    assert counts == {label: 250 for label in mmlu_topics.LABELS}
    assert set(Counter(y.topic for y in y_train)) == set(mmlu_topics.LABELS)
    subjects_train, subjects_test = mmlu_topics.load_subjects()
    assert len(subjects_train) == 400 and len(subjects_test) == 600
    by_subject = dict(zip(subjects_train, (y.topic for y in y_train)))
    assert by_subject.get("virology", "other") == "other"
    assert by_subject.get("high_school_psychology", "social_sciences") == "social_sciences"

    (_, y_train), (_, y_test) = boolq.load_data()
    counts = Counter(y.answer for y in [*y_train, *y_test])
    assert set(counts) == {"yes", "no"} and counts["yes"] == 638

    (x_train, y_train), _ = commonsense_qa.load_data()
    assert {y.answer for y in y_train} == set("ABCDE")
    assert all(list(x.choices) == list("ABCDE") for x in x_train)


def test_label_fields_reject_unknown_labels():
    with pytest.raises(ValueError):
        mmlu_topics.Topic(topic="science")
    with pytest.raises(ValueError):
        boolq.Answer(answer="true")


def test_nq_open_answers_align_with_data():
    (_, y_train), (_, y_test) = nq_open.load_data(limit=50)
    answers_train, answers_test = nq_open.load_answers(limit=50)
    assert [a[0] for a in answers_train] == [y.answer for y in y_train]
    assert [a[0] for a in answers_test] == [y.answer for y in y_test]
    assert max(len(a) for a in answers_test) > 1


def test_arithmetic_is_seeded_correct_and_disjoint():
    (x_train, y_train), (x_test, y_test) = arithmetic.load_data()
    assert (len(x_train), len(x_test)) == (200, 100)
    exprs = [x.expression for x in [*x_train, *x_test]]
    assert len(set(exprs)) == 300
    for x, y in zip([*x_train, *x_test], [*y_train, *y_test]):
        assert y.answer == eval(x.expression)
        terms = x.expression.split()[::2]
        assert 2 <= len(terms) <= 3 and all(1 <= int(t) <= 20 for t in terms)
        assert set(x.expression.split()[1::2]) <= {"+", "-"}
    again = arithmetic.load_data()
    assert [x.expression for x in again[0][0]] == [x.expression for x in x_train]
    other = arithmetic.load_data(seed=1)
    assert [x.expression for x in other[0][0]] != [x.expression for x in x_train]
    assert x_train[0].expression == "14 - 2 - 9" and y_train[0].answer == 3


def test_arithmetic_options_and_errors():
    (x, y), _ = arithmetic.load_data(n_train=50, n_test=0, seed=3, min_operands=4,
                                     max_operands=4, max_value=9, operators="*")
    assert all(len(e.expression.split()) == 7 for e in x)
    assert all(b.answer == arithmetic.evaluate(a.expression) for a, b in zip(x, y))
    assert arithmetic.evaluate("2 + 3 * 4") == 14
    with pytest.raises(ValueError, match="unsupported expression"):
        arithmetic.evaluate("__import__('os')")
    with pytest.raises(ValueError, match="allow only"):
        arithmetic.load_data(n_train=100, n_test=0, max_value=2, max_operands=2)
    with pytest.raises(ValueError, match="operators must be"):
        arithmetic.load_data(operators="/")


def test_reachable_from_the_top_level_package():
    import promptgym

    assert promptgym.datasets.gsm8k.Question is gsm8k.Question
    (x_train, _), _ = promptgym.datasets.mmlu_topics.load_data(limit=2)
    assert len(x_train) == 2


def test_dates_are_seeded_correct_and_disjoint():
    import datetime as dt
    import re

    from promptgym.datasets import dates

    (x_train, y_train), (x_test, y_test) = dates.load_data()
    assert (len(x_train), len(x_test)) == (200, 100)
    texts = [x.text for x in [*x_train, *x_test]]
    assert len(set(texts)) == 300
    months = ["January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December"]
    for x, y in zip([*x_train, *x_test], [*y_train, *y_test]):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", y.date)
        day = dt.date.fromisoformat(y.date)
        assert 1990 <= day.year <= 2030
        # The sentence spells the same year, month and day.
        assert str(day.year) in x.text and months[day.month - 1][:3] in x.text
        assert re.search(rf"\b{day.day}(st|nd|rd|th)?\b", x.text)
    assert x_train[0].text == "The warranty is valid until November 18th, 2027."
    assert y_train[0].date == "2027-11-18"
    assert [x.text for x in dates.load_data()[0][0]] == texts[:200]
    assert [x.text for x in dates.load_data(seed=1)[0][0]] != texts[:200]
    (x, _), (xt, _) = dates.load_data(n_train=5, n_test=0)
    assert len(x) == 5 and len(xt) == 0 and [e.text for e in x] == texts[:5]


def test_weekday_spellings_match_the_calendar():
    import datetime as dt

    from promptgym.datasets import dates

    (x, y), _ = dates.load_data(n_train=300, n_test=0, seed=2)
    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    checked = 0
    for a, b in zip(x, y):
        for name in names:
            if name in a.text:
                assert names[dt.date.fromisoformat(b.date).weekday()] == name
                checked += 1
    assert checked > 20


def test_dates_output_format():
    from promptgym.datasets import dates

    (x_iso, y_iso), _ = dates.load_data(n_train=20, n_test=0)
    (x_dmy, y_dmy), _ = dates.load_data(n_train=20, n_test=0, output_format="%d.%m.%Y")
    assert [x.text for x in x_iso] == [x.text for x in x_dmy]
    for a, b in zip(y_iso, y_dmy):
        year, month, day = a.date.split("-")
        assert b.date == f"{day}.{month}.{year}"
    assert y_dmy[0].date == "18.11.2027"
    for bad in ("%Y-%m", "%Y-%m-%d %H", "%d/%d/%Y", "plain"):
        with pytest.raises(ValueError, match="output_format must use each of %Y, %m and %d"):
            dates.load_data(output_format=bad)


@pytest.mark.parametrize("name", IDS + ["arithmetic", "dates", "reasoning_gym"])
def test_every_module_exports_the_dataset_api(name):
    # __all__ is built from the shared lists: each name must exist, and the
    # getters and load_data must be the module's own (not another module's).
    module = importlib.import_module(f"promptgym.datasets.{name}")
    assert {"get_input_data_model", "get_output_data_model", "load_data"} <= set(module.__all__)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
    assert module.get_input_data_model().__module__ == module.__name__
    assert module.get_output_data_model.__doc__ == f"The target DataModel (``{module.get_output_data_model().__name__}``)."
    if name in IDS:
        assert isinstance(module.SOURCE_SIZE, int) and isinstance(module.LICENSE, str)
