"""A program file edited by hand (or damaged) fails to load with its name, the key path and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

import promptgym as pg
from tests.support import Answer, Question

GENERATOR = ("program", "config", "modules", "<Generator>", "config")
"""Where the Generator's config sits: ``<Generator>`` stands for its index among the modules."""


def saved_program(tmp_path: Path) -> dict[str, Any]:
    lm = pg.LanguageModel(model="openai/test", api_base="http://127.0.0.1:9/v1")
    program = pg.Sequential([pg.Input(data_model=Question),
                             pg.Generator(data_model=Answer, language_model=lm, name="answerer")], name="qa")
    program.compile(reward="exactmatch", optimizer="randomfewshot")
    program.save(tmp_path / "good.json")
    assert pg.Program.load(tmp_path / "good.json").get_variables() == program.get_variables()
    return json.loads((tmp_path / "good.json").read_text())


def at(data: Any, path: tuple) -> Any:
    for part in path:
        if part == "<Generator>":
            part = next(i for i, module in enumerate(data) if module.get("class_name") == "Generator")
        data = data[part]
    return data


def generator_index(data: dict[str, Any]) -> int:
    return next(i for i, module in enumerate(data["program"]["config"]["modules"]) if module.get("class_name") == "Generator")


def setter(path: tuple, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: at(data, path[:-1]).__setitem__(path[-1], value)


def deleter(path: tuple) -> Callable[[dict[str, Any]], None]:
    return lambda data: at(data, path[:-1]).pop(path[-1])


STATE = ("variables", "answerer/state")


@pytest.mark.parametrize(("edit", "message"), [
    (deleter((*GENERATOR, "data_model")), "program.config.modules[<Generator>].config: missing key 'data_model'"),
    (deleter((*GENERATOR, "language_model")), "program.config.modules[<Generator>].config: missing key 'language_model'"),
    (setter(("program", "config", "modules"), 5), "program.config: TypeError: 'int' object is not iterable"),
    (setter((*STATE, "instructions"), 12345), "variables: variable 'answerer/state': 'instructions' must be a string, got int"),
    (setter((*STATE, "examples"), "x"), "variable 'answerer/state': 'examples' must be a list, got str"),
    (deleter((*STATE, "instructions")), "variable 'answerer/state': missing 'instructions'"),
    (setter((*GENERATOR, "max_string_length"), -5), "Generator 'answerer': max_string_length must be an integer >= 1, got -5"),
    (setter((*GENERATOR, "max_tokens"), "many"), "Generator 'answerer': max_tokens must be an integer >= 1, got 'many'"),
    (setter((*GENERATOR, "language_model", "config", "model"), ""),
     "program.config.modules[<Generator>].config.language_model.config: model must name a model"),
    (setter((*GENERATOR, "language_model", "class_name"), 7), "program.config.modules[<Generator>].config.language_model: expected \"class_name\""),
    (deleter(("compile", "optimizer")), "compile: missing key 'optimizer'"),
    (setter(("version",), "x"), "version: expected an integer format version, got 'x'"),
])
def test_a_tampered_file_names_itself_the_key_path_and_the_problem(tmp_path: Path, edit, message: str) -> None:
    data = saved_program(tmp_path)
    message = message.replace("modules[<Generator>]", f"modules[{generator_index(data)}]")
    edit(data)
    (tmp_path / "tampered.json").write_text(json.dumps(data))
    with pytest.raises(ValueError) as raised:
        pg.Program.load(tmp_path / "tampered.json")
    assert str(raised.value).startswith(f"{tmp_path / 'tampered.json'}: ")
    assert message in str(raised.value)


@pytest.mark.parametrize("depth", [5_000, 200_000])
def test_a_file_nested_too_deeply_is_refused_not_a_recursion_error(tmp_path: Path, depth: int) -> None:
    nested = '{"class_name": "Program", "config": {"name": "x", "nodes": [{"module": ' * depth
    nested += '{"class_name": "Program", "config": {}}' + "}]}}" * depth
    (tmp_path / "deep.json").write_text('{"format": "promptgym.program", "version": 1, "variables": {}, "program": '
                                        + nested + "}")
    with pytest.raises(ValueError, match="deep.json: .*nested too deeply"):
        pg.Program.load(tmp_path / "deep.json")


def test_wrong_settings_are_refused_when_built_in_python_too() -> None:
    lm = pg.LanguageModel(model="openai/test", api_base="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="max_string_length must be an integer >= 1, got -5"):
        pg.Generator(data_model=Answer, language_model=lm, max_string_length=-5)
    with pytest.raises(ValueError, match="instructions must be a string, got int"):
        pg.Generator(data_model=Answer, language_model=lm, instructions=12345)
    with pytest.raises(ValueError, match="temperature must be a number >= 0"):
        pg.LanguageModel(model="openai/test", temperature="hot")
