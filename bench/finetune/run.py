"""Prompts, weights, and both: untrained vs prompt-only vs FineTune (labels, traces) vs Sequence, one table.

Every row trains a fresh program (one Generator, the default embedded model) on the same seeded
split, then scores it on the same test items; the table gives the test accuracy with its 95%
interval and the paired test against the untrained program, the training LM calls (model calls
that were not cache hits, inference and validation together), the SFT steps and the wall time.

    # the four rows of issue 42 on the four tasks (each FineTune fills a 20-minute budget; about 5 hours here):
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/finetune/run.py --rows untrained,prompt,ft_labels,sequence \
        --out bench/results/finetune_auto.jsonl
    # what each row would train, without a model call (the arms' FineTune settings):
    .venv/bin/python bench/finetune/run.py --dry-run
    # one task, some rows, fewer training rows:
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/finetune/run.py --tasks mmlu_topics \\
        --rows untrained,ft_labels --n-train 120

Each finished row is appended to ``--out`` (JSON lines) at once, so a long run that is stopped keeps
what it measured, and ``--resume`` goes on from there (the untrained row's stored answers are the paired
baseline); ``--markdown`` prints the table of a results file (the latest result of each row). Each row's
trained program is saved under ``--work``; ``call_time.py`` times them side by side on a quiet machine,
since a run of hours shares the machine with other work now and then.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.optimizers.finetune import FineTune
from promptgym.lm.local_models import DEFAULT_LOCAL_MODEL
from promptgym.lm.usage import LEDGER
from promptgym.stats import confidence_interval, paired_test

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"

TASKS: dict[str, dict[str, Any]] = {
    # the untrained 0.5B model is at chance on mmlu_topics and commonsense_qa, weak on dates_dmy, middling on boolq
    "mmlu_topics": {"module": "mmlu_topics", "kwargs": {}},
    "dates_dmy": {"module": "dates", "kwargs": {"output_format": "%d.%m.%Y"}, "generated": True},
    "boolq": {"module": "boolq", "kwargs": {}},
    # five choices: no majority answer to collapse onto (boolq's test split is 68% "yes")
    "commonsense_qa": {"module": "commonsense_qa", "kwargs": {}},
}
ROWS = ("untrained", "prompt", "ft_labels", "ft_traces", "sequence", "sequence_traces", "sequence_both")


def split(task: str, n_train: int, n_val: int, n_test: int, seed: int) -> tuple[Any, ...]:
    """(x_train, y_train), (x_val, y_val), (x_test, y_test): the same for every row of a task."""
    spec = TASKS[task]
    module = getattr(pg.datasets, spec["module"])
    if spec.get("generated"):
        (x, y), (x_test, y_test) = module.load_data(n_train=n_train + n_val, n_test=n_test, seed=seed, **spec["kwargs"])
    else:
        (x, y), (x_test, y_test) = module.load_data(n_train=n_train + n_val, seed=seed, **spec["kwargs"])
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:]), (x_test[:n_test], y_test[:n_test])


def epochs(value: str) -> int | str:
    """``--sft-epochs``: a whole number, or "auto" (fill ``--max-train-seconds``)."""
    return value if value == "auto" else int(value)


def optimizer_for(row: str, folder: Path, args: argparse.Namespace) -> Any:
    prompt = lambda: pg.optimizers.KNNFewShot(k=3)  # noqa: E731 - the prompt-only optimizer, three times below
    tune = dict(n_epochs=args.sft_epochs, batch_size=4, learning_rate=args.learning_rate, output_dir=str(folder / row),
                max_train_seconds=args.max_train_seconds, seed=0)
    return {"prompt": prompt,
            "ft_labels": lambda: FineTune(source="labels", **tune),
            "ft_traces": lambda: FineTune(source="traces", min_reward=1.0, **tune),
            "sequence": lambda: pg.optimizers.Sequence([prompt(), FineTune(source="labels", **tune), prompt()]),
            # BetterTogether's weights stage: the prompt-optimised program's own runs that earn the reward
            "sequence_traces": lambda: pg.optimizers.Sequence([prompt(), FineTune(source="traces", **tune), prompt()]),
            "sequence_both": lambda: pg.optimizers.Sequence([prompt(), FineTune(source="both", **tune), prompt()]),
            }[row]()


async def build(task: str, x: Any, y: Any) -> pg.Program:
    module = getattr(pg.datasets, TASKS[task]["module"])
    inputs = pg.Input(data_model=module.get_input_data_model())
    outputs = await pg.Generator(data_model=module.get_output_data_model(),
                                 language_model=pg.LanguageModel(model=f"local/{DEFAULT_LOCAL_MODEL}"))(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name=f"{task}_bench")


def calls_since(snapshot: dict[str, Any]) -> int:
    return sum(usage.calls - usage.cache_hits for usage in LEDGER.since(snapshot).values())


def sft_steps(optimizer: Any) -> int:
    stages = getattr(optimizer, "stages", None) or [optimizer]
    return sum(int(getattr(stage, "sft_steps", 0)) for stage in stages)


async def run_row(task: str, row: str, data: tuple[Any, ...], args: argparse.Namespace,
                  baseline: list[float] | None) -> dict[str, Any]:
    (x, y), (x_val, y_val), (x_test, y_test) = data
    program = await build(task, x, y)
    started, usage = time.time(), LEDGER.snapshot()
    optimizer = None
    stages = []
    if row != "untrained":
        optimizer = optimizer_for(row, Path(args.work) / task, args)
        program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
        history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=len(x), verbose=0)
        stages = [{"stage": c.get("stage"), "accepted": c["accepted"], "val": c["candidate_score"],
                   "start": c["incumbent_score"], **({"training": c["training"], "verdict": c["verdict"]}
                                                      if "training" in c else {})} for c in history.comparisons]
    else:
        program.compile(reward=pg.rewards.ExactMatch())
    training_calls, train_seconds = calls_since(usage), time.time() - started
    program.save(str(saved_program(args, task, row)))  # for call_time.py, which times the rows side by side
    tested, usage = time.time(), LEDGER.snapshot()
    evaluation = await program.evaluate(x_test, y_test, batch_size=8, verbose=0)
    test_seconds, test_usage = time.time() - tested, LEDGER.since(usage).values()
    test_calls = sum(u.calls for u in test_usage)
    test_tokens = sum(u.prompt_tokens + u.completion_tokens for u in test_usage)
    hits = list(evaluation.scores[next(iter(evaluation.scores))])
    interval = confidence_interval(hits)
    result = {"task": task, "row": row, "n_train": len(x), "n_val": len(x_val), "n_test": len(x_test),
              "sft": {"epochs": args.sft_epochs, "learning_rate": args.learning_rate,
                      "max_train_seconds": args.max_train_seconds} if row.startswith(("ft_", "seq")) else None,
              "accuracy": interval.as_dict(), "training_lm_calls": training_calls,
              "sft_steps": sft_steps(optimizer) if optimizer is not None else 0,
              "train_seconds": round(train_seconds, 1), "wall_seconds": round(time.time() - started, 1),
              # per test item, as a user pays on every call (a cache hit in the run would make these ~0: run cold)
              "seconds_per_test_call": round(test_seconds / max(len(x_test), 1), 3),
              "tokens_per_test_call": round(test_tokens / max(test_calls, 1), 1),
              "test_cache_hits": sum(u.cache_hits for u in test_usage),
              "models": sorted({getattr(m.language_model, "model", "?") for m in program.modules
                                if hasattr(m, "language_model")}),
              "comparisons": stages, "hits": hits}
    if baseline is not None and row != "untrained":
        result["vs_untrained"] = paired_test(baseline, hits).as_dict()
    return result


def saved_program(args: argparse.Namespace, task: str, row: str) -> Path:
    """Where a row's trained program is saved: ``<--work>/<task>/<row>.program.json``."""
    folder = Path(args.work) / task
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{row}.program.json"


def same_settings(result: dict[str, Any], args: argparse.Namespace) -> bool:
    """Whether a stored result was measured with this run's split and SFT settings (so --resume may keep it)."""
    sft = result.get("sft")
    return (result.get("n_val"), result.get("n_test")) == (args.n_val, args.n_test) and (
        sft is None or (sft["epochs"], sft["learning_rate"], sft["max_train_seconds"])
        == (args.sft_epochs, args.learning_rate, args.max_train_seconds))


def latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (task, row, n_train): the last one measured (a rerun replaces the earlier result)."""
    kept = {(r["task"], r["row"], r["n_train"]): r for r in rows}
    return sorted(kept.values(), key=lambda r: (list(TASKS).index(r["task"]) if r["task"] in TASKS else len(TASKS),
                                                ROWS.index(r["row"]) if r["row"] in ROWS else len(ROWS)))


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| task | row | test accuracy [95% CI] | vs untrained (paired) | training LM calls | SFT steps | "
             "wall s | s / test call | tokens / test call |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['task']} (n_train={r['n_train']}) | {r['row']} | did not run: {r['error']} | | | | | | |")
            continue
        a = r["accuracy"]
        versus = r.get("vs_untrained")
        paired = (f"{versus['difference']:+.3f} [{versus['low']:+.3f}, {versus['high']:+.3f}], "
                  f"p={versus['p_value']:.3g} ({versus['wins']}/{versus['losses']})") if versus else ""
        lines.append(f"| {r['task']} (n_train={r['n_train']}) | {r['row']} | {a['mean']:.3f} [{a['low']:.3f}, "
                     f"{a['high']:.3f}] (n={a['n']}) | {paired} | {r['training_lm_calls']} | {r['sft_steps']} | "
                     f"{r['wall_seconds']:.0f} | {r.get('seconds_per_test_call', '')} | "
                     f"{r.get('tokens_per_test_call', '')} |")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--n-train", type=int, default=360)
    parser.add_argument("--n-val", type=int, default=40)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--sft-epochs", type=epochs, default="auto",
                        help='"auto" (default: fill --max-train-seconds, early stop, best checkpoint) or a number')
    parser.add_argument("--max-train-seconds", type=float, default=1200)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default="/tmp/promptgym-bench-finetune", help="SFT run folders")
    parser.add_argument("--out", default=str(RESULTS / "finetune.jsonl"))
    parser.add_argument("--markdown", help="print the table of this results file and exit")
    parser.add_argument("--dry-run", action="store_true", help="print each row's optimizer settings and exit")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows --out already holds for these settings (a run stopped, or split over days)")
    args = parser.parse_args()
    if args.dry_run:
        for row in args.rows.split(","):
            optimizer = None if row == "untrained" else optimizer_for(row, Path(args.work) / "dry-run", args)
            stages = getattr(optimizer, "stages", None) or ([optimizer] if optimizer is not None else [])
            print(row + ": " + (" -> ".join(
                type(stage).__name__ + (f"(source={stage.source!r}, n_epochs={stage.n_epochs!r}, max_train_seconds="
                                        f"{stage.max_train_seconds:g})" if isinstance(stage, FineTune) else "")
                for stage in stages) or "no optimizer"))
        return
    if args.markdown:
        print(markdown(latest([json.loads(line) for line in Path(args.markdown).read_text().splitlines() if line.strip()])))
        return
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["task"], r["row"]): r for r in (json.loads(line) for line in out.read_text().splitlines() if line.strip())
            if r.get("n_train") == args.n_train and "error" not in r and same_settings(r, args)} \
        if args.resume and out.exists() else {}
    for task in args.tasks.split(","):
        data = split(task, args.n_train, args.n_val, args.n_test, args.seed)
        baseline = None
        for row in args.rows.split(","):
            if (task, row) in done:
                print(f"{task} / {row}: kept from {out} (--resume)", file=sys.stderr, flush=True)
                baseline = done[(task, row)]["hits"] if row == "untrained" else baseline
                continue
            print(f"[{time.strftime('%H:%M:%S')}] {task} / {row} ...", file=sys.stderr, flush=True)
            try:
                result = await run_row(task, row, data, args, baseline)
            except Exception as error:  # noqa: BLE001 - one row's refusal (e.g. no run earns min_reward) is a result
                result = {"task": task, "row": row, "n_train": len(data[0][0]), "error": f"{type(error).__name__}: {error}"}
            if row == "untrained":
                baseline = result.get("hits")  # None if the untrained row failed: no paired test then
            with out.open("a") as handle:
                handle.write(json.dumps(result) + "\n")
            print(markdown([result]).splitlines()[-1], file=sys.stderr, flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    asyncio.run(main())
