"""Any OpenAI-compatible server: OpenAI, vLLM, llama.cpp server, Ollama.

Structured output is asked for with ``response_format`` of type
``json_schema``; servers that refuse it (llama.cpp's server answers 422) are
asked again with ``{"type": "json_object", "schema": ...}``, and servers that
refuse both get the schema in the prompt. The mode that worked is remembered.
The caller validates the answer against the schema and retries if needed.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from promptgym.core.loop_scoped import LoopScoped
from promptgym.lm.backend import LMRequest, LMResponse
from promptgym.lm.errors import LMConnectionError, LMError

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def schema_instruction(schema: dict[str, Any]) -> str:
    return "Answer with a single JSON object, and nothing else, that follows this JSON schema:\n" + json.dumps(schema)


@dataclass
class HttpReply:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def refuses_response_format(response: HttpReply) -> bool:
    """Some servers reject an unknown response_format with a 500 (llama.cpp's) rather than a 4xx."""
    return response.status_code >= 400 and "response_format" in response.text


class OpenAICompatibleBackend:
    """Chat completions and embeddings over HTTP, with retries and backoff."""

    def __init__(
        self,
        model: str,
        api_base: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        concurrency: int = 8,
        backoff_s: float = 0.5,
    ) -> None:
        self.model = model
        self.api_base = api_base.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self.structured_mode = STRUCTURED_MODES[0]
        # aiohttp (not httpx): about 0.2 ms per request against 1-5 ms, which was most of our per-call overhead.
        self._sessions = LoopScoped(self._new_session, lambda session: session.close())

    def _new_session(self) -> aiohttp.ClientSession:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            connector=aiohttp.TCPConnector(limit=max(self.concurrency, 1)),
        )

    async def _post(self, path: str, payload: dict[str, Any]) -> HttpReply:
        url = f"{self.api_base}{path}"
        last_error = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                session = await self._sessions.get()
                async with session.post(url, json=payload) as raw:
                    response = HttpReply(raw.status, await raw.text())
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                last_error = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
                continue
            if response.status_code in _RETRYABLE_STATUS and not refuses_response_format(response):
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            return response
        raise LMConnectionError(f"{url} unreachable after {self.retries + 1} attempts ({last_error})")

    def _payload(self, request: LMRequest, mode: str) -> dict[str, Any]:
        messages = request.messages
        payload: dict[str, Any] = {
            "model": self.model,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            **request.extra,
        }
        if request.seed is not None:
            payload["seed"] = request.seed
        if request.schema is not None:
            if mode == "json_schema":
                payload["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": request.schema.get("title", "output"), "schema": request.schema},
                }
            elif mode == "json_object":
                payload["response_format"] = {"type": "json_object", "schema": request.schema}
            else:
                messages = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + "\n\n" + schema_instruction(request.schema)}]
        payload["messages"] = messages
        return payload

    async def complete(self, request: LMRequest) -> LMResponse:
        modes = STRUCTURED_MODES[STRUCTURED_MODES.index(self.structured_mode):] if request.schema else ("plain",)
        for mode in modes:
            response = await self._post("/chat/completions", self._payload(request, mode))
            refused = response.status_code in (400, 415, 422) or refuses_response_format(response)
            if refused and request.schema is not None and mode != "prompt":
                self.structured_mode = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
                continue
            if response.status_code >= 400:
                raise LMError(f"{self.api_base}/chat/completions answered HTTP {response.status_code}: {response.text[:300]}")
            body = response.json()
            usage = body.get("usage") or {}
            return LMResponse(
                content=body["choices"][0]["message"].get("content") or "",
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            )
        raise LMError(f"{self.api_base}: no structured-output mode was accepted")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        response = await self._post("/embeddings", {"model": self.model, "input": texts})
        if response.status_code >= 400:
            raise LMError(f"{self.api_base}/embeddings answered HTTP {response.status_code}: {response.text[:300]}")
        data = sorted(response.json()["data"], key=lambda item: item["index"])
        return [item["embedding"] for item in data]
