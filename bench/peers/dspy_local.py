"""Point DSPy 3.4.1 at a local OpenAI-compatible server (run in the DSPy venv).

``dspy.LM("openai/<name>", api_base=...)`` goes through DSPy's native lm15 engine, sends
``max_completion_tokens`` (llama_cpp.server ignores it: use ``hosted_vllm/<name>``) and,
for a model DSPy has no metadata on, never sends ``response_format``: the JSONAdapter
then only *asks* for JSON in the prompt. Declaring the server as a provider with
JSON-schema support makes DSPy send ``{"type": "json_schema", ...}`` (which
llama_cpp.server needs rewritten: ``counting_proxy.py --json-object-schema``).

    lm = local_lm("http://127.0.0.1:8932/v1", "qwen", structured=True)
    dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
from dspy.lm15 import (
    AccessPolicy,
    ModelSupport,
    OpenAIChatCompat,
    ProviderDefinition,
    register_provider,
)

PROVIDER = "benchlocal"


def register_local_provider(base_url: str, provider: str = PROVIDER, function_calling: bool = False) -> None:
    """Declare ``provider/<model>`` as an OpenAI-chat server at ``base_url`` that honours JSON schemas.

    ``function_calling``: the server also takes OpenAI ``tools`` (llama_cpp.server started with
    ``--chat_format chatml-function-calling``), so DSPy's native tool calling sends them.
    """
    access = AccessPolicy(provider=provider, env_keys=(), base_url=base_url)
    # The "vllm" dialect spells the output bound `max_tokens`, which llama_cpp.server reads;
    # the "openai" preset sends `max_completion_tokens`, which it ignores (no bound at all).
    definition = ProviderDefinition.chat(access, compat=OpenAIChatCompat.preset("vllm"))
    register_provider(definition, supports=ModelSupport(response_schema=True, function_calling=function_calling),
                      replace=True)


def local_lm(base_url: str, model: str = "local", structured: bool = True, function_calling: bool = False,
             **kwargs: object) -> dspy.LM:
    """A cache-free ``dspy.LM`` on ``base_url``; ``structured`` sends response_format schemas."""
    options: dict[str, object] = {"api_key": "local", "cache": False, "temperature": 0.0, "max_tokens": 256, **kwargs}
    if structured:
        register_local_provider(base_url, function_calling=function_calling)
        return dspy.LM(f"{PROVIDER}/{model}", api_base=base_url, **options)
    # Not openai/<model>: DSPy's native engine then sends `max_completion_tokens`, which
    # llama_cpp.server ignores; hosted_vllm/<model> sends `max_tokens`.
    return dspy.LM(f"hosted_vllm/{model}", api_base=base_url, **options)
