"""The policy server on 127.0.0.1 with the tiny model: what it records is exactly what it served and sampled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest

from promptgym.finetune.rl.policy_server import PolicyServer
from promptgym.finetune.rl.update import TrainingRow, row_logprobs

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]


@pytest.fixture
async def server(tiny_model: Path) -> AsyncIterator[PolicyServer]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    policy = PolicyServer(model, tokenizer, max_new_tokens=12, temperature=1.0, seed=3)
    await policy.start()
    yield policy
    await policy.stop()


async def chat(url: str, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url}/chat/completions", json={"messages": MESSAGES, **body})


async def test_the_recorded_tokens_are_the_prompt_seen_and_the_tokens_sampled(server: PolicyServer) -> None:
    rollout = server.open_rollout()
    answers = await asyncio.gather(*(chat(server.url(rollout)) for _ in range(3)))
    completions = server.close_rollout(rollout)
    assert server.base_url.startswith("http://127.0.0.1:") and len(completions) == 3
    tokenizer = server.tokenizer
    rendered = tokenizer.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    expected_prompt = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    texts = sorted(answer.json()["choices"][0]["message"]["content"] for answer in answers)
    assert sorted(c.text for c in completions) == texts
    for completion in completions:
        assert completion.prompt_ids == expected_prompt
        assert 1 <= len(completion.completion_ids) <= 12
        assert tokenizer.decode(completion.completion_ids, skip_special_tokens=True) == completion.text
    usage = answers[0].json()["usage"]
    assert usage["prompt_tokens"] == len(expected_prompt) and usage["completion_tokens"] >= 1
    # The update scores these very tokens: its log-probabilities equal the ones recorded at sampling.
    rows = [TrainingRow(c.prompt_ids, c.completion_ids, c.logprobs, 1.0) for c in completions]
    import torch

    with torch.no_grad():
        recomputed = row_logprobs(server.model, rows, tokenizer.pad_token_id, temperature=1.0, chunk_size=16)
    recorded = torch.tensor([value for c in completions for value in c.logprobs])
    assert torch.allclose(recomputed, recorded, atol=1e-4)


async def test_a_closed_rollout_answers_404_and_bad_requests_400(server: PolicyServer, monkeypatch) -> None:
    monkeypatch.setattr("promptgym.finetune.rl.policy_server.MAX_BODY_BYTES", 2000)
    rollout = server.open_rollout()
    url = server.url(rollout)
    async with httpx.AsyncClient(timeout=30) as client:
        models = await client.get(f"{url}/models")
        assert models.status_code == 200 and models.json()["data"][0]["id"] == "policy"
        bad = await client.post(f"{url}/chat/completions", json={"messages": "hi"})
        assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
        many = await client.post(f"{url}/chat/completions", json={"messages": MESSAGES, "n": 2})
        assert many.status_code == 400
        huge = await client.post(f"{url}/chat/completions", json={"messages": [{"role": "user", "content": "x" * 3000}]})
        assert huge.status_code == 413 and "larger than 2000 bytes" in huge.json()["error"]["message"]
    assert server.close_rollout(rollout) == []
    gone = await chat(url)
    assert gone.status_code == 404 and "finished rollout" in gone.json()["error"]["message"]


async def test_greedy_rollouts_ignore_the_request_temperature_and_limits_hold(server: PolicyServer) -> None:
    rollout = server.open_rollout(greedy=True)
    first, second = [await chat(server.url(rollout), temperature=1.5, max_tokens=4, seed=9) for _ in range(2)]
    completions = server.close_rollout(rollout)
    assert first.json()["choices"][0]["message"] == second.json()["choices"][0]["message"]
    assert [len(c.completion_ids) for c in completions] == [4, 4]  # max_tokens honoured below max_new_tokens
    assert completions[0].completion_ids == completions[1].completion_ids


async def test_a_json_schema_request_puts_the_schema_in_the_prompt(server: PolicyServer) -> None:
    schema = {"title": "Answer", "type": "object", "properties": {"answer": {"type": "string"}}}
    rollout = server.open_rollout()
    reply = await chat(server.url(rollout), response_format={"type": "json_schema", "json_schema": {"schema": schema}})
    completion = server.close_rollout(rollout)[0]
    assert reply.status_code == 200
    prompt = server.tokenizer.decode(completion.prompt_ids)
    assert "hello\n\nAnswer with a single JSON object" in prompt and '"answer"' in prompt
