"""One Generator's answer streamed while a program runs: the text of its last field, as written.

``program.stream(x)`` (:mod:`promptgym.programs.streaming`) sets a :class:`FieldTap` on the
Generator that writes the program's output; that Generator then streams its model call and
hands the new text of the field to ``emit`` as the model writes it. The JSON is read while
still incomplete with jiter's partial mode (pydantic's own parser), so a field's value shows
up before its closing quote:

    >>> reader = FieldReader("answer")
    >>> [reader.feed(piece) for piece in ['{"answer": "Pa', 'ris', '"}']]
    ['Pa', 'ris', '']
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import jiter

from promptgym.lm.errors import LMOutputError
from promptgym.lm.json_output import Expected, checked_answer, parse_json_object
from promptgym.lm.language_model import LanguageModel


@dataclass
class FieldTap:
    """Stream ``field`` of ``module``'s answer: each new piece of its text goes to ``emit``."""

    module: Any
    field: str
    emit: Callable[[str], None]


_tap: contextvars.ContextVar[FieldTap | None] = contextvars.ContextVar("promptgym_field_tap", default=None)


def active_tap(module: Any) -> FieldTap | None:
    """The tap set on ``module`` in this task, if any."""
    tap = _tap.get()
    return tap if tap is not None and tap.module is module else None


@contextlib.contextmanager
def tapping(tap: FieldTap) -> Iterator[None]:
    """Set ``tap`` for the calls made inside (in this task and the tasks it starts)."""
    token = _tap.set(tap)
    try:
        yield
    finally:
        _tap.reset(token)


def field_text(value: Any) -> str:
    """A field's value as the text a reader sees: a string as is, anything else as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class FieldReader:
    """The text of one top-level field of a JSON object that arrives piece by piece."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.raw = ""
        self.shown = ""

    def feed(self, piece: str) -> str:
        """The field's text added by ``piece`` ('' while the field is not reached, or not a string)."""
        self.raw += piece
        try:
            value = jiter.from_json(self.raw.encode(), partial_mode="trailing-strings")
        except ValueError:  # not JSON (yet): text before the object, a number cut in the middle
            return ""
        text = value.get(self.field) if isinstance(value, dict) else None
        if not isinstance(text, str) or not text.startswith(self.shown):
            return ""
        new, self.shown = text[len(self.shown):], text
        return new

    def rest(self, final: Any) -> str:
        """What the final value adds to the text shown (all of it for a number or list; '' if it diverged)."""
        text = field_text(final)
        return text[len(self.shown):] if text.startswith(self.shown) else ""


async def streamed_answer(tap: FieldTap, language_model: LanguageModel, messages: list[dict[str, Any]],
                          schema: dict[str, Any], validation_schema: Expected,
                          **options: Any) -> tuple[Any, str | None, Any]:
    """The parsed answer, the model's reasoning and the answer as its validated model, of one structured call,
    its field streamed to the tap.

    An answer that doesn't parse or validate is asked for again the usual way
    (``respond``, with its re-asks); the text already streamed stays, and what the
    final answer adds to it follows.
    """
    reader = FieldReader(tap.field)
    async with language_model.stream(messages, schema=schema, **options) as stream:
        async for chunk in stream:
            piece = reader.feed(chunk.get("content", ""))
            if piece:
                tap.emit(piece)
    reasoning = stream.reasoning_content or None
    try:
        value = parse_json_object(stream.content)
        model, problem = checked_answer(value, validation_schema)
    except LMOutputError as error:
        model, problem = None, str(error)
    if problem:
        answer = await language_model.respond(messages, schema=schema, validation_schema=validation_schema, **options)
        value, reasoning, model = answer.value, answer.reasoning, answer.model
    rest = reader.rest(value.get(tap.field) if isinstance(value, dict) else None)
    if rest:
        tap.emit(rest)
    return value, reasoning, model


async def streamed_chat(tap: FieldTap, language_model: LanguageModel, messages: list[dict[str, Any]],
                        **options: Any) -> tuple[str, str | None]:
    """A chat answer's content (and reasoning), each piece of the content sent to the tap."""
    async with language_model.stream(messages, **options) as stream:
        async for chunk in stream:
            if chunk.get("content"):
                tap.emit(chunk["content"])
    return stream.content, stream.reasoning_content or None
