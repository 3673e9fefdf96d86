"""The embedded engine: llama.cpp in-process, through llama-cpp-python.

One llama.cpp context per model file, shared by every LanguageModel that
names it. Calls run one at a time on the engine's own thread (a context is not
thread-safe), which also keeps the KV cache warm: llama-cpp-python reuses the
longest common token prefix with the previous call, so a batch whose prompts
share instructions + examples only evaluates each example's own tokens.

``stream`` runs llama.cpp's token generator in a worker thread that feeds the
caller's event loop; a caller that stops reading (``aclose()``, a cancelled
task) stops the generation before the next token and frees the context.
After the first token the worker waits (briefly) for the reader to take it:
llama.cpp computing the second token on every core would otherwise leave the
event loop, and the client reading the first, no core to do it on.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from promptgym.lm.engine import LMChunk, LMRequest, LMResponse
from promptgym.lm.errors import EngineMissingError, LMError
from promptgym.lm.json_grammar import json_schema_gbnf

DEFAULT_CONTEXT_SIZE = 4096
MAX_CACHED_GRAMMARS = 128
LOCK_POLL_S = 0.02
"""How often a streamed call waiting for the context checks whether its reader left."""
FIRST_TOKEN_HANDOFF_S = 0.02
"""The longest the worker waits, after the first token, for the reader to take it (a reader held up for
longer, e.g. by an event loop busy with other requests, lets the generation go on)."""
_END = object()


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as error:
        raise EngineMissingError(
            "the embedded engine needs llama-cpp-python: run `make install`, or "
            "CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install 'promptgym[local]' (see docs/models.md, 'Why the build flags', for the full flags)"
        ) from error
    return llama_cpp


# Threads of each llama.cpp context in this process (a Ray worker sets it; default: every core).
LOCAL_THREADS_ENV = "PROMPTGYM_LOCAL_THREADS"


class LlamaCppEngine:
    """Runs chat completions on a local ``.gguf`` file."""

    concurrency = 1
    native_tools = False  # small models call tools unreliably; agents use a grammar-constrained choice instead

    def __init__(self, model_path: Path, n_ctx: int = DEFAULT_CONTEXT_SIZE, n_threads: int | None = None,
                 lora_path: Path | None = None) -> None:
        self.model_path = Path(model_path)
        self.lora_path = Path(lora_path) if lora_path else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads or int(os.environ.get(LOCAL_THREADS_ENV) or 0) or max(1, os.cpu_count() or 1)
        self._llama: Any = None
        self._lock = threading.Lock()
        # One calling thread for every call: llama.cpp's CPU backend runs on OpenMP, which gives each thread
        # that calls it its own team of compute threads, and the idle teams of earlier callers spin on the
        # same cores (on 2 cores that delayed a first token by about half again)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama")
        self._grammars: dict[str, Any] = {}  # insertion order is recency
        self._grammars_lock = threading.Lock()

    def _engine(self) -> Any:
        if self._llama is None:
            llama_cpp = _import_llama_cpp()
            self._llama = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                lora_path=str(self.lora_path) if self.lora_path else None,
                verbose=False,
            )
        return self._llama

    def _grammar(self, schema: dict[str, Any]) -> Any:
        """Compile each schema's grammar once; a batch reuses it (strings without raw control characters).

        At most ``MAX_CACHED_GRAMMARS`` are kept, least recently used out first: a served agent's
        schemas can differ per request, and a long-running server must not grow with them.
        """
        key = json.dumps(schema, sort_keys=True)
        with self._grammars_lock:
            grammar = self._grammars.pop(key, None)
            if grammar is None:
                llama_cpp = _import_llama_cpp()
                grammar = llama_cpp.LlamaGrammar.from_string(json_schema_gbnf(key), verbose=False)
            self._grammars[key] = grammar  # now the most recent
            while len(self._grammars) > MAX_CACHED_GRAMMARS:
                self._grammars.pop(next(iter(self._grammars)))
        return grammar

    def _sampling(self, request: LMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {key: request.extra[key] for key in ("top_p", "top_k") if key in request.extra}
        if request.schema is not None:
            kwargs["grammar"] = self._grammar(request.schema)
        return {"messages": request.messages, "temperature": request.temperature, "max_tokens": request.max_tokens,
                "seed": request.seed, **kwargs}

    def complete_sync(self, request: LMRequest) -> LMResponse:
        with self._lock:
            llama = self._engine()
            try:
                result = llama.create_chat_completion(**self._sampling(request))
            except ValueError as error:  # e.g. prompt longer than the context
                raise LMError(f"{self.model_path.name}: {error}") from error
        usage = result.get("usage") or {}
        return LMResponse(
            content=result["choices"][0]["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=result["choices"][0].get("finish_reason"),
        )

    async def complete(self, request: LMRequest) -> LMResponse:
        return await asyncio.wrap_future(self._thread.submit(self.complete_sync, request))

    async def stream(self, request: LMRequest) -> AsyncIterator[LMChunk]:
        """The answer token by token; the last chunk has the finish reason and the token counts.

        Closing the iterator stops llama.cpp before its next token (a prompt being read is
        read to its end first: llama.cpp can't stop inside one evaluation) and returns once
        the context is free for the next call.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        taken = threading.Event()  # the reader asked for the next chunk: the first one is on its way

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody reads any more
                stop.set()

        job = self._thread.submit(self._stream_sync, request, stop, put, taken)
        worker = asyncio.wrap_future(job)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
                taken.set()
        finally:
            stop.set()
            taken.set()
            if not job.cancel():  # still queued behind another call: dropped; else it ends at the next token
                await asyncio.shield(worker)  # the context is free when the reader gets control back

    def _stream_sync(self, request: LMRequest, stop: threading.Event, put: Callable[[Any], None],
                     taken: threading.Event | None = None) -> None:
        """Runs in a worker thread: one streamed completion, each token ``put`` as an LMChunk, then ``_END``.

        After the first token it waits for ``taken`` (the reader came back for more), at most
        :data:`FIRST_TOKEN_HANDOFF_S`, so the first token leaves before the second is computed.
        """
        while not self._lock.acquire(timeout=LOCK_POLL_S):  # another call holds the context: wait, unless left
            if stop.is_set():
                put(_END)
                return
        try:
            if stop.is_set():
                return
            llama = self._engine()
            pieces: list[str] = []
            finish_reason = None
            chunks = llama.create_chat_completion(**self._sampling(request), stream=True)
            try:
                for chunk in chunks:
                    if stop.is_set():
                        break
                    choice = chunk["choices"][0]
                    finish_reason = choice.get("finish_reason") or finish_reason
                    text = (choice.get("delta") or {}).get("content") or ""
                    if text:
                        pieces.append(text)
                        put(LMChunk(content=text))
                        if taken is not None and len(pieces) == 1:
                            taken.wait(FIRST_TOKEN_HANDOFF_S)
                            if stop.is_set():  # it left instead: not one token more
                                break
            finally:
                chunks.close()  # a generator left early frees llama.cpp's sampling state now, not at collection
            if not stop.is_set():
                # llama.cpp's stream reports no usage: the answer's tokens, and the rest of the context's
                completion_tokens = len(llama.tokenize("".join(pieces).encode(), add_bos=False, special=True))
                put(LMChunk(finish_reason=finish_reason or "stop", completion_tokens=completion_tokens,
                            prompt_tokens=max(0, int(llama.n_tokens) - completion_tokens)))
        except ValueError as error:  # e.g. prompt longer than the context
            put(LMError(f"{self.model_path.name}: {error}"))
        except Exception as error:  # noqa: BLE001 - handed to the reader, which raises it in its own task
            put(error)
        finally:
            self._lock.release()
            put(_END)


_engines: dict[tuple[str, int, str], LlamaCppEngine] = {}
_engines_lock = threading.Lock()


@atexit.register
def _close_engines() -> None:
    # Free llama.cpp contexts before interpreter teardown; otherwise their
    # finalizers run after llama_cpp's globals are gone and print a TypeError.
    for engine in _engines.values():
        if engine._llama is not None:
            engine._llama.close()
            engine._llama = None


def shared_local_engine(model_path: Path, n_ctx: int = DEFAULT_CONTEXT_SIZE,
                         lora_path: Path | None = None) -> LlamaCppEngine:
    """One engine (one llama.cpp context) per model file, LoRA adapter and context size."""
    key = (str(model_path), n_ctx, str(lora_path or ""))
    with _engines_lock:
        if key not in _engines:
            _engines[key] = LlamaCppEngine(model_path, n_ctx=n_ctx, lora_path=lora_path)
        return _engines[key]
