"""Programs whose branches run in parallel and join: running, structure, saving, training."""

import asyncio

import numpy as np
import pytest

import promptgym as pg
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import Answer, Question, questions


def branch_lm():
    """The "Upper" branch upper-cases the question, the other lower-cases it; both right only with a demo
    or on even-numbered questions (so some traces earn the reward before training)."""

    def respond(request):
        question = last_user_json(request)["question"]
        right = len(request.messages) > 2 or int(question[1:]) % 2 == 0
        text = question.upper() if "Upper" in request.messages[0]["content"] else question.lower()
        return {"answer": text if right else "?"}

    return ScriptedLanguageModel(respond=respond)


async def two_branches(lm):
    inputs = pg.Input(data_model=Question)
    upper = await pg.Generator(data_model=Answer, language_model=lm, instructions="Upper-case it.", name="upper")(inputs)
    lower = await pg.Generator(data_model=Answer, language_model=lm, instructions="Lower-case it.", name="lower")(inputs)
    return pg.Program(inputs=inputs, outputs=upper + lower, name="two_branches")


async def test_joined_branches_keep_every_field_with_suffixes():
    program = await two_branches(branch_lm())
    result = await program(Question(question="q2"))
    assert result.get_json() == {"answer": "Q2", "answer_1": "q2"}
    assert [type(module).__name__ for module in program.modules] == ["InputModule", "Generator", "Generator", "Concat"]
    assert list(program.output_data_model.model_fields) == ["answer", "answer_1"]


async def test_parallel_branches_run_at_the_same_time():
    started = {name: asyncio.Event() for name in ("a", "b")}

    class Handshake(pg.Module):
        """Finishes only once the other branch has started: sequential execution would never finish."""

        def __init__(self, me, other, **kwargs):
            super().__init__(name=me, **kwargs)
            self.me, self.other = me, other

        async def call(self, inputs):
            started[self.me].set()
            await asyncio.wait_for(started[self.other].wait(), timeout=10)
            return inputs

        def compute_output_spec(self, inputs):
            return pg.SymbolicDataModel(data_model=inputs)

    inputs = pg.Input(data_model=Question)
    program = pg.Program(inputs=inputs, outputs=[await Handshake("a", "b")(inputs), await Handshake("b", "a")(inputs)])
    first, second = await program(Question(question="q"))
    assert first.get_json() == second.get_json() == {"question": "q"}


async def test_a_branch_that_is_switched_off_gives_way_to_the_other():
    def only(long):
        return lambda inputs: inputs if (len(inputs.get("question")) > 3) == long else None

    lm = ScriptedLanguageModel(responses=[{"answer": "A"}])
    inputs = pg.Input(data_model=Question)
    long = await pg.Lambda(function=only(True), data_model=Question)(inputs)
    short = await pg.Lambda(function=only(False), data_model=Question)(inputs)
    answered = await pg.Generator(data_model=Answer, language_model=lm)(long)
    program = pg.Program(inputs=inputs, outputs=answered | short)
    assert (await program(Question(question="a long one"))).get_json() == {"answer": "A"}
    assert (await program(Question(question="q"))).get_json() == {"question": "q"}
    assert len(lm.requests) == 1  # the Generator after the branch not taken did not run


async def test_inputs_and_outputs_may_be_dicts_and_lists():
    class Doc(pg.DataModel):
        title: str
        text: str

    inputs = {"a": pg.Input(data_model=Doc), "b": pg.Input(data_model=Doc)}
    outputs = {"titles": await pg.InMask(mask=["title"])([inputs["a"], inputs["b"]]), "both": inputs["a"] + inputs["b"]}
    program = pg.Program(inputs=inputs, outputs=outputs)
    result = await program({"a": Doc(title="A", text="x"), "b": Doc(title="B", text="y")})
    assert [value.get_json() for value in result["titles"]] == [{"title": "A"}, {"title": "B"}]
    assert result["both"].keys() == ["title", "text", "title_1", "text_1"]


async def test_a_multi_branch_program_saves_and_loads(tmp_path):
    program = await two_branches(branch_lm())
    program.save(tmp_path / "program.json")
    loaded = pg.Program.load(tmp_path / "program.json")
    assert [module.name for module in loaded.modules][1:] == [module.name for module in program.modules][1:]
    for module in loaded.modules[1:3]:
        module.language_model = branch_lm()
    assert (await loaded(Question(question="q4"))).get_json() == {"answer": "Q4", "answer_1": "q4"}


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_training_teaches_each_branch():
    program = await two_branches(branch_lm())
    both = program.output_data_model
    x = questions(*[f"q{i}" for i in range(12)])
    y = np.array([both(answer=f"Q{i}", answer_1=f"q{i}") for i in range(12)], dtype=object)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=pg.optimizers.RandomFewShot(nb_max_examples=2))
    assert (await program.evaluate(x[8:], y[8:], verbose=0))["reward"] == 0.5
    await program.fit(x[:8], y[:8], validation_data=(x[8:], y[8:]), epochs=2, batch_size=8, verbose=0)
    learned = {module.name: module.examples for module in program.modules[1:3]}
    assert learned["upper"] and learned["lower"]
    assert all(example["outputs"]["answer"] == example["inputs"]["question"].upper() for example in learned["upper"])
    assert all(example["outputs"]["answer"] == example["inputs"]["question"].lower() for example in learned["lower"])
    assert (await program.evaluate(x[8:], y[8:], verbose=0))["reward"] == 1.0


class BothCases(pg.Module):
    """A module made of two Generators joined: traced symbolically, no output spec written."""

    def __init__(self, language_model, **kwargs):
        super().__init__(**kwargs)
        self.upper = pg.Generator(data_model=Answer, language_model=language_model, instructions="Upper-case it.")
        self.lower = pg.Generator(data_model=Answer, language_model=language_model, instructions="Lower-case it.")

    async def call(self, inputs):
        return await self.upper(inputs) + await self.lower(inputs)


async def test_a_custom_module_is_traced_without_calling_the_model():
    lm = branch_lm()
    module = BothCases(lm)
    inputs = pg.Input(data_model=Question)
    outputs = await module(inputs)
    assert outputs.keys() == ["answer", "answer_1"] and not lm.requests
    program = pg.Program(inputs=inputs, outputs=outputs)
    assert len(program.trainable_variables) == 2
    assert (await program(Question(question="q0"))).get_json() == {"answer": "Q0", "answer_1": "q0"}
    assert len(lm.requests) == 2


async def test_a_program_subclass_can_build_itself_functionally():
    class Upper(pg.Program):
        def __init__(self, language_model, name=None):
            super().__init__(name=name)
            self.language_model = language_model

        async def build(self, inputs):
            outputs = await pg.Generator(data_model=Answer, language_model=self.language_model,
                                         instructions="Upper-case it.")(inputs)
            super().__init__(inputs=inputs, outputs=outputs, name=self.name)

    inner = Upper(branch_lm(), name="inner")
    assert not inner.built
    inputs = pg.Input(data_model=Question)
    program = pg.Program(inputs=inputs, outputs=await inner(inputs))
    assert inner.built and (await program(Question(question="q2"))).get_json() == {"answer": "Q2"}


async def test_sequential_grows_and_builds_from_its_first_input():
    lm = branch_lm()
    program = pg.Sequential(name="seq")
    program.add(pg.Generator(data_model=Answer, language_model=lm, instructions="Upper-case it."))
    assert not program.built
    assert (await program(Question(question="q2"))).get_json() == {"answer": "Q2"}
    assert program.built and len(program.variables) == 1
    with pytest.raises(ValueError, match="unique names"):
        program.add(program.modules[0])
    program.pop()
    assert not program.built and program.modules == []
