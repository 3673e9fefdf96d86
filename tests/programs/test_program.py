import json

import numpy as np
import pytest

import promptgym as pg
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import Answer, Question, echo_lm, functional_program, questions


async def test_functional_call_returns_the_output_model():
    program = await functional_program(echo_lm())
    result = await program(Question(question="paris?"))
    assert isinstance(result, Answer) or result.get_json() == {"answer": "PARIS?"}
    assert result.get("answer") == "PARIS?"


async def test_prompt_has_instructions_schema_examples_and_input():
    lm = echo_lm()
    generator = pg.Generator(data_model=Answer, language_model=lm, instructions="Be brief.",
                             examples=[(Question(question="2+2"), Answer(answer="4"))])
    await generator(Question(question="3+3"))
    messages = lm.requests[0].messages
    system = messages[0]["content"]
    assert messages[0]["role"] == "system" and system.endswith("Objective: given `question`, produce `answer`. Be brief.")
    assert "1. `question` (string): A question" in system and "1. `answer` (string): The answer" in system
    assert '{"question": "{question}"}' in system and '{"answer": "{answer}"}' in system
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert json.loads(messages[2]["content"]) == {"answer": "4"}
    assert json.loads(messages[3]["content"]) == {"question": "3+3"}
    assert lm.requests[0].schema["properties"]["answer"]["maxLength"] == 400


async def test_sequential_and_chain_of_thought():
    program = pg.Sequential([pg.Input(data_model=Question), pg.ChainOfThought(data_model=Answer, language_model=echo_lm())],
                            name="seq")
    result = await program(Question(question="x"))
    assert result.get_json() == {"thinking": "t", "answer": "X"}


async def test_subclassed_program():
    @pg.register_synalinks_serializable()
    class QA(pg.Program):
        def __init__(self, language_model=None, name=None, description=None, trainable=True):
            super().__init__(name=name, description=description, trainable=trainable)
            self.language_model = language_model
            self.answer = pg.ChainOfThought(data_model=Answer, language_model=language_model, name="answer")

        async def call(self, inputs, training=False):
            return await self.answer(inputs)

        def get_config(self):
            return {**super().get_config(), "language_model": pg.saving.serialize_object(self.language_model)}

        @classmethod
        def from_config(cls, config):
            return cls(**{**config, "language_model": pg.saving.deserialize_object(config["language_model"])})

    program = QA(language_model=echo_lm(), name="qa_sub")
    assert [v.name for v in program.trainable_variables] == ["answer/state"]
    assert (await program(Question(question="y"))).get("answer") == "Y"


async def test_predict_reports_failures_with_indices_and_keeps_the_rest():
    lm = ScriptedLanguageModel(
        respond=lambda r: RuntimeError("boom") if last_user_json(r)["question"] == "bad" else {"answer": "ok"},
        output_retries=0,
    )
    program = await functional_program(lm)
    predictions = await program.predict(questions("a", "bad", "c", "bad"), batch_size=3, verbose=0)
    assert [p.get("answer") if p is not None else None for p in predictions] == ["ok", None, "ok", None]
    assert sorted(predictions.failures) == [1, 3]
    assert "RuntimeError: boom" in predictions.failures[1]


async def test_predict_names_the_bad_field_and_index():
    program = await functional_program(echo_lm())
    with pytest.raises(ValueError, match=r"x\[1\].*field 'question'"):
        await program.predict(np.array([Question(question="a"), {"questoin": "b"}], dtype=object), verbose=0)


async def test_concurrency_is_bounded_by_the_model():
    lm = echo_lm(concurrency=2, delay_s=0.01)
    in_flight = {"now": 0, "max": 0}
    original = lm._scripted.complete

    async def counting(request):
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        try:
            return await original(request)
        finally:
            in_flight["now"] -= 1

    lm._scripted.complete = counting
    program = await functional_program(lm)
    await program.predict(questions(*"abcdefgh"), batch_size=8, verbose=0)
    assert in_flight["max"] == 2


async def test_save_and_load_round_trip(tmp_path):
    lm = ScriptedLanguageModel(responses=[{"answer": "A"}])
    program = await functional_program(lm, name="saved")
    program.trainable_variables[0].assign({"instructions": "Trained.", "examples": [{"inputs": {"question": "q"}, "outputs": {"answer": "a"}}]})
    path = tmp_path / "p.json"
    program.save(path)
    loaded = pg.Program.load(path)
    assert loaded.name == "saved"
    assert loaded.get_variables() == program.get_variables()
    assert (await loaded(Question(question="z"))).get("answer") == "A"
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]


async def test_sequential_save_load(tmp_path):
    program = pg.Sequential([pg.Input(data_model=Question), pg.Generator(data_model=Answer, language_model=echo_lm())], name="s")
    program.save(tmp_path / "s.json")
    loaded = pg.Program.load(tmp_path / "s.json")
    assert type(loaded).__name__ == "Sequential" and loaded.input_data_model.__name__ == "Question"


async def test_load_never_resolves_unregistered_names(tmp_path):
    path = tmp_path / "evil.json"
    path.write_text(json.dumps({"format": "promptgym.program", "version": 1, "variables": {},
                                "program": {"class_name": "os>system", "config": {}}}))
    with pytest.raises(ValueError, match="unknown program class 'os>system'"):
        pg.Program.load(path)


async def test_variables_round_trip_and_mismatch(tmp_path):
    program = await functional_program(echo_lm(), name="v1")
    program.trainable_variables[0].assign({"instructions": "X", "examples": []})
    program.save_variables(tmp_path / "v.json")
    other = await functional_program(echo_lm(), name="v2")
    with pytest.raises(ValueError, match="missing: generator.*/state; unknown: generator.*/state"):
        other.load_variables(tmp_path / "v.json")
    same = await functional_program(echo_lm(), name="v3")
    data = json.loads((tmp_path / "v.json").read_text())
    data["variables"] = {same.trainable_variables[0].name: list(data["variables"].values())[0]}
    (tmp_path / "v.json").write_text(json.dumps(data))
    same.load_variables(tmp_path / "v.json")
    assert same.trainable_variables[0].get("instructions") == "X"


async def test_summary_lists_modules_schemas_and_variables():
    program = await functional_program(echo_lm(), name="summarized")
    lines = []
    text = program.summary(print_fn=lines.append)
    assert lines == [text]
    assert "Program: summarized" in text and "Answer(answer)" in text and "Input: Question(question)" in text
    assert "1 examples" not in text and "0 examples" in text


async def test_get_graph_links_input_to_modules():
    program = await functional_program(echo_lm(), name="graph")
    graph = program.get_graph()
    assert [node["class_name"] for node in graph["nodes"]] == ["Input", "Generator"]
    assert graph["edges"] == [[graph["nodes"][0]["id"], graph["nodes"][1]["id"]]]


async def test_modules_and_variables_by_name_or_index_and_what_is_there_when_missing():
    program = await functional_program(echo_lm(), name="qa")
    first, generator = program.modules  # auto names carry a suffix when other tests made modules first
    (state,) = generator.variables
    assert program.get_module(generator.name) is generator is program.get_module(index=-1)
    assert program.get_module(index=0) is first
    assert program.get_variable(state.name) is program.get_variable(index=0) is state
    assert program.variables == [state]  # the modules' variables, each once
    with pytest.raises(ValueError, match=f"^qa: no module named 'nope'; modules: {first.name}, {generator.name}$"):
        program.get_module("nope")
    with pytest.raises(ValueError, match=r"^qa: no module at index 2; the program has 2 modules$"):
        program.get_module(index=2)
    with pytest.raises(ValueError, match=f"^qa: no variable named 'x'; variables: {state.name}$"):
        program.get_variable("x")
    with pytest.raises(ValueError, match="give either a variable name or an index"):
        program.get_variable()
