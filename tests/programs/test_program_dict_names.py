"""One meaning per name: ``program_from_json`` reads JSON text (or a file's dict); ``program_from_dict`` /
``program_to_dict`` are a program file's dict. The old dict-taking names still work, with a DeprecationWarning."""

import pytest

import promptgym
import promptgym.programs
import promptgym.programs.saving as program_saving
from promptgym.testing import ScriptedLanguageModel
from tests.support import functional_program


def test_public_program_from_json_is_one_function():
    assert promptgym.saving.program_from_json is promptgym.programs.program_from_json


async def test_dict_round_trip_and_deprecated_aliases():
    program = await functional_program(ScriptedLanguageModel(responses=[{"answer": "x"}]))
    data = program_saving.program_to_dict(program)
    assert program_saving.program_from_dict(data).get_variables() == program.get_variables()
    with pytest.warns(DeprecationWarning, match="program_from_dict"):
        old = program_saving.program_from_json
    assert old is program_saving.program_from_dict
    with pytest.warns(DeprecationWarning, match="program_to_dict"):
        assert promptgym.saving.program_to_json is program_saving.program_to_dict
