"""Process-wide default models, used by string-form rewards and optimizers."""

from __future__ import annotations

from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel

_defaults: dict[str, object] = {}


def set_default_language_model(model: str | LanguageModel) -> LanguageModel:
    """``set_default_language_model("local/qwen2.5-coder-0.5b-instruct")``"""
    _defaults["language_model"] = model if isinstance(model, LanguageModel) else LanguageModel(model=model)
    return _defaults["language_model"]  # type: ignore[return-value]


def set_default_embedding_model(model: str | EmbeddingModel) -> EmbeddingModel:
    """``set_default_embedding_model("local/multilingual-e5-small")``"""
    _defaults["embedding_model"] = model if isinstance(model, EmbeddingModel) else EmbeddingModel(model=model)
    return _defaults["embedding_model"]  # type: ignore[return-value]


def get_default_language_model(needed_by: str = "this object") -> LanguageModel:
    if "language_model" not in _defaults:
        raise ValueError(
            f"{needed_by} needs a language model: pass language_model=..., or call "
            "promptgym.set_default_language_model('local/qwen2.5-coder-0.5b-instruct') first"
        )
    return _defaults["language_model"]  # type: ignore[return-value]


def get_default_embedding_model(needed_by: str = "this object") -> EmbeddingModel:
    if "embedding_model" not in _defaults:
        raise ValueError(
            f"{needed_by} needs an embedding model: pass embedding_model=..., or call "
            "promptgym.set_default_embedding_model('local/multilingual-e5-small') first"
        )
    return _defaults["embedding_model"]  # type: ignore[return-value]


def clear_defaults() -> None:
    _defaults.clear()


def default_language_model() -> LanguageModel | None:
    """The default language model, or None when none was set."""
    return _defaults.get("language_model")  # type: ignore[return-value]


def default_embedding_model() -> EmbeddingModel | None:
    """The default embedding model, or None when none was set."""
    return _defaults.get("embedding_model")  # type: ignore[return-value]
