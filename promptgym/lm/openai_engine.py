"""Any OpenAI-compatible server: OpenAI, vLLM, llama.cpp server, Ollama.

Structured output is asked for with ``response_format`` of type
``json_schema``; a server whose error says it refuses that (llama.cpp's server
answers 422, or 500 naming ``response_format``) is asked again with
``{"type": "json_object", "schema": ...}``, and one that refuses both gets the
schema in the prompt. The mode that worked is remembered per server
(``api_base``), and a switch is logged once. Any other error (a prompt too
long, a bad parameter) leaves the mode alone. The caller validates the answer
against the schema and retries if needed.

``stream`` asks for server-sent events (``stream: true``, usage in the last
event) and hands each delta over as it arrives; closing it closes the
connection, which is how a server is told to stop generating.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator

from promptgym.core.loop_scoped import LoopScoped, loop_semaphore
from promptgym.core.retry import RetriesExhausted, Retry, RetryPolicy, retrying
from promptgym.lm.engine import LMChunk, LMRequest, LMResponse, usage_details
from promptgym.lm.errors import LMConfigurationError, LMConnectionError, LMError
from promptgym.lm.http_client import HttpClient, HttpError, StreamedReply
from promptgym.lm.usage import Usage

logger = logging.getLogger("promptgym")

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_structured_mode_by_server: dict[str, str] = {}
"""api_base -> the structured-output mode that server accepts (learned from its refusals)."""


def forget_structured_modes() -> None:
    """Forget what servers refused (tests; a server restarted with other abilities)."""
    _structured_mode_by_server.clear()


def schema_instruction(schema: dict[str, Any]) -> str:
    return "Answer with a single JSON object, and nothing else, that follows this JSON schema:\n" + json.dumps(schema)


def wire_tool_calls(message: dict[str, Any]) -> dict[str, Any]:
    """A message whose tool calls carry their arguments as the JSON string the OpenAI wire expects."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    wired = []
    for call in calls:
        function = dict(call.get("function") or {})
        if not isinstance(function.get("arguments"), str):
            function["arguments"] = json.dumps(function.get("arguments") or {}, ensure_ascii=False)
        wired.append({**call, "function": function, "type": call.get("type") or "function"})
    return {**message, "tool_calls": wired}


@dataclass
class HttpReply:
    status_code: int
    text: str
    url: str = ""

    def json(self) -> Any:
        """The body as JSON, or an error naming the URL and showing the start of the body."""
        try:
            return json.loads(self.text)
        except json.JSONDecodeError:
            raise LMError(f"{self.url} answered HTTP {self.status_code} with a body that is not JSON: "
                          f"{self.text[:200]!r}") from None


def refuses_response_format(response: HttpReply) -> bool:
    """An error about the structured-output request itself (llama.cpp's server may use a 500 for it)."""
    text = response.text.lower()
    return response.status_code >= 400 and any(word in text for word in ("response_format", "json_schema", "json_object"))


def retry_after_s(headers: Any) -> float | None:
    """The server's ``Retry-After`` in seconds (headers: a dict with lower-cased names)."""
    try:
        return float(headers.get("Retry-After") or headers.get("retry-after") or "")
    except (TypeError, ValueError):
        return None


class OpenAICompatibleEngine:
    """Chat completions and embeddings over HTTP, with retries and backoff.

    ``slots`` bounds requests in flight (one per slot, per event loop); a request
    waiting out a backoff holds none.
    """

    def __init__(
        self,
        model: str,
        api_base: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        concurrency: int = 8,
        backoff_s: float = 0.5,
        slots: LoopScoped[asyncio.Semaphore] | None = None,
    ) -> None:
        self.model = model
        self.api_base = api_base.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self.slots = slots or loop_semaphore(max(concurrency, 1))
        # promptgym's own client (lm/http_client.py, chosen by measurement), one per event loop.
        self._clients = LoopScoped(self._new_client, lambda client: client.close())

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(retries=self.retries, backoff_s=self.backoff_s)

    @property
    def structured_mode(self) -> str:
        return _structured_mode_by_server.get(self.api_base, STRUCTURED_MODES[0])

    def _new_client(self) -> HttpClient:
        return HttpClient(self.timeout, {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})

    async def _request(self, method: str, path: str, payload: dict[str, Any] | None = None,
                       policy: RetryPolicy | None = None) -> HttpReply:
        url = f"{self.api_base}{path}"

        async def attempt() -> HttpReply:
            try:
                client = await self._clients.get()
                raw = await client.request(method, url, json=payload)
                response, wait = HttpReply(raw.status, raw.text, url), retry_after_s(raw.headers)
            except asyncio.TimeoutError:
                raise Retry(f"timed out after {self.timeout:g} s") from None
            except HttpError as error:
                raise Retry.of(error) from None
            if response.status_code in _RETRYABLE_STATUS and not refuses_response_format(response):
                raise Retry(f"HTTP {response.status_code}: {response.text[:200]}",
                            rate_limited=response.status_code == 429, wait_s=wait)
            return response

        try:
            return await retrying(attempt, policy or self.retry_policy, slot=await self.slots.get())
        except RetriesExhausted as exhausted:
            if exhausted.last.rate_limited:
                raise LMConnectionError(f"{url}: rate limited (HTTP 429) on all {exhausted.attempts} attempts; "
                                        f"lower the concurrency or wait ({exhausted.last.reason})") from None
            raise LMConnectionError(f"{url} unreachable after {exhausted.attempts} attempts ({exhausted.last.reason})") from None

    async def _post(self, path: str, payload: dict[str, Any]) -> HttpReply:
        return await self._request("POST", path, payload)

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
        if request.tools:
            payload["tools"] = request.tools
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
        payload["messages"] = [wire_tool_calls(message) for message in messages]
        return payload

    def _downgrade(self, mode: str, response: HttpReply) -> None:
        """Remember, for this server, that it refused ``mode`` (logged once per server and mode)."""
        following = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
        if STRUCTURED_MODES.index(self.structured_mode) < STRUCTURED_MODES.index(following):
            _structured_mode_by_server[self.api_base] = following
            logger.warning("%s refused response_format %s (HTTP %d: %s); asking it for %s from now on",
                           self.api_base, mode, response.status_code, response.text[:160], following)

    def raise_for_status(self, response: HttpReply) -> None:
        if response.status_code in (401, 403):
            raise LMConfigurationError(f"{response.url} answered HTTP {response.status_code} (the API key was refused: "
                                       f"check it, or the variable api_key_env names): {response.text[:200]}")
        if response.status_code >= 400:
            raise LMError(f"{response.url} answered HTTP {response.status_code}: {response.text[:300]}")

    async def complete(self, request: LMRequest) -> LMResponse:
        modes = STRUCTURED_MODES[STRUCTURED_MODES.index(self.structured_mode):] if request.schema else ("plain",)
        for mode in modes:
            response = await self._post("/chat/completions", self._payload(request, mode))
            if request.schema is not None and mode != "prompt" and refuses_response_format(response):
                self._downgrade(mode, response)
                continue
            self.raise_for_status(response)
            return self._parse_completion(response)
        raise LMError(f"{self.api_base}: no structured-output mode was accepted")

    async def stream(self, request: LMRequest) -> AsyncIterator[LMChunk]:
        """The answer as the server writes it; the last chunk has the finish reason and the usage.

        Connection errors and retryable statuses are retried (as in ``complete``) until the
        server starts answering; the stream holds one of the slots until it is read or closed.
        """
        modes = STRUCTURED_MODES[STRUCTURED_MODES.index(self.structured_mode):] if request.schema else ("plain",)
        slots = await self.slots.get()
        for mode in modes:
            payload = {**self._payload(request, mode), "stream": True, "stream_options": {"include_usage": True}}
            raw, refusal = await self._open_stream(payload, slots)
            if refusal is not None:
                if request.schema is not None and mode != "prompt" and refuses_response_format(refusal):
                    self._downgrade(mode, refusal)
                    continue
                self.raise_for_status(refusal)
            assert raw is not None
            try:
                async for chunk in self._read_stream(raw):
                    yield chunk
            finally:  # no await here: a cancelled reader may be cancelled again at any await of its clean-up
                raw.close()  # unread: drops the connection, so the server stops generating
                slots.release()
            return
        raise LMError(f"{self.api_base}: no structured-output mode was accepted")

    async def _open_stream(self, payload: dict[str, Any],
                           slots: asyncio.Semaphore) -> tuple[StreamedReply | None, HttpReply | None]:
        """The open streaming response (holding one of ``slots``), or the error reply of a server that refused."""
        url = f"{self.api_base}/chat/completions"

        async def attempt() -> tuple[StreamedReply | None, HttpReply | None]:
            await slots.acquire()
            try:
                client = await self._clients.get()
                raw = await client.open("POST", url, json=payload)
            except asyncio.TimeoutError:
                slots.release()
                raise Retry(f"timed out after {self.timeout:g} s") from None
            except HttpError as error:
                slots.release()
                raise Retry.of(error) from None
            except BaseException:
                slots.release()
                raise
            if raw.status < 400:
                return raw, None
            try:
                reply = HttpReply(raw.status, await raw.text(), url)
            except (HttpError, asyncio.TimeoutError) as error:
                raise Retry.of(error) from None
            finally:
                raw.close()
                slots.release()
            if reply.status_code in _RETRYABLE_STATUS and not refuses_response_format(reply):
                raise Retry(f"HTTP {reply.status_code}: {reply.text[:200]}", rate_limited=reply.status_code == 429,
                            wait_s=retry_after_s(raw.headers))
            return None, reply

        try:
            return await retrying(attempt, self.retry_policy)
        except RetriesExhausted as exhausted:
            raise LMConnectionError(f"{url} unreachable after {exhausted.attempts} attempts "
                                    f"({exhausted.last.reason})") from None

    async def _read_stream(self, raw: StreamedReply) -> AsyncIterator[LMChunk]:
        """LMChunks from server-sent events (or one chunk, from a server that answered without streaming)."""
        url = raw.url
        if "text/event-stream" not in raw.headers.get("content-type", ""):
            try:
                text = await raw.text()
            except (HttpError, asyncio.TimeoutError) as error:
                raise LMConnectionError(f"{url}: the answer broke off ({type(error).__name__}: {error})") from None
            whole = self._parse_completion(HttpReply(raw.status, text, url))
            yield LMChunk(whole.content, whole.reasoning or "")
            yield LMChunk(finish_reason=whole.finish_reason, prompt_tokens=whole.prompt_tokens,
                          completion_tokens=whole.completion_tokens)
            return
        finish_reason, usage = None, {}
        try:
            async for line in raw.lines():
                text = line.decode("utf-8", errors="replace").strip()
                if not text.startswith("data:"):
                    continue  # blank separators, ": keep-alive" comments, event names
                data = text[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    event = json.loads(data)
                except json.JSONDecodeError:
                    raise LMError(f"{url} streamed an event that is not JSON: {data[:200]!r}") from None
                if isinstance(event.get("error"), (dict, str)):
                    raise LMError(f"{url} failed mid-answer: {json.dumps(event['error'])[:300]}")
                usage = event.get("usage") or usage
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    finish_reason = choice.get("finish_reason") or finish_reason
                    content = delta.get("content") or ""
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
                    if content or reasoning:
                        yield LMChunk(content, reasoning)
        except (HttpError, asyncio.TimeoutError) as error:
            raise LMConnectionError(f"{url}: the stream broke off ({type(error).__name__}: {error})") from None
        yield LMChunk(finish_reason=finish_reason, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                      completion_tokens=int(usage.get("completion_tokens") or 0))

    def _parse_completion(self, response: HttpReply) -> LMResponse:
        body = response.json()
        choices = body.get("choices") if isinstance(body, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise LMError(f"{response.url} answered without any choice (expected a 'choices' list with a message): "
                          f"{response.text[:200]!r}")
        usage = body.get("usage") or {}
        message = choices[0].get("message") or {}
        if not isinstance(message, dict):
            message = {}
        return LMResponse(
            content=message.get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            reasoning=message.get("reasoning_content") or message.get("reasoning") or None,  # vLLM, Ollama, DeepSeek
            finish_reason=choices[0].get("finish_reason"),
            cost=float(usage.get("cost") or 0.0),
            tool_calls=message.get("tool_calls") or None,
            **usage_details(usage),
        )

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.embed_with_usage(texts))[0]

    async def embed_with_usage(self, texts: list[str]) -> tuple[list[list[float]], Usage]:
        """One vector per text, and the usage the server reports (input tokens, cached ones, billed cost)."""
        response = await self._post("/embeddings", {"model": self.model, "input": texts})
        self.raise_for_status(response)
        body = response.json()
        data = body.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            raise LMError(f"{response.url} answered without one embedding per text: {response.text[:200]!r}")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        spent = Usage(prompt_tokens=int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0),
                      cached_tokens=int(details.get("cached_tokens") or 0), cost=float(usage.get("cost") or 0.0))
        return [item["embedding"] for item in sorted(data, key=lambda item: item["index"])], spent

    async def check(self) -> None:
        """Raise an error naming the URL when the server can't be used: unreachable, or refusing the key.

        Asks ``GET /models`` (no tokens spent); a server without that route is asked
        for a one-token completion instead.
        """
        quick = RetryPolicy(retries=1, backoff_s=0.2)
        try:
            response = await self._request("GET", "/models", policy=quick)
        except LMConnectionError as error:
            raise LMConnectionError(f"can't reach {self.api_base}: {error}") from None
        if 200 <= response.status_code < 300:
            return
        self.raise_for_status_if_access(response)
        probe = {"model": self.model, "max_tokens": 1, "messages": [{"role": "user", "content": "Say OK."}]}
        response = await self._request("POST", "/chat/completions", probe, policy=quick)
        self.raise_for_status_if_access(response)
        if response.status_code == 404:
            raise LMConfigurationError(f"{response.url} answered HTTP 404: no chat completions there "
                                       "(an OpenAI-compatible api_base usually ends in /v1)")

    def raise_for_status_if_access(self, response: HttpReply) -> None:
        if response.status_code in (401, 403):
            self.raise_for_status(response)
