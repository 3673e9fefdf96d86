"""A program built on something that is not a symbolic data model says which side and what it got; synalinks'
ValueError and promptgym's TypeError both catch it."""

from __future__ import annotations

import pytest

import promptgym as pg
from tests.support import Answer, Question


@pytest.mark.parametrize("error", [TypeError, ValueError])
def test_a_non_symbolic_input_or_output_is_refused_by_name(error: type[Exception]) -> None:
    question, answer = pg.Input(data_model=Question, name="q"), pg.Input(data_model=Answer, name="a")
    with pytest.raises(error, match=r"All `inputs` values must be SymbolicDataModels .*got 'input_a'"):
        pg.programs.Functional({"a": "input_a", "b": answer}, question + answer)
    with pytest.raises(error, match=r"All `outputs` values must be SymbolicDataModels .*got 'outputs'"):
        pg.programs.Functional({"a": question, "b": answer}, "outputs")
