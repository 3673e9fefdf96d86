"""The current policy on an OpenAI-compatible chat endpoint on 127.0.0.1, recording every completion it serves.

    server = PolicyServer(model, tokenizer, max_new_tokens=64, temperature=1.0)
    await server.start()
    rollout = server.open_rollout(greedy=False)
    url = server.url(rollout)             # ".../rollouts/<id>/v1": give it to the task app as inference_url
    ...                                   # the app POSTs {url}/chat/completions, one or more times
    completions = server.close_rollout(rollout)   # what was served: prompt ids, sampled ids, log-probabilities

Every rollout gets its own URL (an unguessable id in the path), so each completion is recorded under the
rollout that asked for it and the update trains on exactly the tokens that were sampled, never on a
re-tokenised copy of the text. A URL stops answering (404) once its rollout is closed. It runs on promptgym's
one server stack, FastAPI on uvicorn (:mod:`promptgym.core.local_server`), inside the trainer's event loop.

The server lives in the trainer's process and shares the model object with the optimiser: after an update
the next request is answered by the new weights, at no cost (nothing is copied or merged). Requests that
arrive together are answered by one batched generation (the ``group_size`` rollouts of a seed share one
prompt encoding); generation and the update never run at the same time (``lock``).

The trainer owns sampling: training rollouts use the run's temperature and evaluation rollouts are greedy,
whatever ``temperature``, ``top_p`` or ``seed`` a request carries. ``max_tokens`` is honoured up to the run's
``max_new_tokens``; ``stop`` strings end a completion. Structured output (``response_format`` with a JSON
schema) is not enforced by a grammar: the schema is added to the prompt, as a client does for a server
without structured output, and the policy learns valid JSON from the reward.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from promptgym.core.local_server import LocalServer
from promptgym.finetune.rl.draws import completion_generator
from promptgym.finetune.rl.sampler import Sample, sample
from promptgym.finetune.rl.tool_calls import as_text_messages, reply_message, uses_tools
from promptgym.lm.openai_engine import schema_instruction

GATHER_S = 0.02
"""How long the batcher waits for more requests after the last one arrived, before it generates."""
MAX_BATCH = 64
BARRIER_S = 1.0
"""How long a batch waits at most for the rollouts the trainer said are in flight (:meth:`PolicyServer.expect`)."""
MAX_BODY_BYTES = 10_000_000
"""A request body larger than this gets 413."""


@dataclass
class Completion:
    """One served completion: ``prompt_ids`` + ``completion_ids`` is exactly what the model saw and drew."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    text: str

    @property
    def tokens(self) -> int:
        return len(self.completion_ids)


@dataclass
class _Rollout:
    greedy: bool
    completions: list[Completion] = field(default_factory=list)
    key: tuple[int, ...] | None = None
    """Where the rollout sits in the run (iteration, rollout index, attempt): its completions' random streams."""
    requests: int = 0


@dataclass
class _Pending:
    prompt_ids: list[int]
    max_new_tokens: int
    greedy: bool
    stops: list[str]
    future: asyncio.Future[Sample]
    generator: Any = None
    order: tuple[int, ...] = ()


class ServerStopping(RuntimeError):
    """The run is ending: a request still waiting for its batch gets a 503."""


class BadRequest(ValueError):
    """A request the server can't answer; the message goes back in the OpenAI error format."""


def _json(body: Any, status: int = 200) -> Any:
    from starlette.responses import JSONResponse  # deferred with the server stack (the finetune extra has it)

    return JSONResponse(body, status_code=status)


def _error(status: int, message: str) -> Any:
    return _json({"error": {"message": message, "type": "invalid_request_error"}}, status)


class PolicyServer:
    """See the module docstring. ``lock`` is held while generating; hold it to change the weights."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int, temperature: float, model_name: str = "policy",
                 seed: int = 0, autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext) -> None:
        import torch  # deferred: heavy, loaded when a job runs

        self.model, self.tokenizer, self.autocast = model, tokenizer, autocast
        self.max_new_tokens, self.temperature, self.model_name = max_new_tokens, temperature, model_name
        self.lock = threading.Lock()
        self.seed = seed
        self.generator = torch.Generator(device=model.device).manual_seed(seed)  # draws where the logits are
        self.stop_ids = self._stop_ids()
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._rollouts: dict[str, _Rollout] = {}
        self._expected: set[tuple[int, ...]] = set()
        self._queue: asyncio.Queue[_Pending] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy")
        self._server: LocalServer | None = None
        self._batcher: asyncio.Task[None] | None = None
        self._generating: list[_Pending] = []
        self.base_url = ""
        self.tokens_sampled = 0
        self.generation_s = 0.0
        self.batches = 0

    def _stop_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids.update(configured if isinstance(configured, list) else [configured])
        return {int(token) for token in ids if token is not None}

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (a free port by default); returns the base URL."""
        self._server = LocalServer(self._app(), host, port)
        self.base_url = await self._server.start()
        self._queue = asyncio.Queue()
        self._batcher = asyncio.create_task(self._batch_forever())
        return self.base_url

    async def stop(self) -> None:
        """Stop listening; requests still waiting (from rollouts a stop abandoned) get a 503."""
        if self._batcher is not None:
            self._batcher.cancel()
            await asyncio.gather(self._batcher, return_exceptions=True)
            self._batcher = None
        waiting = list(self._generating)
        while self._queue is not None and not self._queue.empty():
            waiting.append(self._queue.get_nowait())
        for pending in waiting:
            if not pending.future.done():
                pending.future.set_exception(ServerStopping("the policy server is stopping"))
        if self._server is not None:
            await self._server.stop()
            self._server = None
        self._executor.shutdown(wait=True)

    def reseed(self, seed: int) -> None:
        """Sampling from here on is drawn from ``seed`` (the trainer reseeds per iteration)."""
        with self.lock:
            self.generator.manual_seed(seed)

    # -- rollouts -------------------------------------------------------------------------

    def open_rollout(self, greedy: bool = False, key: tuple[int, ...] | None = None) -> str:
        """A new rollout URL id; with a ``key`` each of its completions draws from its own keyed stream
        (:mod:`promptgym.finetune.rl.draws`), so that the tokens do not depend on the order requests arrive in."""
        rollout = secrets.token_urlsafe(12)
        self._rollouts[rollout] = _Rollout(greedy=greedy, key=key)
        return rollout

    def _draws(self, rollout: _Rollout) -> tuple[Any, tuple[int, ...]]:
        """(generator, batch order) of the rollout's next request; the shared generator when it has no key."""
        index, rollout.requests = rollout.requests, rollout.requests + 1
        if rollout.key is None:
            return None, ()
        return completion_generator(self.seed, *rollout.key, index, device=self.model.device), (*rollout.key, index)

    def url(self, rollout: str) -> str:
        """The OpenAI-compatible base URL (``.../v1``) of one rollout."""
        return f"{self.base_url}/rollouts/{rollout}/v1"

    def close_rollout(self, rollout: str) -> list[Completion]:
        """The rollout's completions, in the order they were served; its URL answers 404 from now on."""
        entry = self._rollouts.pop(rollout, None)
        return entry.completions if entry else []

    def expect(self, keys: list[tuple[int, ...]]) -> None:
        """The rollouts now in flight, by key: a batch waits (up to ``BARRIER_S``) until each has a request in it or
        has :meth:`settle`-d, so that batches hold the same requests however they arrive, and the CPU's sums,
        whose rounding depends on the batch's shape, come out the same from run to run."""
        self._expected = set(keys)

    def settle(self, key: tuple[int, ...]) -> None:
        """The rollout ``key`` ended: batches stop waiting for it."""
        self._expected.discard(key)

    def _generators(self, part: list[_Pending]) -> Any:
        """One keyed generator (on the model's device) per row when every request has one; else the shared one."""
        keyed = [pending.generator for pending in part]
        return keyed if all(generator is not None for generator in keyed) else self.generator

    def _awaiting(self, batch: list[_Pending], since: float) -> bool:
        """Whether an expected rollout that has started (its URL was handed out) has no request in ``batch`` yet,
        and the barrier has not timed out. Rollouts not started yet (a task app that runs fewer at a time than
        the trainer sends) are not waited for: they may wait for a batch to finish."""
        started = {rollout.key[:2] for rollout in self._rollouts.values() if rollout.key is not None}
        present = {pending.order[:2] for pending in batch}
        return bool((self._expected & started) - present) and time.monotonic() - since < BARRIER_S

    # -- HTTP -----------------------------------------------------------------------------

    def _app(self) -> Any:
        """The FastAPI app: health, and each rollout's models and chat completions."""
        from fastapi import FastAPI  # deferred with the server stack: the CLI's flow table imports this module

        async def health(request: Any) -> Any:
            return _json({"status": "ok"})

        async def models(request: Any) -> Any:
            if request.path_params["rollout"] not in self._rollouts:
                return _error(404, "unknown or finished rollout")
            return _json({"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                      "owned_by": "promptgym"}]})

        async def chat(request: Any) -> Any:
            too_large = _error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
            if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
                return too_large  # before reading it
            raw = await request.body()
            return too_large if len(raw) > MAX_BODY_BYTES else await self._chat(request.path_params["rollout"], raw)

        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        # Plain routes (the handler gets the request): FastAPI's parameter injection would read the
        # string annotations this module's ``from __future__`` makes, and find no ``Request`` in its globals.
        app.add_route("/health", health, methods=["GET"])
        app.add_route("/rollouts/{rollout}/v1/models", models, methods=["GET"])
        app.add_route("/rollouts/{rollout}/v1/chat/completions", chat, methods=["POST"])
        return app

    async def _chat(self, rollout_id: str, raw: bytes) -> Any:
        rollout = self._rollouts.get(rollout_id)
        if rollout is None:
            return _error(404, "unknown or finished rollout (it timed out, failed, or its iteration ended)")
        try:
            body = json.loads(raw)
            with_tools = isinstance(body, dict) and uses_tools(body)
            prompt_ids, max_new_tokens, stops = self._parse(as_text_messages(body) if with_tools else body)
        except (BadRequest, ValueError, json.JSONDecodeError, UnicodeDecodeError) as error:
            return _error(400, str(error) or "the body is not JSON")
        future: asyncio.Future[Sample] = asyncio.get_running_loop().create_future()
        assert self._queue is not None
        generator, order = self._draws(rollout)
        await self._queue.put(_Pending(prompt_ids, max_new_tokens, rollout.greedy, stops, future, generator, order))
        try:
            drawn = await future
        except ServerStopping as error:
            return _error(503, str(error))
        text = self._text(drawn.completion_ids, stops)
        completion = Completion(drawn.prompt_ids, drawn.completion_ids, drawn.logprobs, drawn.finish_reason, text)
        if rollout_id in self._rollouts:
            rollout.completions.append(completion)
        message, tool_finish = reply_message(text, with_tools)
        return _json({
            "id": f"chatcmpl-{secrets.token_hex(6)}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": tool_finish or drawn.finish_reason}],
            "usage": {"prompt_tokens": len(drawn.prompt_ids), "completion_tokens": completion.tokens,
                      "total_tokens": len(drawn.prompt_ids) + completion.tokens},
        })

    def _parse(self, body: Any) -> tuple[list[int], int, list[str]]:
        if not isinstance(body, dict):
            raise BadRequest("expected a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise BadRequest("messages: expected a non-empty list of {role, content} with text content")
        if body.get("stream"):
            raise BadRequest("stream: streaming is not supported by the policy server")
        if int(body.get("n") or 1) != 1:
            raise BadRequest("n: the policy server answers one choice per request")
        messages = self._with_schema(messages, body.get("response_format"))
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        asked = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_new_tokens
        max_new_tokens = max(1, min(int(asked), self.max_new_tokens))
        if self.max_positions and len(prompt_ids) + max_new_tokens > self.max_positions:
            raise BadRequest(f"the prompt has {len(prompt_ids)} tokens; with {max_new_tokens} new tokens it exceeds "
                             f"the model's {self.max_positions} positions")
        stop = body.get("stop") or []
        stops = [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str) and s]
        return prompt_ids, max_new_tokens, stops

    @staticmethod
    def _with_schema(messages: list[dict[str, str]], response_format: Any) -> list[dict[str, str]]:
        if not isinstance(response_format, dict) or response_format.get("type") not in ("json_schema", "json_object"):
            return messages
        schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema")
        note = schema_instruction(schema) if isinstance(schema, dict) else "Answer with a single JSON object."
        last = messages[-1]
        return [*messages[:-1], {**last, "content": last["content"] + "\n\n" + note}]

    def _text(self, completion_ids: list[int], stops: list[str]) -> str:
        text = self.tokenizer.decode(completion_ids, skip_special_tokens=True)
        cuts = [text.find(stop) for stop in stops if stop in text]
        return text[: min(cuts)] if cuts else text

    # -- batched generation ---------------------------------------------------------------

    async def _batch_forever(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch, since = [await self._queue.get()], time.monotonic()
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), GATHER_S))
                except asyncio.TimeoutError:
                    if not self._awaiting(batch, since):
                        break
            for greedy in (False, True):
                part = sorted((pending for pending in batch if pending.greedy == greedy and not pending.future.done()),
                              key=lambda pending: pending.order)  # rows in run order, not arrival order
                if not part:
                    continue
                self._generating = part
                try:
                    drawn = await loop.run_in_executor(self._executor, self._generate, part, greedy)
                except Exception as error:  # noqa: BLE001 - each waiting request gets the error, the server lives on
                    for pending in part:
                        if not pending.future.done():
                            pending.future.set_exception(error)
                    continue
                for pending, result in zip(part, drawn):
                    if not pending.future.done():
                        pending.future.set_result(result)

    def _generate(self, part: list[_Pending], greedy: bool) -> list[Sample]:
        stops = [pending.stops for pending in part]

        def stopped(row: int, ids: list[int]) -> bool:
            return bool(stops[row]) and any(stop in self.tokenizer.decode(ids[-32:], skip_special_tokens=True)
                                            for stop in stops[row])

        with self.lock, self.autocast():
            started = time.perf_counter()
            self.model.eval()
            drawn = sample(self.model, [pending.prompt_ids for pending in part],
                           [pending.max_new_tokens for pending in part], 0.0 if greedy else self.temperature,
                           self.stop_ids, self.tokenizer.pad_token_id,
                           self._generators(part),
                           stopped=stopped if any(stops) else None)
            self.generation_s += time.perf_counter() - started
            self.tokens_sampled += sum(len(item.completion_ids) for item in drawn)
            self.batches += 1
        return drawn
