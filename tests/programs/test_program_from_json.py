"""``promptgym.programs.program_from_json`` on promptgym's JSON and on synalinks-shaped JSON (issue 26's defect:
the synalinks branch imported a module that does not exist, a ModuleNotFoundError on any such input)."""

from __future__ import annotations

import json

import pytest

import promptgym as pg
from promptgym.programs import program_from_json
from tests.support import echo_lm, functional_program


async def test_promptgym_json_round_trips_with_its_variables() -> None:
    program = await functional_program(echo_lm())
    program.trainable_variables[0].get_json()["instructions"] = "Answer in capitals."
    twin = program_from_json(program.to_json())
    assert twin.name == program.name
    assert twin.get_variables() == program.get_variables()
    assert program_from_json(json.loads(program.to_json())).get_variables() == program.get_variables()


async def test_an_architecture_in_class_name_config_shape_is_rebuilt() -> None:
    program = await functional_program(echo_lm())
    shaped = pg.saving.serialize_object(program)
    assert set(shaped) == {"class_name", "config"} and "format" not in shaped
    twin = program_from_json(json.dumps(shaped))
    assert [v.name for v in twin.variables] == [v.name for v in program.variables]


def test_a_file_synalinks_wrote_is_a_clear_error_not_a_missing_module() -> None:
    synalinks = {"synalinks_version": "0.5.0", "class_name": "Functional", "module": "synalinks.src.programs",
                 "config": {"name": "qa", "layers": []}, "variables": {"trainable_variables": {}}}
    with pytest.raises(ValueError, match=r"a synalinks program file .*load_variables"):
        program_from_json(json.dumps(synalinks))


def test_a_broken_class_name_config_names_the_problem() -> None:
    with pytest.raises(ValueError, match=r"program_from_json: .*NoSuchProgram"):
        program_from_json({"class_name": "NoSuchProgram", "config": {}})
