"""``LanguageModel``: one object for every engine, with cache, limits and usage.

    lm = LanguageModel(model="local/qwen2.5-coder-0.5b-instruct")
    answer = await lm([{"role": "user", "content": "Say hi in JSON"}],
                      schema={"type": "object", "properties": {"hi": {"type": "string"}}})
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator
from urllib.parse import urlsplit

from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.loop_scoped import loop_semaphore
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.core.spans import current_tracer
from promptgym.lm.engine import Engine, LMChunk, LMRequest, LMResponse
from promptgym.lm.cache import ResponseCache, request_key, shared_cache
from promptgym.lm.chat_calls import chat_answer, is_chat_form, wire_messages
from promptgym.lm.errors import LMConfigurationError, LMError, LMOutputError
from promptgym.lm.json_output import Expected, checked_answer, parse_json_object
from promptgym.lm.local_engine import shared_local_engine
from promptgym.lm.local_models import DEFAULT_LOCAL_MODEL, check_local_model, resolve_local_model
from promptgym.lm.model_string import PROVIDER_API_BASES, parse_model_string
from promptgym.lm.openai_engine import OpenAICompatibleEngine
from promptgym.lm.prices import Price, resolve_price
from promptgym.lm.pricing import ModelPricing
from promptgym.lm.spend import active_caps
from promptgym.lm.streaming import StreamingIterator, StreamMeter, estimate_prompt_tokens
from promptgym.lm.traces import record_call
from promptgym.lm.usage import LEDGER, Usage, UsageCounters, UsageLedger, record_in_scopes

DEFAULT_MAX_TOKENS = 512


@dataclass
class Answer:
    """A model's answer: the parsed value (dict, or the text), the text, its reasoning, why it stopped."""

    value: Any
    content: str
    reasoning: str | None = None
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    model: Any = None
    """The value as the validated pydantic model (a structured answer), so nobody validates it again."""


def check_api_base(model: str, api_base: str | None) -> None:
    """An ``api_base`` must be an http(s) URL with a host; anything else fails here, not at every call.

    >>> check_api_base("openai/x", "http://127.0.0.1:8080/v1")
    """
    if api_base is None:
        return
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LMConfigurationError(f"{model}: api_base {api_base!r} is not an http(s) URL "
                                   "(expected something like http://127.0.0.1:8080/v1)")


@register_builtin
class LanguageModel(UsageCounters):
    """A chat model named by a ``provider/model`` string.

    Args:
        model: ``local/<name>`` (embedded), ``openai/<model>``, ``ollama/<model>``,
            ``vllm/<model>``; a bare name means ``openai/``.
        api_base: server URL for OpenAI-compatible providers.
        api_key: defaults to ``$OPENAI_API_KEY`` (never saved).
        api_key_env: the environment variable that holds the key, when ``api_key`` is not given (its name is
            saved, never its value), so that a copy rebuilt elsewhere (a Ray worker) reads the key there.
        temperature / max_tokens / seed: sampling defaults.
        cache: reuse answers of identical temperature-0 requests (SQLite).
        concurrency: simultaneous requests (local models run one at a time).
        retries: attempts on connection errors and 5xx before giving up.
        output_retries: re-asks when an answer doesn't match the schema.
        fallback: another LanguageModel that answers when this one fails.
        cache_dir: keep the response cache in this folder (instead of the user cache dir).
        price: dollars per million tokens, a :class:`~promptgym.lm.prices.Price` or
            ``{"input_per_mtok": ..., "output_per_mtok": ...}``; default: the pinned
            ``genai-prices`` table ($0 for ``local/`` models, which report compute seconds).
            A model with no price anywhere is reported as unpriced (see docs/cost.md).
        **sampling: defaults sent with every call (``top_p``, ``top_k``,
            ``reasoning_effort``, ...), forwarded to servers that take them.

    synalinks' names are accepted too: ``retry=`` (``retries``), ``caching=``
    (``cache``), ``retry_max_wait=``, ``name=``, ``description=``, ``hooks=``.
    Note that ``cache`` is on by default here (temperature 0 answers are
    reused); ``caching=False`` gives synalinks' behaviour.
    """

    def __init__(
        self,
        model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        seed: int | None = 0,
        cache: bool = True,
        concurrency: int | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        output_retries: int = 2,
        n_ctx: int = 4096,
        fallback: "LanguageModel | None" = None,
        cache_dir: str | None = None,
        retry: int | None = None,
        caching: bool | None = None,
        retry_max_wait: float | None = None,
        name: str | None = None,
        description: str | None = None,
        hooks: Any = None,
        api_key_env: str | None = None,
        price: "Price | dict[str, Any] | None" = None,
        **sampling: Any,
    ) -> None:
        retries = retry if retry is not None else retries
        cache = caching if caching is not None else cache
        if not (isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature >= 0):
            raise LMConfigurationError(f"temperature must be a number >= 0, got {temperature!r}")
        if not (isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1):
            raise LMConfigurationError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise LMConfigurationError(f"model must name a model ('provider/model', e.g. 'local/{DEFAULT_LOCAL_MODEL}'), "
                                       f"got {model!r}; leave it out for the embedded default")
        self.model = model or f"local/{DEFAULT_LOCAL_MODEL}"
        self.model_string = parse_model_string(self.model)
        self._cache_identity = self.model
        if self.model_string.provider == "local":
            # unknown names fail here, not at the first call; a fine-tuned model's revision keys the cache
            self._cache_identity = check_local_model(self.model_string.name) or self.model
        self.api_base = api_base or PROVIDER_API_BASES.get(self.model_string.provider)
        if self.model_string.provider != "local":
            check_api_base(self.model, self.api_base)
        self.api_key = api_key
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.cache = cache
        self.concurrency = concurrency
        self.timeout = timeout
        self.retries = retries
        self.output_retries = output_retries
        self.n_ctx = n_ctx
        self.fallback = fallback
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self.retry_max_wait = retry_max_wait
        self.name = name
        self.description = description
        self.sampling = {key: value for key, value in sampling.items() if value is not None}
        self.last_call_finish_reason: str | None = None
        self.last_call_cost = 0.0
        self.last_call_prompt_tokens = self.last_call_completion_tokens = self.last_call_tokens = 0
        self.last_call_elapsed_s = 0.0  # the last call that reached the model (synalinks' last_call_* mirrors)
        """What the server billed for the last call (0 when it doesn't say, or the cache answered)."""
        self.last_call_cost_usd: float | None = 0.0
        """What the last call cost in dollars, from the price (0 for a cache hit; None when the price is unknown)."""
        self.pricing = ModelPricing(self.model, lambda override: resolve_price(
            self.model_string.provider, self.model_string.name, self.api_base, override),
            Price.of(price, where=f"{self.model}: price") if price is not None else None)
        self.usage = UsageLedger()
        self._engine: Engine | None = None
        self._slots = loop_semaphore(lambda: self.concurrency or self.engine.concurrency)

    # -- engine ---------------------------------------------------------------------------

    def _make_engine(self) -> Engine:
        if self.model_string.provider == "local":
            files = resolve_local_model(self.model_string.name)
            return shared_local_engine(files.model_path, n_ctx=self.n_ctx, lora_path=files.lora_path)
        return OpenAICompatibleEngine(
            model=self.model_string.name,
            api_base=self.api_base or PROVIDER_API_BASES["openai"],
            api_key=self._api_key(),
            timeout=self.timeout,
            retries=self.retries,
            concurrency=self.concurrency or 8,
            slots=self._slots,
        )

    def _api_key(self) -> str | None:
        """The key given, else the one in ``$<api_key_env>`` (an error when that is unset here), else $OPENAI_API_KEY."""
        if self.api_key or not self.api_key_env:
            return self.api_key or os.environ.get("OPENAI_API_KEY")
        value = os.environ.get(self.api_key_env)
        if not value:
            raise LMConfigurationError(
                f"{self.model}: the environment variable {self.api_key_env} (api_key_env) that holds its key is not "
                f"set in this process (pid {os.getpid()}); on a Ray cluster set it on every node, or send it with "
                "promptgym submit --env-file")
        return value

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = self._make_engine()
        return self._engine

    @property
    def price(self) -> Price | None:
        """Dollars per million tokens (None: unknown, see docs/cost.md); looked up once, at first use."""
        return self.pricing.price

    @property
    def price_override(self) -> Price | None:
        """The price given as ``price=`` (None: the table's); setting it looks the price up again."""
        return self.pricing.override

    @price_override.setter
    def price_override(self, value: Price | None) -> None:
        self.pricing.override = value

    def estimate_usd(self, request: LMRequest) -> float:
        """An upper estimate of a call's price, before it is made: its prompt, and ``max_tokens`` of answer."""
        price = self.price
        return 0.0 if price is None else self.pricing.estimate(price, request)

    async def check(self) -> None:
        """Raise an :class:`LMError` naming the model and URL when its server can't be used.

        A server that is down, a host that doesn't resolve, a refused API key:
        each fails here, before a run spends anything. Embedded and scripted
        models have nothing to check.
        """
        check = getattr(self.engine, "check", None) if self.model_string.provider != "local" else None
        if check is None:
            return
        try:
            await check()
        except LMError as error:
            raise type(error)(f"model {self.model}: {error}") from None

    # -- calls ----------------------------------------------------------------------------

    async def __call__(
        self,
        messages: Any,
        schema: dict[str, Any] | None = None,
        validation_schema: Expected | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        streaming: bool = False,
        **sampling: Any,
    ) -> Any:
        """The answer: a dict matching ``schema`` when one is given, else the text.

        ``schema`` constrains decoding; the answer is validated against
        ``validation_schema`` (default: ``schema``; a JSON schema or a DataModel class) and the model is asked
        again, with the error, up to ``output_retries`` times. Given chat data
        models (``ChatMessages``) instead of dicts, the answer is a data model
        too (:mod:`promptgym.lm.chat_calls`). ``streaming=True`` (without a
        schema) returns a :class:`StreamingIterator`.
        """
        if streaming and schema is None:
            return self.stream(wire_messages(messages), temperature=temperature, max_tokens=max_tokens, **sampling)
        answer = await self.respond(wire_messages(messages), schema=schema, validation_schema=validation_schema,
                                    temperature=temperature, max_tokens=max_tokens, **sampling)
        if not is_chat_form(messages):
            return answer.value
        if schema is not None:
            return JsonDataModel(json=answer.value, schema=schema)
        return chat_answer(answer.content, answer.reasoning)

    @property
    def native_tools(self) -> bool:
        """Whether this model's engine takes OpenAI ``tools`` and answers ``tool_calls`` (servers do; the embedded engine does not)."""
        return bool(getattr(self.engine, "native_tools", True))

    def _request(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, temperature: float | None,
                 max_tokens: int | None, sampling: dict[str, Any]) -> LMRequest:
        extra = {**self.sampling, **{key: value for key, value in sampling.items() if value is not None}}
        if extra.get("reasoning_effort") in ("disable", "none"):
            # "none": the model's own default, so nothing is sent; "disable": ollama reasons unless told not to
            # (think=False); other servers reason only when asked, so nothing is sent to them either.
            if extra.pop("reasoning_effort") == "disable" and self.model_string.provider == "ollama":
                extra["think"] = False
        return LMRequest(messages=list(messages), schema=schema,
                         temperature=self.temperature if temperature is None else temperature,
                         max_tokens=max_tokens or self.max_tokens, seed=self.seed, extra=extra)

    async def respond(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None = None,
                      validation_schema: Expected | None = None, temperature: float | None = None,
                      max_tokens: int | None = None, tools: list[dict[str, Any]] | None = None,
                      **sampling: Any) -> "Answer":
        """The answer with what came with it (the text, the model's reasoning, why it stopped, tool calls).

        ``tools`` (OpenAI function specs) are sent to servers that call tools
        natively; their ``tool_calls`` come back in ``Answer.tool_calls``.
        When this model fails (after its retries), ``fallback`` answers instead.
        """
        try:
            return await self._respond(messages, schema, validation_schema, temperature, max_tokens, sampling, tools)
        except LMError:
            if self.fallback is None:
                raise
            self._record(Usage(fallback_activations=1))
            return await self.fallback.respond(messages, schema=schema, validation_schema=validation_schema,
                                               temperature=temperature, max_tokens=max_tokens, tools=tools, **sampling)

    async def _respond(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None,
                       validation_schema: Expected | None, temperature: float | None, max_tokens: int | None,
                       sampling: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> "Answer":
        request = self._request(messages, schema, temperature, max_tokens, sampling)
        request.tools = tools or None
        if schema is None:
            response = await self._complete(request)
            return Answer(response.content, response.content, response.reasoning, response.finish_reason,
                          response.tool_calls)
        problem = ""
        for _ in range(self.output_retries + 1):
            response = await self._complete(request)
            try:
                value = parse_json_object(response.content)
                model, problem = checked_answer(value, validation_schema or schema)
                problem = problem or ""
            except LMOutputError as error:
                problem = str(error)
            if not problem:
                return Answer(value, response.content, response.reasoning, response.finish_reason, model=model)
            if response.finish_reason == "length":
                problem += "; the answer was cut at max_tokens (finish_reason='length'): raise max_tokens"
            request = LMRequest(
                messages=[
                    *request.messages,
                    {"role": "assistant", "content": response.content},
                    {"role": "user", "content": f"That answer is invalid ({problem}). Answer again with JSON that follows the schema."},
                ],
                schema=schema,
                temperature=request.temperature,
                max_tokens=request.max_tokens,
                seed=request.seed,
                extra=request.extra,
            )
        self._record(Usage(failures=1))
        raise LMOutputError(f"{self.model}: no valid answer after {self.output_retries + 1} attempts ({problem})")

    def stream(self, messages: list[dict[str, Any]], temperature: float | None = None, max_tokens: int | None = None,
               *, schema: dict[str, Any] | None = None, **sampling: Any) -> StreamingIterator:
        """The answer as a :class:`StreamingIterator`, chunk by chunk as the model writes it.

        ``schema`` constrains the text as in ``respond`` (the caller parses and validates
        it). An engine that cannot stream, or a cached answer, comes as one chunk. The call
        holds one of the model's slots until it is read to the end or closed; closing it
        early stops the generation. When this model fails before its first chunk, ``fallback``
        streams instead.
        """
        request = self._request(messages, schema, temperature, max_tokens, sampling)
        return StreamingIterator(self._stream_or_fallback(request, messages, temperature, max_tokens, schema, sampling))

    async def _stream_or_fallback(self, request: LMRequest, messages: list[dict[str, Any]], temperature: float | None,
                                  max_tokens: int | None, schema: dict[str, Any] | None,
                                  sampling: dict[str, Any]) -> AsyncIterator[LMChunk]:
        started = False
        try:
            async with contextlib.aclosing(self._stream_chunks(request)) as chunks:
                async for chunk in chunks:
                    started = True
                    yield chunk
            return
        except LMError:
            if self.fallback is None or started:  # text already sent can't be taken back
                raise
        async with self.fallback.stream(messages, temperature, max_tokens, schema=schema, **sampling) as other:
            async for chunk in other._chunks:
                yield chunk

    async def _stream_chunks(self, request: LMRequest) -> AsyncIterator[LMChunk]:
        """The engine's chunks, priced like a call made in one piece: reserved on the caps before, its tokens
        (the server's usage chunk, else counted from the text) and dollars recorded after, however it ended."""
        engine_stream = getattr(self.engine, "stream", None)
        cache = self._response_cache() if self.cache and request.temperature == 0 else None
        key = self._cache_key(request) if cache is not None else ""
        if engine_stream is None or (cache is not None and cache.get(key) is not None):
            response = await self._complete(request)  # answers (and counts) a cache hit too
            yield LMChunk(response.content, response.reasoning or "", response.finish_reason,
                          response.prompt_tokens, response.completion_tokens)
            return
        meter = StreamMeter(estimate_prompt_tokens(request.messages), getattr(self.engine, "count_tokens", None))
        held = await self.pricing.reserve(lambda price: self.pricing.estimate(price, request))
        started = time.perf_counter()
        first: float | None = None
        content: list[str] = []
        reasoning: list[str] = []
        end = LMChunk()
        outcome = "left"  # "done", "failed", or "left": a reader that stopped reading (or a cap that stopped it)
        own_slot = None if getattr(self.engine, "slots", None) is not None else await self._slots.get()
        holding = False
        try:
            if own_slot is not None:
                await own_slot.acquire()
                holding = True
            chunks = engine_stream(request)
            try:
                async for chunk in chunks:
                    if first is None and (chunk.content or chunk.reasoning):
                        first = time.perf_counter() - started
                    if chunk.finish_reason is not None or chunk.prompt_tokens or chunk.completion_tokens:
                        end = chunk
                        meter.finish(chunk.prompt_tokens, chunk.completion_tokens)
                    meter.add(chunk.content + chunk.reasoning)  # reasoning is billed as completion tokens
                    if held:
                        held = self.pricing.extend_stream_hold(held, meter)  # a cap stops it between chunks
                    content.append(chunk.content)
                    reasoning.append(chunk.reasoning)
                    yield chunk
            finally:
                await chunks.aclose()  # a reader that left stops the engine's generation here
            outcome = "done"
        except Exception:
            outcome = "failed"
            raise
        finally:
            if holding:
                own_slot.release()
            self._settle_stream(request, meter, held, outcome, first, time.perf_counter() - started,
                                "".join(content), "".join(reasoning) or None, end.finish_reason, cache, key)

    def _settle_stream(self, request: LMRequest, meter: StreamMeter, held: float, outcome: str, first: float | None,
                       seconds: float, content: str, reasoning: str | None, finish_reason: str | None,
                       cache: Any, key: str) -> None:
        """Record a stream that ended (read to the end, failed, or left half-way) and give its caps the real price.

        Synchronous, so a cancelled reader still counts what was written. Nothing written: no tokens, $0.
        """
        wrote = first is not None or outcome == "done"
        if wrote and not meter.exact:
            meter.finish()  # the tokenizer's recount, when the engine has one
        prompt, completion = (meter.prompt_tokens, meter.completion_tokens) if wrote else (0, 0)
        priced = self.pricing.priced(prompt, completion) if wrote else Usage()
        if held:
            if meter.exact:
                self.pricing.learn_prompt_size(request, prompt)
            self.pricing.settle(held, priced.cost_usd)
        local = self.model_string.provider == "local"
        done = outcome == "done"
        self._record(Usage(calls=1, failures=int(outcome == "failed"), prompt_tokens=prompt,
                           completion_tokens=completion, latency_s=seconds, cost_usd=priced.cost_usd,
                           unpriced_calls=priced.unpriced_calls, compute_s=seconds if local and wrote else 0.0,
                           estimated_calls=int(wrote and not meter.exact), streaming_calls=int(done),
                           ttft_s=(seconds if first is None else first) if done else 0.0,
                           ttlt_s=seconds if done else 0.0,
                           truncated_calls=int(done and finish_reason == "length")))
        self.last_call_cost_usd = None if priced.unpriced_calls else priced.cost_usd
        if not done:
            return
        self.last_call_finish_reason = finish_reason
        self.last_call_prompt_tokens, self.last_call_completion_tokens = prompt, completion
        self.last_call_tokens, self.last_call_elapsed_s = prompt + completion, seconds
        response = LMResponse(content, prompt, completion, reasoning, finish_reason)
        record_call(self.model, request, response, seconds, cached=False, cost_usd=self.last_call_cost_usd)
        if cache is not None:
            cache.put_behind(key, {"content": response.content, "prompt_tokens": response.prompt_tokens,
                                   "completion_tokens": response.completion_tokens, "reasoning": response.reasoning,
                                   "finish_reason": response.finish_reason})

    def _cache_key(self, request: LMRequest) -> str:
        payload = {"model": self._cache_identity, "api_base": self.api_base, "messages": request.messages,
                   "schema": request.schema, "max_tokens": request.max_tokens, "seed": request.seed, "temperature": 0}
        if request.extra:
            payload["extra"] = request.extra
        if request.tools:
            payload["tools"] = request.tools
        return request_key(payload)

    async def _complete(self, request: LMRequest) -> LMResponse:
        tracer = current_tracer()
        if tracer is None:
            return await self._complete_untraced(request)
        attributes = {"gen_ai.request.model": self.model, "gen_ai.system": self.model_string.provider,
                      "gen_ai.request.temperature": request.temperature, "gen_ai.request.max_tokens": request.max_tokens,
                      "promptgym.structured": request.schema is not None}
        with tracer.start_as_current_span(f"lm {self.model}", attributes=attributes) as span:
            started = time.perf_counter()
            response = await self._complete_untraced(request)
            span.set_attributes({"gen_ai.usage.input_tokens": response.prompt_tokens,
                                 "gen_ai.usage.output_tokens": response.completion_tokens,
                                 "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"],
                                 **({"promptgym.cost_usd": self.last_call_cost_usd}
                                    if self.last_call_cost_usd is not None else {}),
                                 "promptgym.latency_ms": (time.perf_counter() - started) * 1000})
            return response

    async def _complete_untraced(self, request: LMRequest) -> LMResponse:
        use_cache = self.cache and request.temperature == 0
        key = ""
        self.last_call_finish_reason = None
        self.last_call_cost = 0.0
        self.last_call_cost_usd = 0.0
        cache = self._response_cache() if use_cache else None
        if cache is not None:
            key = self._cache_key(request)
            hit = cache.get(key)
            if hit is not None:
                response = LMResponse(**hit)
                self.last_call_finish_reason = response.finish_reason
                # Tokens are counted as if the call were made, so a rerun reports the same usage; dollars are
                # $0, and what the call would have cost is counted as saved.
                would = self.pricing.priced(response.prompt_tokens, response.completion_tokens)
                self._record(Usage(calls=1, cache_hits=1, prompt_tokens=response.prompt_tokens,
                                   completion_tokens=response.completion_tokens, saved_usd=would.cost_usd,
                                   unpriced_calls=would.unpriced_calls,
                                   truncated_calls=int(response.finish_reason == "length")))
                record_call(self.model, request, response, 0.0, cached=True, cost_usd=0.0)
                return response
        estimate = await self.pricing.reserve(lambda price: self.pricing.estimate(price, request))
        started = time.perf_counter()
        try:
            if getattr(self.engine, "slots", None) is not None:  # it holds a slot per try, none while backing off
                response = await self.engine.complete(request)
            else:
                async with await self._slots.get():
                    response = await self.engine.complete(request)
        except BaseException:
            self.pricing.settle(estimate, 0.0)
            self._record(Usage(calls=1, failures=1, latency_s=time.perf_counter() - started))
            raise
        latency = time.perf_counter() - started
        self.last_call_finish_reason = response.finish_reason
        self.last_call_cost = float(response.cost or 0.0)
        priced = self.pricing.priced(response.prompt_tokens, response.completion_tokens, float(response.cost or 0.0))
        if active_caps():
            self.pricing.learn_prompt_size(request, response.prompt_tokens)
            self.pricing.settle(estimate, priced.cost_usd)
        local = self.model_string.provider == "local"
        self.last_call_prompt_tokens, self.last_call_completion_tokens = response.prompt_tokens, response.completion_tokens
        self.last_call_tokens = response.prompt_tokens + response.completion_tokens
        self.last_call_elapsed_s = latency
        self._record(
            Usage(calls=1, prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                  latency_s=latency, cost=response.cost, cost_usd=priced.cost_usd,
                  unpriced_calls=priced.unpriced_calls, compute_s=latency if local else 0.0,
                  cached_tokens=response.cached_tokens, cache_creation_tokens=response.cache_creation_tokens,
                  reasoning_tokens=response.reasoning_tokens, truncated_calls=int(response.finish_reason == "length"))
        )
        self.last_call_cost_usd = None if priced.unpriced_calls else priced.cost_usd
        record_call(self.model, request, response, latency, cached=False, cost_usd=self.last_call_cost_usd)
        if cache is not None:
            await cache.put_off_loop(key, {
                "content": response.content, "prompt_tokens": response.prompt_tokens,
                "completion_tokens": response.completion_tokens, "reasoning": response.reasoning,
                "finish_reason": response.finish_reason,
                **({"tool_calls": response.tool_calls} if response.tool_calls else {})})
        return response

    def _response_cache(self) -> Any:
        """The shared cache of the user cache dir, or one in ``cache_dir``."""
        if self.cache_dir is None:
            return shared_cache()
        return ResponseCache(Path(self.cache_dir) / "responses.sqlite")

    def _record(self, usage: Usage) -> None:
        usage.total_tokens = usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
        self.usage.record(usage)
        LEDGER.record(usage)
        record_in_scopes(usage)

    # -- serialization --------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        """Everything needed to rebuild this model, except the API key."""
        return {
            "model": self.model,
            "api_base": self.api_base,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "cache": self.cache,
            "concurrency": self.concurrency,
            "timeout": self.timeout,
            "retries": self.retries,
            "output_retries": self.output_retries,
            "n_ctx": self.n_ctx,
            **({"api_key_env": self.api_key_env} if self.api_key_env else {}),
            **({"fallback": serialize_object(self.fallback)} if self.fallback is not None else {}),
            **({"cache_dir": self.cache_dir} if self.cache_dir is not None else {}),
            **({"price": self.price_override.as_dict()} if self.price_override is not None else {}),
            **self.sampling,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "LanguageModel":
        config = dict(config)
        if isinstance(config.get("fallback"), dict):
            config["fallback"] = deserialize_object(config["fallback"], expected="language model")
        return cls(**config)

    def __repr__(self) -> str:
        return f"LanguageModel(model={self.model!r})"
