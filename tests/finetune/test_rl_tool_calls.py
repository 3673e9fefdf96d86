"""RL with tools: the policy server takes `tools` and answers `tool_calls`; the example app runs multi-turn episodes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest

from promptgym.finetune.rl.policy_server import PolicyServer
from promptgym.finetune.rl.tool_calls import as_text_messages, parse_reply, reply_message
from promptgym.taskapp import Policy, RolloutRequest

TOOLS = [{"type": "function", "function": {"name": "calculate", "description": "Evaluate arithmetic.",
                                           "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
HISTORY = [
    {"role": "system", "content": "Use the tool."},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "2 + 3"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"result": 5}'},
]


def test_a_reply_with_tool_call_blocks_becomes_openai_tool_calls():
    content, calls = parse_reply('I will add. <tool_call>{"name": "calculate", "arguments": {"expression": "2+3"}}'
                                 '</tool_call>')
    assert content == "I will add."
    assert calls[0]["function"] == {"name": "calculate", "arguments": '{"expression": "2+3"}'}
    assert calls[0]["id"].startswith("call_") and calls[0]["type"] == "function"
    assert parse_reply("<tool_call>{not json</tool_call> 5") == ("<tool_call>{not json</tool_call> 5", None)
    message, finish = reply_message('<tool_call>{"name": "calculate", "arguments": {}}', with_tools=True)
    assert finish == "tool_calls" and message["content"] is None  # an unterminated last block still counts
    assert reply_message("5", with_tools=True) == ({"role": "assistant", "content": "5"}, None)


def test_a_reply_that_is_only_a_call_object_is_a_call_without_the_tags():
    # what Qwen2.5-Coder-0.5B writes when asked for the tagged form (7 of 8 samples, 2026-12-05)
    content, calls = parse_reply(' {"name": "calculate", "arguments": {"expression": "3998 + 9809 - 9016"}}\n')
    assert content is None and calls[0]["function"] == {"name": "calculate",
                                                        "arguments": '{"expression": "3998 + 9809 - 9016"}'}
    unterminated = '{"name": "calculate", "arguments": {"expression": "1 + 2"}'
    assert parse_reply(unterminated) == (unterminated, None)  # not JSON: an answer, not a guess at a call
    assert parse_reply('The call is {"name": "calculate"}') == ('The call is {"name": "calculate"}', None)
    assert parse_reply('{"answer": 5}') == ('{"answer": 5}', None)


def test_tools_and_tool_turns_are_written_as_plain_messages():
    messages = as_text_messages({"messages": HISTORY, "tools": TOOLS, "max_tokens": 8})["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"].startswith("Use the tool.\n\nYou may call these tools:")
    assert '"name": "calculate"' in messages[0]["content"]
    assert messages[2]["content"] == '<tool_call>{"name": "calculate", "arguments": {"expression": "2 + 3"}}</tool_call>'
    assert messages[3]["content"] == '<tool_response>{"result": 5}</tool_response>'
    with pytest.raises(ValueError, match="each tool must be"):
        as_text_messages({"messages": HISTORY, "tools": [{"name": "x"}]})


@pytest.fixture
async def server(tiny_model: Path) -> AsyncIterator[PolicyServer]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    policy = PolicyServer(AutoModelForCausalLM.from_pretrained(str(tiny_model)),
                          AutoTokenizer.from_pretrained(str(tiny_model)), max_new_tokens=6, temperature=1.0, seed=1)
    await policy.start()
    yield policy
    await policy.stop()


async def test_the_policy_server_serves_a_tool_turn_and_records_only_the_reply(server: PolicyServer) -> None:
    rollout = server.open_rollout()
    short = [{"type": "function", "function": {"name": "calc"}}]  # the tiny model has 512 positions
    history = [HISTORY[1], {**HISTORY[2], "tool_calls": [{"id": "c1", "function": {"name": "calc", "arguments": "{}"}}]},
               {**HISTORY[3], "content": "5"}]
    async with httpx.AsyncClient(timeout=30) as client:
        answer = await client.post(f"{server.url(rollout)}/chat/completions", json={"messages": history, "tools": short})
        bad = await client.post(f"{server.url(rollout)}/chat/completions",
                                json={"messages": HISTORY, "tools": [{"type": "function"}]})
    assert answer.status_code == 200, answer.text
    (completion,) = server.close_rollout(rollout)
    assert answer.json()["choices"][0]["message"]["role"] == "assistant"
    assert bad.status_code == 400 and "each tool must be" in bad.json()["error"]["message"]
    tokenizer = server.tokenizer
    rendered = tokenizer.apply_chat_template(as_text_messages({"messages": history, "tools": short})["messages"],
                                             tokenize=False, add_generation_prompt=True)
    assert completion.prompt_ids == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    prompt = tokenizer.decode(completion.prompt_ids)
    assert "<tool_response>" in prompt and "You may call these tools" in prompt  # tool results are context
    assert 1 <= len(completion.completion_ids) <= 6  # the trained tokens: the policy's own reply only


def load_example() -> Any:
    path = Path(__file__).resolve().parents[2] / "examples" / "rl_tools.py"
    spec = importlib.util.spec_from_file_location("rl_tools_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_the_example_app_runs_a_multi_turn_episode_with_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    example = load_example()
    expression, truth = example.problem(7)
    turns: list[list[dict[str, Any]]] = []

    async def policy_turn(policy: Any, messages: list[dict[str, Any]], tools: Any = None, max_tokens: int = 0):
        turns.append([dict(m) for m in messages])
        if len(turns) == 1:
            return {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {
                "name": "calculate", "arguments": json.dumps({"expression": expression})}}]}
        return {"role": "assistant", "content": f"The answer is {json.loads(messages[-1]['content'])['result']}."}

    monkeypatch.setattr(example, "ask_policy_turn", policy_turn)
    response = await example.rollout(RolloutRequest(seed=7, policy=Policy(model="policy", inference_url="http://127.0.0.1:1/v1")))
    assert response.reward == 1.0 and response.metrics == {"exact": 1.0, "called_tool": 1.0}
    assert turns[1][-1] == {"role": "tool", "tool_call_id": "a", "content": json.dumps({"result": truth})}
    assert example.score(None, truth, called=True) == 0.2 and example.score(truth + 1.0, truth, called=False) == 0.5
