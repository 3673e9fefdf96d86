"""Process-wide default models, used by string-form rewards and optimizers."""

from __future__ import annotations

from typing import Any, TypeVar

from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel

M = TypeVar("M", LanguageModel, EmbeddingModel)

_defaults: dict[str, Any] = {}

_EXAMPLES = {"language_model": ("a language model", "local/qwen2.5-coder-0.5b-instruct"),
             "embedding_model": ("an embedding model", "local/multilingual-e5-small")}
"""For each kind of default: how the error names it, and the model the error suggests."""


def _set(key: str, model: str | M, cls: type[M]) -> M:
    _defaults[key] = model if isinstance(model, cls) else cls(model=model)
    return _defaults[key]


def _get(key: str, needed_by: str) -> Any:
    if key not in _defaults:
        what, example = _EXAMPLES[key]
        raise ValueError(f"{needed_by} needs {what}: pass {key}=..., or call "
                         f"promptgym.set_default_{key}('{example}') first")
    return _defaults[key]


def set_default_language_model(model: str | LanguageModel) -> LanguageModel:
    """``set_default_language_model("local/qwen2.5-coder-0.5b-instruct")``"""
    return _set("language_model", model, LanguageModel)


def set_default_embedding_model(model: str | EmbeddingModel) -> EmbeddingModel:
    """``set_default_embedding_model("local/multilingual-e5-small")``"""
    return _set("embedding_model", model, EmbeddingModel)


def get_default_language_model(needed_by: str = "this object") -> LanguageModel:
    return _get("language_model", needed_by)


def get_default_embedding_model(needed_by: str = "this object") -> EmbeddingModel:
    return _get("embedding_model", needed_by)


def clear_defaults() -> None:
    _defaults.clear()


def default_language_model() -> LanguageModel | None:
    """The default language model, or None when none was set."""
    return _defaults.get("language_model")


def default_embedding_model() -> EmbeddingModel | None:
    """The default embedding model, or None when none was set."""
    return _defaults.get("embedding_model")
