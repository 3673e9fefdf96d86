"""Operators on data models: values are computed, classes and symbolic data models build steps."""

import pytest

import promptgym as pg


class Query(pg.DataModel):
    query: str


class Answer(pg.DataModel):
    answer: str


A, B = Answer(answer="Paris"), Answer(answer="Lyon")


@pytest.mark.parametrize(("a", "b", "expected"), [
    (A, B, {"and": {"answer": "Paris", "answer_1": "Lyon"}, "or": {"answer": "Paris", "answer_1": "Lyon"}, "xor": None}),
    (A, None, {"and": None, "or": {"answer": "Paris"}, "xor": {"answer": "Paris"}}),
    (None, B, {"and": None, "or": {"answer": "Lyon"}, "xor": {"answer": "Lyon"}}),
])
def test_the_truth_table_on_values(a, b, expected):
    def json(value):
        return None if value is None else value.get_json()

    results = {"and": (a & b) if a is not None else (b.__rand__(a)),
               "or": (a | b) if a is not None else (b.__ror__(a)),
               "xor": (a ^ b) if a is not None else (b.__rxor__(a))}
    assert {key: json(value) for key, value in results.items()} == expected


def test_concatenation_needs_both_values_and_not_is_always_none():
    assert (A + B).get_json() == {"answer": "Paris", "answer_1": "Lyon"}
    with pytest.raises(ValueError, match="x2=None"):
        A + None
    assert ~A is None
    assert isinstance(A + Query(query="q"), pg.JsonDataModel)


def test_operators_on_classes_give_placeholders_of_the_joined_schema():
    joined = Query + Answer
    assert isinstance(joined, pg.SymbolicDataModel) and joined.keys() == ["query", "answer"]
    assert (Query | Answer).keys() == ["query"]        # Or's placeholder: the first input's schema
    assert (~Query).keys() == ["query"]
    assert Answer | None == Answer | None              # still a type annotation (Optional[Answer])


def test_contains_compares_fields():
    assert "query" in Query and Query in (Query + Answer) and Answer not in Query
    assert "answer" in A and A in (A + Query(query="q")).to_data_model()


def test_json_data_model_reads_like_a_data_model():
    value = pg.JsonDataModel(data_model=A)
    assert value.get("answer") == value["answer"] == "Paris" and value.keys() == ["answer"]
    assert value.get_schema() == Answer.get_schema()
    with pytest.raises(ValueError, match="Couldn't get the JSON"):
        pg.JsonDataModel(data_model=Answer)
    assert value.factorize().get_json() == {"answer": "Paris"}
    assert (value + value).factorize().get_json() == {"answers": ["Paris", "Paris"]}


async def test_ops_functions_work_on_values_and_symbols():
    assert (await pg.ops.logical_or(None, A)).get_json() == {"answer": "Paris"}
    x = pg.Input(data_model=Answer)
    y = await pg.ops.out_mask(await pg.ops.concat(x, x), mask=["answer"])
    assert isinstance(y, pg.SymbolicDataModel) and y.keys() == []
