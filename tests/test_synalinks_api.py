"""synalinks' names and behaviours added for issue 19: initializers, build(), trace recording, config, metrics."""

from __future__ import annotations

import json

import pytest

import promptgym as pg
from promptgym.initializers import Empty
from promptgym.testing import ScriptedLanguageModel
from tests.support import Answer, Question, echo_lm, functional_program


class Instructions(pg.DataModel):
    instructions: list[str] = []


# -- initializers and Variable(initializer=...) -------------------------------------------


def test_empty_initializer_gives_the_data_model_defaults_and_round_trips():
    initializer = Empty(data_model=Instructions)
    assert initializer() == {"instructions": []}
    assert initializer.get_schema() == Instructions.get_schema()
    rebuilt = pg.initializers.deserialize(pg.initializers.serialize(initializer))
    assert isinstance(rebuilt, Empty) and rebuilt() == {"instructions": []}
    assert isinstance(pg.initializers.get("empty"), Empty)
    with pytest.raises(ValueError, match="needs data_model="):
        Empty()()


def test_variable_from_an_initializer_or_a_dict():
    variable = pg.Variable(initializer=Empty(data_model=Instructions))
    assert variable.get_json() == {"instructions": []}
    assert variable.get_schema()["properties"]["instructions"]["type"] == "array"
    named = pg.Variable(initializer={"instructions": ["round to even"]}, data_model=Instructions, name="rules")
    assert named.name == "rules" and named["instructions"] == ["round to even"]
    assert dict(named.items()) == {"instructions": ["round to even"]} and list(named.keys()) == ["instructions"]
    with pytest.raises(ValueError, match="needs a value"):
        pg.Variable()


# -- build() on a subclassed program --------------------------------------------------------


class Answering(pg.Program):
    def __init__(self, language_model=None):
        super().__init__()
        self.generator = pg.Generator(data_model=Answer, language_model=language_model)

    async def call(self, inputs, training=False):
        return await self.generator(inputs)


async def test_awaiting_build_traces_call_without_calling_the_model():
    lm = echo_lm()
    program = Answering(language_model=lm)
    await program.build(Question)
    assert program.built and program.generator.built
    assert lm.requests == []
    assert (await program(Question(question="hi"))).get_json() == {"answer": "HI"}


# -- trace recording ------------------------------------------------------------------------


async def test_record_traces_writes_one_line_per_call_by_program_and_module(tmp_path):
    program = await functional_program(echo_lm(), name="qa")
    pg.record_traces(base_dir=tmp_path)
    try:
        assert pg.is_trace_recording_enabled() and pg.trace_recording_dir() == str(tmp_path)
        await program(Question(question="a"))
        await program(Question(question="b"))
    finally:
        pg.config.stop_recording_traces()
    files = list(tmp_path.rglob("traces.jsonl"))
    generator = program.modules[-1].name
    assert [f.relative_to(tmp_path).parts for f in files] == [("qa", generator, "traces.jsonl")]
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [json.loads(r["messages"][-1]["content"]) for r in records] == [{"question": "a"}, {"question": "b"}]
    assert [json.loads(r["content"]) for r in records] == [{"answer": "A"}, {"answer": "B"}]
    assert {r["program"] for r in records} == {"qa"} and records[0]["schema"]["title"] == "Answer"
    await program(Question(question="c"))  # stopped: nothing more
    assert len(files[0].read_text().splitlines()) == 2


# -- config, top-level names, prompt template ------------------------------------------------


def test_config_and_top_level_names():
    assert pg.ExactMatch is pg.rewards.ExactMatch and pg.OMEGA is pg.optimizers.OMEGA
    assert pg.Metric is pg.metrics.Metric and pg.ToolCalling is pg.ToolCall
    assert pg.config.default_language_model() is None
    lm = pg.config.set_default_language_model(ScriptedLanguageModel(responses=[{}]))
    assert pg.default_language_model() is lm
    assert pg.config.is_observability_enabled() is False
    with pytest.raises(ValueError, match="only backend is 'pydantic'"):
        pg.config.set_backend("numpy")
    assert pg.language_models.get(pg.language_models.serialize(lm)).model == lm.model
    assert pg.version() == pg.__version__


def test_system_prompt_follows_default_prompt_template():
    generator = pg.Generator(data_model=Answer, language_model=echo_lm(), instructions="Be brief.")
    prompt = generator.system_prompt(Question.get_schema())
    assert prompt == pg.default_prompt_template().format(
        input_fields="1. `question` (string): A question", output_fields="1. `answer` (string): The answer",
        input_shape='{"question": "{question}"}', output_shape='{"answer": "{answer}"}', allowed_values="",
        input_names="`question`", output_names="`answer`", instructions="Be brief.")


# -- operational metrics of the optimizer's and the reward's models -------------------------


async def test_reward_metrics_count_the_judge_model_only():
    program = await functional_program(echo_lm(), name="qa")
    judge = ScriptedLanguageModel(responses=[{"reasoning": "ok", "score": 1.0}])
    reward = pg.rewards.LMAsJudge(language_model=judge)
    program.compile(reward=reward, metrics=[pg.metrics.RewardTotalTokens(), pg.metrics.AvgCostPerCall(),
                                            pg.metrics.OptimizerCost()])
    x = [Question(question="a"), Question(question="b")]
    y = [Answer(answer="A"), Answer(answer="B")]
    metrics = await program.evaluate(x=x, y=y, verbose=0)
    judged = judge.usage.total()
    assert judged.calls >= 2  # (the scripted judge answers with a score field the schema may reject: retries)
    assert metrics["reward_total_tokens"] == judged.prompt_tokens + judged.completion_tokens > 0
    assert metrics["optimizer_cost"] == 0.0 and metrics["avg_cost_per_call"] == 0.0


def test_custom_object_scope_and_registry_lookups():
    class Mine(pg.rewards.ExactMatch):
        pass

    assert pg.saving.get_registered_object("Mine") is None
    with pg.saving.custom_object_scope({"Mine": Mine}):
        assert pg.saving.get_registered_object("Mine") is Mine
        restored = pg.rewards.deserialize({"class_name": "Mine", "config": {}})
        assert type(restored) is Mine
    assert pg.saving.get_registered_object("Mine") is None
    assert pg.utils.unpack_x_y(pg.utils.pack_x_y([1], [2])) == ([1], [2])
    assert pg.utils.unpack_x_y(([1],)) == ([1], None)


# -- streaming counters and cost ------------------------------------------------------------


class _StreamingEngine:
    concurrency = 1

    async def complete(self, request):
        from promptgym.lm.engine import LMResponse

        return LMResponse(content="whole", cost=0.002)

    async def stream(self, request):
        from promptgym.lm.engine import LMChunk

        for piece in ("Hel", "lo"):
            yield LMChunk(content=piece)


async def test_streamed_answers_are_counted_when_read_to_the_end():
    lm = ScriptedLanguageModel(responses=["x"])
    lm._engine = _StreamingEngine()
    messages = [{"role": "user", "content": "hi"}]
    assert [chunk.get("content") async for chunk in await lm(messages, streaming=True)] == ["Hel", "lo"]
    assert lm.cumulated_streaming_calls == 1
    assert 0 <= lm.cumulated_streaming_ttft_s <= lm.cumulated_streaming_ttlt_s
    abandoned = await lm(messages, streaming=True)
    await abandoned.__anext__()
    assert lm.cumulated_streaming_calls == 1  # stopped half-way: no end time to count
    assert await lm(messages) == "whole"
    assert lm.last_call_cost == 0.002 and lm.cumulated_cost == 0.002


@pytest.mark.parametrize(("model", "effort", "sent"), [
    ("ollama/qwen3", "disable", {"think": False}), ("ollama_chat/qwen3", "none", {}),
    ("openai/gpt-4o-mini", "disable", {}), ("ollama/qwen3", "low", {"reasoning_effort": "low"})])
async def test_reasoning_effort_disable_turns_ollama_thinking_off(model, effort, sent):
    lm = ScriptedLanguageModel(responses=["ok"], model=model)
    await lm([{"role": "user", "content": "hi"}], reasoning_effort=effort)
    assert lm.requests[-1].extra == sent


async def test_an_embedding_served_from_memory_counts_as_a_cache_hit():
    from promptgym.testing import HashEmbeddingModel

    model = HashEmbeddingModel()
    await model(["capital of France"])
    await model(["capital of France"])
    assert model.calls == 1
    assert (model.cumulated_calls, model.cumulated_cache_hits) == (1, 1)


# -- program files written by synalinks -----------------------------------------------------


def _synalinks_file(tmp_path, trainable_variables):
    path = tmp_path / "program.json"
    path.write_text(json.dumps({"synalinks_version": "0.5.0", "class_name": "Functional", "config": {},
                                "variables": {"trainable_variables": trainable_variables}}))
    return path


async def test_a_synalinks_file_gives_its_trained_instructions_and_examples(tmp_path):
    program = await functional_program(echo_lm(), name="qa")
    generator = program.modules[-1].name
    example = {"inputs": {"question": "2+2?"}, "outputs": {"answer": "4"}, "reward": 1.0}
    path = _synalinks_file(tmp_path, {generator: {"state_" + generator: {
        "instructions": "Answer with a number.", "examples": [example], "predictions": [example]}}})
    with pytest.raises(ValueError, match="a synalinks program file .*load_variables"):
        pg.Program.load(str(path))
    program.load_variables(str(path))
    assert program.get_variables()[f"{generator}/state"] == {
        "instructions": "Answer with a number.", "examples": [{"inputs": {"question": "2+2?"}, "outputs": {"answer": "4"}}]}
    with pytest.raises(ValueError, match=f"no entry for module.*{generator}.*the file has: other"):
        program.load_variables(str(_synalinks_file(tmp_path, {"other": {"state": {"examples": []}}})))


async def test_compile_without_a_reward_evaluates_metrics_and_predicts():
    import numpy as np

    program = await functional_program(echo_lm(), name="qa")
    program.compile(metrics=[pg.metrics.F1Score(in_mask=["answer"])])
    x = np.array([Question(question="paris is big"), Question(question="b")], dtype=object)
    y = np.array([Answer(answer="PARIS IS BIG"), Answer(answer="x")], dtype=object)
    assert await program.evaluate(x=x, y=y, verbose=0) == {"f1_score": 0.5}
    assert [p.get_json() for p in await program.predict(x, verbose=0)] == [{"answer": "PARIS IS BIG"}, {"answer": "B"}]


def test_module_serialize_round_trip_and_symbolic_clone():
    generator = pg.Generator(data_model=Answer, language_model=echo_lm())
    again = pg.modules.deserialize(pg.modules.serialize(generator))
    assert type(again) is pg.Generator and again.language_model.model == generator.language_model.model
    x = pg.Input(data_model=Question, name="q")
    twin = x.clone()
    assert twin.name == "clone_q" and twin.get_schema() == x.get_schema()
    similarity = pg.metrics.CosineSimilarity(axis=2, embedding_model=pg.testing.HashEmbeddingModel())
    assert similarity._fn_kwargs["axis"] == 2


def test_input_module_takes_synalinks_input_data_model():
    module = pg.InputModule(input_data_model=pg.SymbolicDataModel(data_model=Question))
    assert module.get_schema() == pg.SymbolicDataModel(data_model=Question).get_schema()
