"""Is fine-tuning useful here? The dates task (DD.MM.YYYY) on a small embedded model, exact match on held-out
test sentences for: the base model zero-shot, the prompt-optimised program (RandomFewShot demonstrations),
the model fine-tuned on the labelled training rows (zero-shot, same program without demonstrations), and
the model fine-tuned on the optimised program's own successful answers (distillation: export_sft_data).

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/sft/usefulness.py --base local/smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data import date_program, date_rows, load_dates, write_jsonl  # noqa: E402

import promptgym as pg  # noqa: E402
from promptgym.finetune import SFTSettings, sft  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"


async def score(model: str, x, y, examples=None) -> dict:
    program = date_program(model, examples=examples)
    started = time.perf_counter()
    logs = await program.evaluate(x, y, batch_size=16, verbose=0)
    return {"exact_match": round(logs["reward"], 4), "correct": round(logs["reward"] * len(x)), "n": len(x),
            "eval_s": round(time.perf_counter() - started, 1)}


def fine_tune(base: str, rows_file: Path, out: Path, name: str, epochs: int) -> dict:
    settings = SFTSettings(base_model=base, train_file=str(rows_file), n_epochs=epochs, batch_size=4,
                           learning_rate=2e-4, validation_split=0.1, save_steps=1000, summary_samples=2,
                           model_name=f"{name}-{int(time.time())}")
    started = time.perf_counter()
    result = sft(settings, out, name=name)
    return {"model_id": result.model_id, "train_s": round(time.perf_counter() - started, 1), "steps": result.steps,
            "initial_eval_loss": result.initial_eval_loss, "final_eval_loss": result.final_eval_loss,
            "peak_rss_mb": result.peak_rss_mb, "run": str(out)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="local/smollm2-135m-instruct")
    parser.add_argument("--train", type=int, default=160)
    parser.add_argument("--test", type=int, default=60)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    (x_train, y_train), (x_test, y_test) = load_dates(n_train=args.train, n_test=args.test, seed=0)
    scratch = Path(tempfile.mkdtemp(prefix="sft-usefulness-"))
    report: dict = {"base": args.base, "task": "dates, DD.MM.YYYY", "train": args.train, "test": args.test}

    report["base_zero_shot"] = await score(args.base, x_test, y_test)
    print("base zero-shot", report["base_zero_shot"], flush=True)

    started = time.perf_counter()
    optimised = date_program(args.base)
    optimised.compile(reward=pg.rewards.ExactMatch(in_mask=["date"]),
                      optimizer=pg.optimizers.RandomFewShot(nb_min_examples=1, nb_max_examples=3))
    await optimised.fit(x=x_train[:40], y=y_train[:40], validation_split=0.25, epochs=2, batch_size=10,
                        minibatch_size=8, seed=0, verbose=0)
    demos = optimised.get_module("date_reader").examples
    fit_s = time.perf_counter() - started
    report["prompt_optimised"] = {**await score(args.base, x_test, y_test, examples=demos),
                                  "train_s": round(fit_s, 1), "demonstrations": len(demos)}
    print("prompt-optimised", report["prompt_optimised"], flush=True)

    labelled = write_jsonl(scratch / "labelled.jsonl", date_rows(x_train, y_train))
    report["tuned_on_labels"] = fine_tune(args.base, labelled, scratch / "labels", "dates-labels", args.epochs)
    report["tuned_on_labels"].update(await score(report["tuned_on_labels"]["model_id"], x_test, y_test))
    print("tuned on labels", report["tuned_on_labels"], flush=True)

    started = time.perf_counter()
    exported = await optimised.export_sft_data(x_train, y_train, str(scratch / "distilled.jsonl"), min_reward=1.0)
    export_s = time.perf_counter() - started
    report["distilled"] = {"rows": exported.rows, "teacher_train_exact_match": round(exported.mean_reward, 4),
                           "export_s": round(export_s, 1)}
    if exported.rows >= 8:
        report["distilled"].update(fine_tune(args.base, scratch / "distilled.jsonl", scratch / "distil",
                                             "dates-distilled", args.epochs))
        report["distilled"].update(await score(report["distilled"]["model_id"], x_test, y_test))
    print("distilled", report["distilled"], flush=True)

    out = Path(args.json) if args.json else RESULTS / f"sft_usefulness_{args.base.split('/')[-1]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())
