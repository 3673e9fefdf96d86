"""DataModels and small builders shared by the tests."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.core.local_server import free_port
from promptgym.testing import ScriptedLanguageModel, last_user_json


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(file_name: str) -> ModuleType:
    """``examples/<file_name>`` imported as a module of its stem's name (listed in ``sys.modules``, where
    dataclasses look their module up)."""
    path = EXAMPLES / file_name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def served_in_thread(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 in a thread, for code that calls it synchronously (a CLI run);
    yields its base URL and stops it after."""
    import uvicorn  # deferred: the serve extra, and this module is imported by every test

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        assert time.time() < deadline, "the app's server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


class Document(pg.DataModel):
    """A knowledge base's table: the key first (its primary key), then the text."""

    id: str = pg.Field(description="The key")
    text: str = pg.Field(description="The content")


def echo_lm(**kwargs: object) -> ScriptedLanguageModel:
    """Answers each question with its upper-cased text (and a thought, for ChainOfThought)."""

    def respond(request):
        answer = {"answer": last_user_json(request)["question"].upper()}
        return {"thinking": "t", **answer} if "thinking" in request.schema["properties"] else answer

    return ScriptedLanguageModel(respond=respond, **kwargs)


async def functional_program(lm: ScriptedLanguageModel, name: str = "qa") -> pg.Program:
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm)(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name=name)


def questions(*texts: str) -> np.ndarray:
    return np.array([Question(question=text) for text in texts], dtype=object)


def labelled(*texts: str) -> tuple[np.ndarray, np.ndarray]:
    """Questions and their upper-cased answers."""
    return questions(*texts), np.array([Answer(answer=text.upper()) for text in texts], dtype=object)


class EventRecorder(pg.callbacks.Callback):
    """Keeps every event of a fit; ``of(kind)`` lists those of one kind."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list = []

    def on_event(self, event) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list:
        return [event for event in self.events if event["event"] == kind]
