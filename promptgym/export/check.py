"""``--check``: run the exported prompt through a plain OpenAI-compatible call and score it next to the program.

    report = await check_export(program, x, y, caller=http_caller("http://127.0.0.1:8080/v1"))
    report.agrees      # True when the paired difference's 95% interval holds 0
    print(report)

No promptgym Generator is involved on the export's side: the body is the exported
``openai-json`` request with the input filled in, the answer is the assistant's text parsed as
JSON. A field counts as right when it equals the label (strings compared stripped), as the
``exactmatch`` reward does.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from promptgym.export.prompts import ExportedPrompt, export_prompts
from promptgym.lm.http_client import HttpClient, HttpError, HttpStatusError
from promptgym.modules.generator import as_json
from promptgym.stats import Interval, PairedTest, confidence_interval, paired_test

Caller = Callable[[dict[str, Any]], Awaitable[str]]
"""A chat-completions body in, the assistant's content out."""


@dataclass
class CheckReport:
    program: Interval
    export: Interval
    paired: PairedTest
    program_failures: int
    export_failures: int

    @property
    def agrees(self) -> bool:
        """The exported prompt scores like the program: the interval of their difference holds 0."""
        return self.paired.low <= 0 <= self.paired.high

    def as_dict(self) -> dict[str, Any]:
        return {"program": self.program.as_dict(), "export": self.export.as_dict(), "paired": self.paired.as_dict(),
                "program_failures": self.program_failures, "export_failures": self.export_failures,
                "agrees": self.agrees}

    def __str__(self) -> str:
        return (f"program accuracy:         {self.program} ({self.program_failures} failed)\n"
                f"exported-prompt accuracy: {self.export} ({self.export_failures} failed)\n"
                f"export - program:         {self.paired}\n"
                f"{'the export agrees with the program' if self.agrees else 'the export does NOT agree with the program'}"
                " (95% interval of the paired difference " + ("holds" if self.agrees else "excludes") + " 0)")


def exact(label: dict[str, Any], answer: Any) -> float:
    if not isinstance(answer, dict):
        return 0.0
    same = all(_normal(answer.get(key)) == _normal(value) for key, value in label.items())
    return 1.0 if same else 0.0


def _normal(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def http_caller(api_base: str, api_key: str | None = None, client: HttpClient | None = None,
                timeout: float = 300.0) -> Caller:
    """POST each body to ``{api_base}/chat/completions`` and return the assistant's content."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{api_base.rstrip('/')}/chat/completions"

    async def call(body: dict[str, Any]) -> str:
        session = client or HttpClient(timeout=timeout)
        try:
            response = await session.request("POST", url, json=body, headers=headers, timeout=timeout)
        finally:
            if client is None:
                await session.close()
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"]

    return call


async def check_export(program: Any, x: list[dict[str, Any]], y: list[dict[str, Any]], caller: Caller,
                       model: str | None = None, concurrency: int = 4) -> CheckReport:
    """Score ``program`` and its exported prompt on the same labelled examples (one Generator only)."""
    exports = export_prompts(program)
    if len(exports) != 1:
        raise ValueError(f"--check scores a program with one Generator; {program.name!r} has {len(exports)} "
                         f"({', '.join(item.generator for item in exports)})")
    predictions = await program.predict(x, batch_size=concurrency, verbose=0)
    program_scores = [exact(label, as_json(prediction) if prediction is not None else None)
                      for label, prediction in zip(y, predictions)]
    answers = await _exported_answers(exports[0], x, caller, model, concurrency)
    export_scores = [exact(label, answer) for label, answer in zip(y, answers)]
    return CheckReport(program=confidence_interval(program_scores), export=confidence_interval(export_scores),
                       paired=paired_test(program_scores, export_scores),
                       program_failures=sum(prediction is None for prediction in predictions),
                       export_failures=sum(answer is None for answer in answers))


async def _exported_answers(exported: ExportedPrompt, x: list[dict[str, Any]], caller: Caller, model: str | None,
                            concurrency: int) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(inputs: dict[str, Any]) -> Any:
        async with gate:
            try:
                return json.loads(await caller(exported.request(inputs, model=model)))
            except (HttpError, HttpStatusError, asyncio.TimeoutError, ValueError, KeyError, IndexError, TypeError):
                return None  # a failed call or an answer that isn't JSON scores 0, as a failed prediction does

    return await asyncio.gather(*(one(inputs) for inputs in x))
