"""Exported-prompt accuracy next to in-program accuracy, on bundled tasks with the embedded model.

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/serving/export_accuracy.py --items 100

For each task a "trained" one-Generator program (its instructions and 3 fixed demonstrations from
the train split, what RandomFewShot leaves) is exported, then the same ``--check`` as
``promptgym export-prompt`` runs: the program predicts the first N test items, and the exported
``openai-json`` body, with each input filled in, is sent as a plain chat-completions request to
the embedded model served in-process (no Generator). Response caches are off on both sides.
Writes bench/results/export_accuracy.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import promptgym as pg  # noqa: E402
from promptgym.cli.commands.export_prompt import run_check  # noqa: E402
from promptgym.datasets import commonsense_qa, dates  # noqa: E402
from promptgym.export import export_prompts  # noqa: E402
from promptgym.modules.generator import as_json  # noqa: E402

TASKS = {"dates": dates, "commonsense_qa": commonsense_qa}
INSTRUCTIONS = {"dates": "Write the date the text mentions as YYYY-MM-DD.",
                "commonsense_qa": "Pick the label of the choice that answers the question best."}


def trained_program(name: str, module, model: str, x_train, y_train) -> pg.Program:
    lm = pg.LanguageModel(model=model, cache=False)
    inputs = pg.Input(data_model=module.get_input_data_model())
    generator = pg.Generator(data_model=module.get_output_data_model(), language_model=lm,
                             instructions=INSTRUCTIONS[name],
                             examples=[(x_train[i], y_train[i]) for i in range(3)])
    return pg.Program(inputs=inputs, outputs=generator.symbolic_call(inputs), name=name)


async def one_task(name: str, items: int, model: str) -> dict:
    module = TASKS[name]
    (x_train, y_train), (x_test, y_test) = module.load_data()
    program = trained_program(name, module, model, x_train, y_train)
    [exported] = export_prompts(program)
    x = [as_json(item) for item in x_test[:items]]
    y = [as_json(item) for item in y_test[:items]]
    started = time.time()
    report = await run_check(program, exported, x, y, api_base=None, api_key_env=None)
    print(f"{name}: {report}", flush=True)
    return {"task": name, "items": len(x), "seconds": round(time.time() - started, 1), **report.as_dict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--tasks", default="dates,commonsense_qa")
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "export_accuracy.json"))
    args = parser.parse_args()
    rows = []
    for name in args.tasks.split(","):  # written after each task, so a long run keeps what it finished
        rows.append(asyncio.run(one_task(name, args.items, args.model)))
        Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "model": args.model,
                                              "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
