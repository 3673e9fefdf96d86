"""What a docs page's Python blocks run against: scripted models and a small program with data.

Every ``LanguageModel`` (whatever its model string, built by the page or inside the library) answers
from a script that writes a valid instance of the requested JSON schema (the capital for a capital
question, so training has something to learn); every ``EmbeddingModel`` embeds by hashing words.
Blocking servers (``uvicorn.run``, ``promptgym.taskapp.serve``) are recorded instead of started.
The names a fragment may use (``program``, ``lm``, ``x_train``, ...) are predefined; a page's blocks
share one namespace, in order, as a reader would run them.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import numpy as np
import pytest

import promptgym
from promptgym.lm.engine import LMRequest
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel
from promptgym.testing import ScriptedEngine
from promptgym.training.mlflow_logger import MLflowLogger
from promptgym.traces import TraceStore

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Egypt": "Cairo", "Peru": "Lima",
            "Kenya": "Nairobi", "Canada": "Ottawa", "Norway": "Oslo", "Chile": "Santiago", "Spain": "Madrid",
            "Greece": "Athens", "Cuba": "Havana"}


def capital_asked(request: LMRequest) -> str | None:
    text = str(request.messages[-1].get("content") or "") if request.messages else ""
    return next((city for country, city in CAPITALS.items() if country in text), None)


def example_of(schema: dict[str, Any], defs: dict[str, Any], key: str, request: LMRequest) -> Any:
    """A valid value of ``schema`` (the first choice of a union, the shortest list)."""
    if "$ref" in schema:
        return example_of(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, key, request)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            options = [option for option in schema[union] if option.get("type") != "null"] or schema[union]
            final = [option for option in options if "final_answer" in json.dumps(option)]
            return example_of((final or options)[0], defs, key, request)
    if "allOf" in schema:
        return example_of(schema["allOf"][0], defs, key, request)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: example_of(sub, defs, name, request) for name, sub in properties.items()}
    if kind == "array":
        items = schema.get("items", {"type": "string"})
        return [example_of(items, defs, key, request) for _ in range(schema.get("minItems", 1))]
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return capital_asked(request) or f"a {key}"


def respond(request: LMRequest) -> Any:
    if request.schema is None:
        return capital_asked(request) or "Paris"
    return example_of(request.schema, request.schema.get("$defs", {}), "answer", request)


def scripted_engine(self: LanguageModel) -> ScriptedEngine:
    return ScriptedEngine(None, respond, None, concurrency=4, delay_s=0.0)


async def hashed(self: EmbeddingModel, texts: list[str]) -> Any:
    vectors = np.zeros((len(texts), 64), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in str(text).lower().split():
            vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        vectors[row, 0] += 0.01
    return vectors


class Question(promptgym.DataModel):
    question: str = promptgym.Field(description="A question")


class Answer(promptgym.DataModel):
    answer: str = promptgym.Field(description="The city's name, nothing else")


def recorded_client(logger: MLflowLogger) -> MagicMock:
    if logger._client is None:
        logger._client = MagicMock(name="MlflowClient")
        logger._client.create_run.return_value.info.run_id = "docs-run"
    return logger._client


def patch_models(patch: pytest.MonkeyPatch, servers: list[Any]) -> None:
    """Scripted models everywhere, servers recorded instead of started, MLflow's client recorded."""
    patch.setattr(LanguageModel, "_make_engine", scripted_engine)
    patch.setattr(EmbeddingModel, "_embed", hashed)
    # MLflow and its plots are tested in tests/observability; here they would spend ~20 s importing and drawing.
    patch.setattr(MLflowLogger, "client", property(lambda self: recorded_client(self)))
    patch.setattr(MLflowLogger, "_log_history_plot", lambda self, *args, **kwargs: None)
    patch.setattr("uvicorn.run", lambda app, **options: servers.append((app, options)))
    patch.setattr("promptgym.taskapp.serve", lambda app, **options: servers.append((app, options)))


def write_files(folder: Path) -> None:
    """The files the pages' fragments read: data files, a trace store, an events log."""
    rows = [{"prompt": f"What is the capital of {country}?", "label": {"text": city}} for country, city in CAPITALS.items()]
    (folder / "qa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    with gzip.open(folder / "inputs.jsonl.gz", "wt") as file:
        file.writelines(json.dumps({"question": row["prompt"]}) + "\n" for row in rows)
    (folder / "qa.csv").write_text("text,answer\n" + "".join(f"{r['prompt']},{r['label']['text']}\n" for r in rows))
    (folder / "traces").mkdir()
    with TraceStore(folder / "traces" / "traces.db") as store:  # what `serve --record traces/` leaves
        store.describe_program("dates", "v1", input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
                               output_schema={"type": "object", "properties": {"date": {"type": "string"}}})
        for day in range(1, 11):
            trace = store.record(program="dates", version="v1", inputs={"text": f"We met on {day} March 2021."},
                                 outputs={"date": f"03.{day:02d}.2021"}, created=1764547200.0 + day)
            store.add_feedback(trace, rating=1, correction={"date": f"{day:02d}.03.2021"})
    events = folder / "runs" / "<id>"
    events.mkdir(parents=True)
    (events / "events.jsonl").write_text(json.dumps({"type": "epoch_ended", "epoch": 0, "logs": {"reward": 0.5}}) + "\n")


async def build_names() -> dict[str, Any]:
    """The names a fragment may use, as the page around it defines them."""
    lm = promptgym.LanguageModel(model="local/qwen2.5-coder-0.5b-instruct")
    inputs = promptgym.Input(data_model=Question)
    outputs = await promptgym.Generator(data_model=Answer, language_model=lm)(inputs)
    program = promptgym.Program(inputs=inputs, outputs=outputs, name="qa")
    program.compile(reward=promptgym.rewards.ExactMatch(), optimizer=promptgym.optimizers.RandomFewShot())
    x = np.array([Question(question=f"What is the capital of {country}?") for country in CAPITALS], dtype=object)
    y = np.array([Answer(answer=city) for city in CAPITALS.values()], dtype=object)
    program.save("qa.json")
    variables = program.get_variables()  # a candidate's values: the program's own
    return {"__name__": "__main__", "promptgym": promptgym, "synalinks": promptgym, "pg": promptgym,
            "callbacks": promptgym.callbacks, "Question": Question, "Answer": Answer, "lm": lm,
            "program": program, "inputs": x[0], "x": x, "y": y, "x_train": x[:6], "y_train": y[:6],
            "x_val": x[6:9], "y_val": y[6:9], "x_test": x[9:], "y_test": y[9:],
            "candidate": SimpleNamespace(variables=variables)}


def new_namespace(loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    return loop.run_until_complete(build_names())
