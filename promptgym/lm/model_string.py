"""Parsing ``provider/model`` strings."""

from __future__ import annotations

from dataclasses import dataclass

from promptgym.lm.errors import UnknownModelError

PROVIDER_API_BASES = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
}
PROVIDERS = ("local", *PROVIDER_API_BASES)
PROVIDER_ALIASES = {"ollama_chat": "ollama", "hosted_vllm": "vllm"}
"""litellm's names for the same servers (synalinks model strings)."""


@dataclass(frozen=True)
class ModelString:
    provider: str
    name: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


def parse_model_string(model: str) -> ModelString:
    """``"local/x"`` -> (local, x); a bare name means ``openai/``.

    >>> parse_model_string("text-embedding-3-small")
    ModelString(provider='openai', name='text-embedding-3-small')
    """
    if not isinstance(model, str) or not model.strip():
        raise UnknownModelError(f"a model string must be 'provider/model', got {model!r}")
    provider, sep, name = model.partition("/")
    if not sep:
        return ModelString("openai", model)
    provider = PROVIDER_ALIASES.get(provider, provider)
    if provider not in PROVIDERS:
        # e.g. "hosted_vllm/x" or "meta-llama/Llama-3" served under its full name
        return ModelString("openai", model) if provider not in ("", "local") else ModelString(provider, name)
    if not name:
        raise UnknownModelError(f"model string {model!r} names no model after '{provider}/'")
    return ModelString(provider, name)
