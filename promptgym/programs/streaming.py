"""``program.stream(x)``: the text of a program's last output field, as the model writes it.

    async with program.stream({"question": "Why is the sky blue?"}) as stream:
        async for text in stream:
            print(text, end="", flush=True)
    stream.output   # the program's whole output, once read to the end

The program runs as usual, in a task of its own; the Generator that writes the
program's output streams its model call (:mod:`promptgym.modules.field_stream`).
A program whose output comes from another kind of module yields the field once,
when it is done. Leaving early (``aclose()``, or ``async with``) cancels the run,
which stops the model's generation.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable

from promptgym.modules.field_stream import FieldReader, FieldTap, tapping
from promptgym.modules.generator import Generator, as_json

_DONE = object()


def streamed_module(program: Any) -> Generator | None:
    """The Generator whose answer is the program's output, when there is one."""
    graph = getattr(program, "_graph", None)
    if graph is not None:
        if len(graph.outputs) != 1:
            return None
        node = graph._producers.get(graph.outputs[0].id)
        module = node.module if node is not None else None
    else:  # a subclassed program: its last module, in attribute order
        modules = list(getattr(program, "modules", None) or [])
        module = modules[-1] if modules else None
    return module if isinstance(module, Generator) else None


def last_field(program: Any, module: Generator | None) -> str | None:
    """The name of the field streamed: the module's last field, else the program's last output field."""
    if module is not None:
        return module.streamed_field()
    try:
        properties = list((program.output_schema or {}).get("properties") or {})
    except (AttributeError, TypeError):
        return None
    return properties[-1] if properties else None


class ProgramStream:
    """An async iterator of text pieces of the program's last output field; ``output`` once it ends."""

    def __init__(self, run: Callable[[], Awaitable[Any]], module: Generator | None, field: str | None) -> None:
        self._run = run
        self.module = module
        self.field = field
        self.text = ""
        """The field's text handed over so far."""
        self.output: Any = None
        """The program's output, once the stream has ended."""
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._pieces: AsyncIterator[str] | None = None

    def __aiter__(self) -> "ProgramStream":
        return self

    async def __anext__(self) -> str:
        if self._pieces is None:
            self._pieces = self._read()
        return await self._pieces.__anext__()

    async def aclose(self) -> None:
        """Stop: the program's run is cancelled (its model stops generating) and awaited."""
        if self._pieces is not None:
            await self._pieces.aclose()  # type: ignore[attr-defined]

    async def __aenter__(self) -> "ProgramStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _body(self) -> Any:
        if self.module is None or self.field is None:
            return await self._run()
        with tapping(FieldTap(self.module, self.field, self._queue.put_nowait)):
            return await self._run()

    async def _read(self) -> AsyncIterator[str]:
        task = asyncio.create_task(self._body())
        task.add_done_callback(lambda _: self._queue.put_nowait(_DONE))
        try:
            while (piece := await self._queue.get()) is not _DONE:
                self.text += piece
                yield piece
            self.output = task.result()  # the program's error, if it failed
            if self.field is not None and self.output is not None:
                rest = FieldReader(self.field)
                rest.shown = self.text
                piece = rest.rest(as_json(self.output).get(self.field))
                if piece:
                    self.text += piece
                    yield piece
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


def stream_program(program: Any, inputs: Any, run: Callable[[], Awaitable[Any]] | None = None) -> ProgramStream:
    """The stream of ``program`` on ``inputs``; ``run`` replaces ``program(inputs)`` (to wrap it in scopes)."""
    module = streamed_module(program)
    return ProgramStream(run or (lambda: program(inputs)), module, last_field(program, module))
