"""FunctionCallingAgent on the scripted LM: constrained and native tool calling, modes, limits, training state."""

from __future__ import annotations

import asyncio
import json

import pytest

import promptgym as pg
from promptgym.modules.tool_calls import TOOL_RESULTS_PREFIX
from promptgym.modules.tracing import tracing
from promptgym.testing import ScriptedLanguageModel


class Query(pg.DataModel):
    query: str = pg.Field(description="The user query")


class Answer(pg.DataModel):
    answer: float = pg.Field(description="The numerical answer")


async def calculate(expression: str) -> dict:
    """Calculate an arithmetic expression.

    Args:
        expression: The expression, like '2 + 2'.
    """
    return {"result": eval(expression, {"__builtins__": None}, {})}


async def build(lm, **kwargs):
    inputs = pg.Input(data_model=Query)
    agent = pg.FunctionCallingAgent(data_model=Answer, tools=[pg.Tool(calculate)], language_model=lm, **kwargs)
    return pg.Program(inputs=inputs, outputs=await agent(inputs)), agent


def call(expression: str) -> dict:
    return {"tool_calls": [{"tool_name": "calculate", "arguments": {"expression": expression}}]}


async def test_constrained_step_calls_the_tool_then_answers():
    lm = ScriptedLanguageModel(responses=[call("152648 + 485"), {"final_answer": {"answer": 153133}}])
    program, agent = await build(lm)
    result = (await program(Query(query="How much is 152648 + 485?"))).get_json()
    assert result["answer"] == 153133
    assert [m["role"] for m in result["messages"]] == ["assistant", "tool"]
    assert result["messages"][1]["content"] == {"result": 153133}
    # the schema offers exactly the tool's arguments or the answer; the tool result comes back as a user turn
    options = lm.requests[0].schema["anyOf"]
    item = options[0]["properties"]["tool_calls"]["items"]
    assert item["properties"]["tool_name"] == {"const": "calculate"}
    assert item["properties"]["arguments"]["required"] == ["expression"]
    assert options[1]["properties"]["final_answer"]["required"] == ["answer"]
    assert lm.requests[1].messages[-1]["content"].startswith(TOOL_RESULTS_PREFIX)
    assert agent.tool_call_counts == {"calls": 1, "invalid": 0, "failed": 0}


async def test_parallel_calls_of_one_step_run_concurrently():
    running, peak = 0, 0

    async def slow(n: int) -> dict:
        """Wait a little.

        Args:
            n: Anything.
        """
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return {"n": n}

    lm = ScriptedLanguageModel(responses=[
        {"tool_calls": [{"tool_name": "slow", "arguments": {"n": i}} for i in range(3)]},
        {"final_answer": {"answer": 3}}])
    inputs = pg.Input(data_model=Query)
    agent = pg.FunctionCallingAgent(data_model=Answer, tools=[pg.Tool(slow)], language_model=lm)
    program = pg.Program(inputs=inputs, outputs=await agent(inputs))
    result = (await program(Query(query="q"))).get_json()
    assert [m["content"] for m in result["messages"][1:]] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert peak == 3


async def test_max_iterations_answers_with_what_it_has_and_flags_the_trace():
    lm = ScriptedLanguageModel(responses=[call("1 + 1"), call("1 + 1"), {"final_answer": {"answer": 2}}])
    program, agent = await build(lm, max_iterations=2)
    with tracing() as trace:
        result = (await program(Query(query="1+1"))).get_json()
    assert result["answer"] == 2 and len(lm.requests) == 3
    assert lm.requests[2].schema["anyOf"][0]["required"] == ["final_answer"]  # the last step may only answer
    assert trace.for_module(agent.name)[0].outputs["max_iterations_reached"] is True


async def test_native_tool_calls_on_a_server():
    lm = ScriptedLanguageModel(native_tools=True, responses=[
        {"content": "adding", "tool_calls": [{"name": "calculate", "arguments": {"expression": "2 + 3"}}]},
        {"content": "done", "tool_calls": []},
        {"answer": 5}])
    program, _ = await build(lm)
    result = (await program(Query(query="2+3"))).get_json()
    assert result["answer"] == 5
    assert lm.requests[0].tools[0]["function"]["name"] == "calculate"
    assert lm.requests[0].schema is None
    assert lm.requests[1].messages[-2]["tool_calls"][0]["function"]["arguments"] == {"expression": "2 + 3"}
    assert lm.requests[1].messages[-1] == {"role": "tool", "content": '{"result": 5}', "tool_call_id": "call_0_0"}


async def test_a_call_to_an_unknown_tool_or_with_bad_arguments_is_an_error_for_the_model():
    lm = ScriptedLanguageModel(native_tools=True, responses=[
        {"content": "", "tool_calls": [{"name": "nope", "arguments": {}},
                                       {"name": "calculate", "arguments": {"expr": "1"}}]},
        {"content": "stop", "tool_calls": []}, {"answer": 0}])
    program, agent = await build(lm)
    messages = (await program(Query(query="q"))).get_json()["messages"]
    assert "there is no tool named 'nope'" in messages[1]["content"]["error"]
    assert messages[2]["content"]["error"].startswith("invalid arguments for calculate")
    assert agent.tool_call_counts["invalid"] == 2


async def test_interactive_mode_hands_tool_calls_back_then_runs_them():
    lm = ScriptedLanguageModel(responses=[call("6 * 7"), {"final_answer": "42"}])
    inputs = pg.Input(data_model=pg.ChatMessages)
    agent = pg.FunctionCallingAgent(tools=[pg.Tool(calculate)], language_model=lm, autonomous=False)
    program = pg.Program(inputs=inputs, outputs=await agent(inputs))
    first = await program(pg.ChatMessages(messages=[pg.ChatMessage(role="user", content="6*7?")]))
    assert first.get_json()["messages"][-1]["tool_calls"][0]["function"]["arguments"] == {"expression": "6 * 7"}
    second = (await program(first)).get_json()["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "assistant"]
    assert second[2]["content"] == {"result": 42} and second[3]["content"] == "42"


async def test_interactive_mode_needs_chat_messages():
    agent = pg.FunctionCallingAgent(tools=[pg.Tool(calculate)], language_model=ScriptedLanguageModel([]),
                                    autonomous=False)
    with pytest.raises(ValueError, match="interactive mode"):
        await agent(pg.Input(data_model=Query))


def test_bad_construction_is_refused_clearly():
    lm = ScriptedLanguageModel([])
    with pytest.raises(ValueError, match="needs tools"):
        pg.FunctionCallingAgent(language_model=lm)
    with pytest.raises(ValueError, match="max_iterations must be an integer >= 1"):
        pg.FunctionCallingAgent(tools=[pg.Tool(calculate)], language_model=lm, max_iterations=0)
    with pytest.raises(ValueError, match="tool_calling must be one of"):
        pg.FunctionCallingAgent(tools=[pg.Tool(calculate)], language_model=lm, tool_calling="magic")


async def test_demonstrations_are_whole_trajectories_in_the_prompt():
    lm = ScriptedLanguageModel(responses=[{"final_answer": {"answer": 9}}])
    program, agent = await build(lm)
    demo = {"inputs": {"query": "4+5?"},
            "outputs": {"messages": [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "calculate", "arguments": {"expression": "4+5"}}}]},
                {"role": "tool", "tool_call_id": "c", "content": {"result": 9}}], "answer": 9}}
    agent.prompt_variable.update({"examples": [demo]})
    await program(Query(query="4+5"))
    turns = [(m["role"], m["content"]) for m in lm.requests[0].messages[1:]]
    assert turns == [
        ("user", '{"query": "4+5?"}'),
        ("assistant", '{"tool_calls": [{"tool_name": "calculate", "arguments": {"expression": "4+5"}}]}'),
        ("user", TOOL_RESULTS_PREFIX + ' [{"tool_name": "calculate", "result": {"result": 9}}]'),
        ("assistant", '{"final_answer": {"answer": 9}}'),
        ("user", '{"query": "4+5"}')]
    assert agent.prompt_variable in program.trainable_variables


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_few_shot_training_turns_successful_runs_into_demonstrations():
    def respond(request):
        last = request.messages[-1]["content"]
        if last.startswith(TOOL_RESULTS_PREFIX):
            return {"final_answer": {"answer": json.loads(last[len(TOOL_RESULTS_PREFIX):])[0]["result"]["result"]}}
        query = json.loads(last)["query"]
        if len(request.messages) > 2 or query.startswith("even"):  # with a demonstration it always uses the tool
            return call(query.split(":")[1])
        return {"final_answer": {"answer": -1}}

    program, agent = await build(ScriptedLanguageModel(respond=respond), return_inputs_with_trajectory=False)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=pg.optimizers.RandomFewShot(nb_min_examples=1, nb_max_examples=1, seed=0))
    x = [Query(query=f"{'even' if i % 2 == 0 else 'odd'}:{i} + {i}") for i in range(8)]
    y = [Answer(answer=2 * i) for i in range(8)]
    before = await program.evaluate(x, y, verbose=0)
    await program.fit(x, y, epochs=2, batch_size=4, validation_data=(x, y), verbose=0)
    after = await program.evaluate(x, y, verbose=0)
    assert before["reward"] == 0.5 and after["reward"] == 1.0
    (demo,) = agent.prompt_variable.get("examples")
    assert demo["inputs"]["query"].startswith("even")
    assert [m["role"] for m in demo["outputs"]["messages"]] == ["assistant", "tool"]
    assert demo["outputs"]["answer"] == 2 * int(demo["inputs"]["query"].split(":")[1].split(" + ")[0])


async def test_the_agent_saves_and_loads_with_registered_tools(tmp_path):
    @pg.register_synalinks_serializable(package="agent_test")
    async def lookup(key: str) -> dict:
        """Look a key up.

        Args:
            key: The key.
        """
        return {"value": key.upper()}

    inputs = pg.Input(data_model=Query)
    agent = pg.FunctionCallingAgent(data_model=Answer, tools=[pg.Tool(lookup)],
                                    language_model=ScriptedLanguageModel([]), max_iterations=3, name="agent")
    program = pg.Program(inputs=inputs, outputs=await agent(inputs))
    program.save(tmp_path / "agent.json")
    text = (tmp_path / "agent.json").read_text()
    assert "agent_test>lookup" in text and "def lookup" not in text
    loaded = pg.Program.load(tmp_path / "agent.json")
    restored = loaded.get_module("agent")
    assert restored.max_iterations == 3 and list(restored.tools) == ["lookup"]


async def test_export_sft_data_writes_openai_tool_calling_conversations(tmp_path):
    lm = ScriptedLanguageModel(responses=[call("2 + 2"), {"final_answer": {"answer": 4}}])
    program, _ = await build(lm, return_inputs_with_trajectory=False)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]))
    report = await program.export_sft_data([Query(query="2+2?")], [Answer(answer=4)], tmp_path / "sft.jsonl")
    assert report.rows == 1
    row = json.loads((tmp_path / "sft.jsonl").read_text())
    assert row["tools"][0]["function"]["name"] == "calculate"
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"expression": "2 + 2"}'
    assert row["messages"][3] == {"role": "tool", "content": '{"result": 4}', "tool_call_id": "call_0_0"}
    assert json.loads(row["messages"][4]["content"]) == {"answer": 4.0}


async def test_gepa_reflects_on_the_agents_trajectories_and_rewrites_its_instructions():
    def respond(request):
        last = request.messages[-1]["content"]
        if last.startswith(TOOL_RESULTS_PREFIX):
            return {"final_answer": {"answer": json.loads(last[len(TOOL_RESULTS_PREFIX):])[0]["result"]["result"]}}
        if "ALWAYS CALL calculate" in request.messages[0]["content"]:
            return call(json.loads(last)["query"])
        return {"final_answer": {"answer": -1}}

    reflections: list[str] = []

    def reflect(request):
        reflections.append(request.messages[-1]["content"])
        return {"new_instructions": "ALWAYS CALL calculate with the expression, then answer with its result."}

    program, agent = await build(ScriptedLanguageModel(respond=respond), return_inputs_with_trajectory=False)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=pg.optimizers.GEPA(reflection_language_model=ScriptedLanguageModel(respond=reflect),
                                                 max_metric_calls=40, reflection_minibatch_size=2, seed=0))
    x = [Query(query=f"{i} + {i}") for i in range(1, 7)]
    y = [Answer(answer=2 * i) for i in range(1, 7)]
    await program.fit(x, y, epochs=1, batch_size=6, validation_data=(x, y), verbose=0)
    assert agent.prompt_variable.get("instructions").startswith("ALWAYS CALL calculate")
    assert (await program.evaluate(x, y, verbose=0))["reward"] == 1.0
    assert '"final_answer"' not in reflections[0] and '"answer": -1' in reflections[0]


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_knn_few_shot_shows_each_input_its_nearest_trajectory():
    def respond(request):
        last = request.messages[-1]["content"]
        if last.startswith(TOOL_RESULTS_PREFIX):
            return {"final_answer": {"answer": json.loads(last[len(TOOL_RESULTS_PREFIX):])[0]["result"]["result"]}}
        query = json.loads(last)["query"]
        if len(request.messages) > 2 or query.startswith("even"):
            return call(query.split(":")[1])
        return {"final_answer": {"answer": -1}}

    lm = ScriptedLanguageModel(respond=respond)
    program, agent = await build(lm, return_inputs_with_trajectory=False)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=pg.optimizers.KNNFewShot(k=1, embedding_model=pg.testing.HashEmbeddingModel()))
    x = [Query(query=f"{'even' if i % 2 == 0 else 'odd'}:{i} + {i}") for i in range(8)]
    y = [Answer(answer=2 * i) for i in range(8)]
    await program.fit(x, y, epochs=1, batch_size=8, validation_data=(x, y), verbose=0)
    assert (await program.evaluate(x, y, verbose=0))["reward"] == 1.0
    shown = [m["content"] for m in lm.requests[-1].messages[1:4]]
    assert shown[0].startswith('{"query": "even:') and '"tool_calls"' in shown[1] and shown[2].startswith(TOOL_RESULTS_PREFIX)


async def test_an_openai_compatible_server_gets_tools_and_answers_tool_calls():
    from tests.lm.fake_openai_server import FakeOpenAIServer

    def fault(body, number):
        if number == 0:
            message = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function",
                       "function": {"name": "calculate", "arguments": '{"expression": "6 * 7"}'}}]}
            return 200, json.dumps({"choices": [{"message": message, "finish_reason": "tool_calls"}]})
        return None

    def answer(body):
        return '{"answer": 42}' if body.get("response_format") else "I have the result."

    with FakeOpenAIServer(answer, fault=fault) as server:
        lm = pg.LanguageModel(model="openai/test", api_base=server.url, cache=False)
        program, agent = await build(lm)
        result = (await program(Query(query="6*7?"))).get_json()
    assert result["answer"] == 42 and result["messages"][1]["content"] == {"result": 42}
    first, second, final = server.requests
    assert first["tools"][0]["function"]["name"] == "calculate" and "response_format" not in first
    assert second["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"expression": "6 * 7"}'
    assert second["messages"][-1] == {"role": "tool", "content": '{"result": 42}', "tool_call_id": "call_a"}
    assert "tools" not in final and final["response_format"]["type"] == "json_schema"
    assert agent.native and agent.tool_call_counts == {"calls": 1, "invalid": 0, "failed": 0}
