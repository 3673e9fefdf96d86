"""synalinks 0.10.14 on a training-benchmark task, through the counting proxy (run in its venv).

    ~/.cache/promptgym-bench/venvs/synalinks/bin/python bench/training/run_synalinks.py \
        --proxy-url http://127.0.0.1:8932 --task dates_dmy --settings '{"epochs": 1, "batch_size": 10}'

``LanguageModel(model="openai/<alias>", api_base=<proxy>/v1, caching=False, cache_dir=None,
temperature=0, max_tokens=...)``, one Generator, ExactMatch reward, RandomFewShot(1..3),
fit on train with validation_data=val. Prints one JSON line (see common.row).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before synalinks imports litellm
os.environ.setdefault("OPENAI_API_KEY", "local")  # litellm's openai/ route wants a key

import asyncio
import random
from importlib.metadata import version

import numpy as np
import synalinks
from common import (Wire, emit, fit_settings, load_task, log, optimizer_lm, parse_args, recorded_optimizer_lm, row,
                    test_score, timed)

FIT_DEFAULTS = {"epochs": 1, "batch_size": 10, "minibatch_size": 10, "validation_batch_size": 32,
                "validation_freq": 1, "shuffle": False}


class Text(synalinks.DataModel):
    text: str = synalinks.Field(description="A sentence that mentions a date")


class Date(synalinks.DataModel):
    date: str = synalinks.Field(description="The date mentioned in the text")


def make_optimizer(name: str, settings: dict, lm: object) -> tuple[object, dict]:
    opt = dict(settings.get("optimizer", {}))
    if name == "randomfewshot":
        opt = {"nb_min_examples": 1, "nb_max_examples": 3, **opt}
        return synalinks.optimizers.RandomFewShot(**opt), opt
    if name == "omega":
        opt = {"algorithm": "ga", **opt}  # "ga": no embedding model needed (llama_cpp.server serves one model)
        return synalinks.optimizers.OMEGA(language_model=lm, **opt), opt
    raise SystemExit(f"synalinks has no {name}")


async def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    random.seed(0)
    np.random.seed(0)
    synalinks.utils.set_random_seed(0) if hasattr(synalinks.utils, "set_random_seed") else None
    task = load_task(args.task)

    def arrays(split: str) -> tuple[np.ndarray, np.ndarray]:
        xs = np.array([Text(text=r["text"]) for r in task[split]], dtype=object)
        ys = np.array([Date(date=r["date"]) for r in task[split]], dtype=object)
        return xs, ys

    (x_train, y_train), (x_val, y_val), (x_test, _) = arrays("train"), arrays("val"), arrays("test")
    lm = synalinks.LanguageModel(model=f"openai/{args.model}", api_base=f"{args.proxy_url}/v1", caching=False,
                                 cache_dir=None, temperature=0.0, max_tokens=args.max_tokens)
    inputs = synalinks.Input(data_model=Text)
    outputs = await synalinks.Generator(data_model=Date, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="bench")
    own = optimizer_lm(args)
    opt_lm = lm if own is None else synalinks.LanguageModel(
        model=f"openai/{own['optimizer_model']}", api_base=f"{args.proxy_url}/v1", caching=False, cache_dir=None,
        temperature=0.0, max_tokens=own["optimizer_max_tokens"])
    optimizer, opt_settings = make_optimizer(args.optimizer, args.settings, opt_lm)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["date"]), optimizer=optimizer)
    fit = fit_settings(args, FIT_DEFAULTS)
    wire = Wire(args.proxy_url)

    async def run_predict() -> list:
        preds = await program.predict(x_test, batch_size=args.concurrency, verbose=0)
        out = []
        for p in preds:
            try:
                out.append(None if p is None else p.get("date"))
            except Exception:  # noqa: BLE001
                out.append(None)
        return out

    log(f"[synalinks] {args.task}: untrained eval on {len(x_test)}")
    untrained = test_score(await timed(wire, "untrained_eval", run_predict), task)
    log(f"[synalinks] fit {fit} optimizer {opt_settings}")
    history = await timed(wire, "train", lambda: program.fit(x=x_train, y=y_train, validation_data=(x_val, y_val),
                                                             verbose=0, **fit))
    trained = test_score(await timed(wire, "trained_eval", run_predict), task)
    demos = []
    try:
        state = program.trainable_variables[0].get_json()
        for e in state.get("examples") or []:
            demos.append({"input": (e.get("inputs") or {}).get("text"), "output": (e.get("outputs") or {}).get("date"),
                          "reward": e.get("reward")})
    except Exception as exc:  # noqa: BLE001
        demos = [f"could not read examples: {exc}"]
    hist = {k: [float(x) for x in v] for k, v in (history.history or {}).items()}
    emit(row("synalinks", version("synalinks"), args, task, wire, untrained, trained,
             {"fit": fit, "optimizer": {"class": type(optimizer).__name__, **opt_settings},
              **recorded_optimizer_lm(args)}, demos, history=hist))


if __name__ == "__main__":
    asyncio.run(main())
