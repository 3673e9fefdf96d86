"""assign_variables: a candidate's values and models onto a program, the one path of load_candidate and fit."""

from __future__ import annotations

import pytest

from promptgym.modules.model_choice import MODELS_KEY, assign_variables
from tests.support import echo_lm, functional_program


async def test_a_candidate_gives_its_values_and_models_and_an_unknown_variable_is_named():
    program = await functional_program(echo_lm())
    generator = program.modules[-1]  # its name carries a suffix when other tests made generators first
    (variable,) = generator.variables
    value = {**variable.get_json(), "instructions": "Shout."}
    assign_variables(program, {variable.name: value, MODELS_KEY: {generator.name: "ollama/other"}})
    assert variable.get("instructions") == "Shout." and generator.language_model.model == "ollama/other"
    with pytest.raises(ValueError, match="^candidate 7 has variables the program lacks: ghost/state$"):
        assign_variables(program, {"ghost/state": {}}, "candidate 7")
