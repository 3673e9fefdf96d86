"""Inside a task app: ask the policy a rollout names, in plain text.

    reply = await ask_policy(request.policy, [{"role": "user", "content": question}], max_tokens=16)

With ``policy.inference_url`` (an RL run's policy server, or any OpenAI-compatible ``.../v1`` URL) the
question goes there as a chat completion; without one, to the model string ``policy.model`` (a prompt-
learning run's model, e.g. ``local/qwen2.5-coder-0.5b-instruct``). One HTTP connection pool per event loop
serves every rollout, however many policy URLs a run hands out.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.loop_scoped import LoopScoped
from promptgym.lm.http_client import HttpClient
from promptgym.lm.language_model import LanguageModel
from promptgym.taskapp.protocol import Policy

_clients: LoopScoped[HttpClient] = LoopScoped(lambda: HttpClient(timeout=600.0), lambda client: client.close())
_models: dict[tuple[str, int], Any] = {}


async def ask_policy(policy: Policy, messages: list[dict[str, str]], max_tokens: int = 64) -> str:
    """The policy's reply to ``messages``; an HTTP error (a closed rollout's 404, say) raises ``HttpStatusError``."""
    if policy.inference_url:
        client = await _clients.get()
        response = await client.request("POST", f"{policy.inference_url.rstrip('/')}/chat/completions",
                                        json={"model": policy.model, "messages": messages, "max_tokens": max_tokens})
        response.raise_for_status()
        return response.json()["choices"][0]["message"].get("content") or ""
    key = (policy.model, max_tokens)
    if key not in _models:
        _models[key] = LanguageModel(model=policy.model, max_tokens=max_tokens)
    return await _models[key](messages)


async def ask_policy_turn(policy: Policy, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                          max_tokens: int = 64) -> dict[str, Any]:
    """The policy's assistant message for ``messages``, with its ``tool_calls`` when it calls ``tools``.

    ``tools`` are OpenAI function specs (``Tool.openai_tool()`` makes one). A multi-turn episode appends the
    returned message, one ``{"role": "tool", "tool_call_id", "content"}`` per call, and asks again.
    """
    if policy.inference_url:
        client = await _clients.get()
        body: dict[str, Any] = {"model": policy.model, "messages": messages, "max_tokens": max_tokens}
        if tools:
            body["tools"] = tools
        response = await client.request("POST", f"{policy.inference_url.rstrip('/')}/chat/completions", json=body)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        return {"role": "assistant", "content": message.get("content"), **(
            {"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})}
    key = (policy.model, max_tokens)
    if key not in _models:
        _models[key] = LanguageModel(model=policy.model, max_tokens=max_tokens)
    answer = await _models[key].respond(messages, tools=tools)
    return {"role": "assistant", "content": answer.content, **({"tool_calls": answer.tool_calls} if answer.tool_calls else {})}
