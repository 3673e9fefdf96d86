"""A scripted task for GEPA/MIPRO tests: the task model answers in upper case only when told to."""

from __future__ import annotations


import numpy as np

import promptgym as pg
from promptgym.core.events import Event
from promptgym.optimizers.base import Optimizer
from promptgym.testing import ScriptedLanguageModel, last_user_json
from promptgym.optimizers.kit import OptimizerContext
from promptgym.rollouts import RolloutService
from promptgym.training.callback import CallbackList
from promptgym.training.compile import CompiledState
from tests.support import Answer, Question

GOOD = "Answer with the question text written entirely in UPPER case letters."


def task_lm(proposal: str | None = GOOD, fail_proposals: bool = False, **kwargs: object) -> ScriptedLanguageModel:
    """Task answers: upper case when the instructions say UPPER, else lower case.

    Reflection/proposal/summary calls (recognised by their schema) answer with ``proposal``.
    """

    def respond(request):
        properties = (request.schema or {}).get("properties", {})
        if "new_instructions" in properties or "proposed_instruction" in properties:
            if fail_proposals:
                raise RuntimeError("proposal model down")
            key = "new_instructions" if "new_instructions" in properties else "proposed_instruction"
            return {key: proposal}
        if "summary" in properties:
            return {"summary": "Short questions; the answer is the question in upper case."}
        system = request.messages[0]["content"]
        text = last_user_json(request)["question"]
        return {"answer": text.upper() if "UPPER" in system else text.lower()}

    return ScriptedLanguageModel(respond=respond, **kwargs)


def task_requests(lm: ScriptedLanguageModel) -> int:
    """Requests that were program rollouts (not reflection/proposal/summary calls)."""
    return sum(1 for r in lm.requests if "answer" in (r.schema or {}).get("properties", {}))


def data(n: int, start: int = 0):
    texts = [f"q{i} word" for i in range(start, start + n)]
    x = np.array([Question(question=t) for t in texts], dtype=object)
    y = np.array([Answer(answer=t.upper()) for t in texts], dtype=object)
    return x, y


async def program_for(lm: ScriptedLanguageModel) -> pg.Program:
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm, instructions="Answer the question.", name="qa")(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name="qa_program")


class Events(CallbackList):
    def __init__(self) -> None:
        super().__init__([], None)
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e["event"] for e in self.events]


def context(program: pg.Program, optimizer: Optimizer, train: int = 6, val: int = 4, seed: int = 0) -> OptimizerContext:
    """An optimizer's context without the trainer, so every task call is the optimizer's."""
    x, y = data(train)
    xv, yv = data(val, start=100)
    compiled = CompiledState(pg.rewards.ExactMatch(), optimizer)
    program.training_setup = compiled
    optimizer.build(program)
    events = Events()
    rng = np.random.default_rng(seed)
    rollouts = RolloutService(program, compiled.reward, [], {"train": (x, y), "val": (xv, yv)}, emit=events.emit,
                              max_errors=100, rng=rng, minibatch_size=4)
    return OptimizerContext(rollouts, events.emit, rng)


def events(ctx: OptimizerContext) -> Events:
    """The events the optimizer emitted through ``ctx`` (made by :func:`context`)."""
    return ctx.emit.__self__  # type: ignore[attr-defined]


async def one_epoch(optimizer: Optimizer, ctx: OptimizerContext, steps: int, batch_size: int) -> None:
    """The trainer's calls for one epoch: ``steps`` steps, each on the next ``batch_size`` training indices."""
    await optimizer.on_train_begin(ctx)
    await optimizer.on_epoch_begin(ctx, 0)
    ctx.steps = steps
    for step in range(steps):
        ctx.step = step
        await optimizer.train_step(ctx, list(range(batch_size * step, batch_size * (step + 1))))
    await optimizer.on_epoch_end(ctx, 0)
    await optimizer.on_train_end(ctx)
