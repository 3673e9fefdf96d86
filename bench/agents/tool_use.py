"""Tool-use quality on the embedded model: an untrained FunctionCallingAgent vs the same agent trained.

The task: arithmetic over 3-4 numbers of 3-4 digits ("What is 4821 + 3907 - 1266?"),
which a 0.5B model can't do in its head but can with a ``calculate`` tool. The
answer is scored exactly (ExactMatch on ``answer``). Arms, one run, the same
test items (default 100):

  untrained   the agent with its default instructions, no demonstrations
  trained     the same agent after ``fit`` with RandomFewShot (whole successful
              trajectories become demonstrations), on --train items

Prints and writes bench/results/agents_tool_use.json: accuracy with its 95%
interval per arm, the paired test trained vs untrained, LM calls, tool calls and
invalid tool calls (the constrained decoding must make them 0).

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/agents/tool_use.py --test 100 --train 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

import numpy as np

import promptgym as pg
from promptgym.stats import paired_test

RESULTS = Path(__file__).resolve().parent.parent / "results" / "agents_tool_use.json"
MODEL = "local/qwen2.5-coder-0.5b-instruct"


class Task(pg.DataModel):
    question: str = pg.Field(description="An arithmetic question")


class Answer(pg.DataModel):
    answer: float = pg.Field(description="The exact numerical answer")


async def calculate(expression: str) -> dict:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: The expression, with numbers and + - * ( ), like '12 * (3 + 4)'.
    """
    if not expression or not all(c in "0123456789+-*(). " for c in expression):
        return {"error": "use only numbers, + - * ( ) and spaces"}
    try:
        return {"result": eval(expression, {"__builtins__": None}, {})}  # noqa: S307 - digits and operators only
    except SyntaxError as error:
        return {"error": f"not an expression: {error.msg}"}


def items(n: int, seed: int) -> tuple[list[Task], list[Answer]]:
    rng = random.Random(seed)
    xs, ys = [], []
    for _ in range(n):
        count = rng.choice([3, 4])
        numbers = [rng.randint(100, 9999) for _ in range(count)]
        ops = [rng.choice(["+", "-", "+"]) for _ in range(count - 1)]
        if rng.random() < 0.3:
            ops[0] = "*"
            numbers[1] = rng.randint(2, 99)
        expression = str(numbers[0]) + "".join(f" {op} {num}" for op, num in zip(ops, numbers[1:]))
        xs.append(Task(question=f"What is {expression}?"))
        ys.append(Answer(answer=float(eval(expression))))  # noqa: S307 - generated digits and operators
    return xs, ys


def build(max_iterations: int) -> tuple[pg.Program, pg.FunctionCallingAgent]:
    lm = pg.LanguageModel(model=MODEL, cache=False, max_tokens=160)
    agent = pg.FunctionCallingAgent(data_model=Answer, tools=[pg.Tool(calculate)], language_model=lm,
                                    max_iterations=max_iterations, return_inputs_with_trajectory=False)
    inputs = pg.Input(data_model=Task)
    return pg.Program(inputs=inputs, outputs=agent.symbolic_call(inputs), name="tool_agent"), agent


async def score(program: pg.Program, agent: pg.FunctionCallingAgent, x: list, y: list) -> dict:
    calls_before, counts_before = agent.language_model.usage.total().calls, dict(agent.tool_call_counts)
    started = time.perf_counter()
    evaluation = await program.evaluate(np.array(x, dtype=object), np.array(y, dtype=object), batch_size=8, verbose=0)
    interval = evaluation.interval()
    counts = {key: agent.tool_call_counts[key] - counts_before[key] for key in counts_before}
    return {"accuracy": evaluation["reward"], "interval": [interval.low, interval.high], "hits": list(evaluation.scores["reward"]),
            "tool_calls": counts["calls"], "invalid_tool_calls": counts["invalid"], "failed_tool_calls": counts["failed"],
            "failures": list(getattr(evaluation, "failures", ())), "seconds": round(time.perf_counter() - started, 1),
            "lm_calls": agent.language_model.usage.total().calls - calls_before}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--train", type=int, default=16)
    parser.add_argument("--max-iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    x_train, y_train = items(args.train, seed=args.seed + 1)
    x_test, y_test = items(args.test, seed=args.seed)
    program, agent = build(args.max_iterations)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=pg.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=2, seed=args.seed))
    report: dict = {"model": MODEL, "test_items": args.test, "train_items": args.train,
                    "max_iterations": args.max_iterations}

    def save() -> None:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=1))

    lm = agent.language_model
    report["untrained"] = await score(program, agent, x_test, y_test)
    save()
    print("untrained", report["untrained"]["accuracy"], report["untrained"]["interval"], flush=True)
    started, calls0 = time.perf_counter(), lm.usage.total().calls
    history = await program.fit(np.array(x_train, dtype=object), np.array(y_train, dtype=object), epochs=1,
                                batch_size=8, validation_split=0.25, verbose=0)
    report["training"] = {"seconds": round(time.perf_counter() - started, 1), "lm_calls": lm.usage.total().calls - calls0,
                          "history": {key: [float(v) for v in values] for key, values in history.history.items()
                                      if isinstance(values, list) and all(isinstance(v, (int, float)) for v in values)},
                          "demonstrations": len(agent.prompt_variable.get("examples", []))}
    save()
    report["trained"] = await score(program, agent, x_test, y_test)
    report["trained_vs_untrained"] = str(paired_test(report["untrained"]["hits"], report["trained"]["hits"]))
    save()
    print(json.dumps({key: value for key, value in report.items() if key not in ("untrained", "trained")}, indent=1))
    for arm in ("untrained", "trained"):
        row = report[arm]
        print(f"{arm:10} acc {row['accuracy']:.3f} [{row['interval'][0]:.3f}, {row['interval'][1]:.3f}] "
              f"LM calls {row['lm_calls']} tool calls {row['tool_calls']} invalid {row['invalid_tool_calls']} {row['seconds']} s")


if __name__ == "__main__":
    asyncio.run(main())
