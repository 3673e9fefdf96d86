"""Tool-use quality on the embedded model: FunctionCallingAgent untrained and trained, DSPy ReAct untrained and
optimized, with the same calculator tool, the same model and the same items, in one run.

The task (``task.py``): arithmetic over 3-4 numbers of 3-4 digits ("What is 4821 + 3907 - 1266?"), which a 0.5B
model can't do in its head but can with a ``calculate`` tool; the answer is scored exactly. Arms:

  promptgym untrained   FunctionCallingAgent, default instructions, no demonstrations (embedded engine:
                        each step a grammar-constrained choice among the tool's arguments and the answer)
  promptgym trained     the same agent after ``fit`` with RandomFewShot (2 whole successful trajectories as
                        demonstrations) on --train items
  dspy untrained        ``dspy.ReAct`` with the same tool (``run_dspy_react.py``, in DSPy's venv, against
                        llama_cpp.server running the same gguf, behind the counting proxy)
  dspy optimized        the same after ``BootstrapFewShot(max_bootstrapped_demos=2)`` on the same train items

Writes bench/results/agents_tool_use.json (accuracy with 95% intervals, paired tests, LM calls, tool calls,
invalid tool calls) after each arm, so an interrupted run keeps what it measured.

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/agents/tool_use.py --test 100 --train 16 [--no-dspy]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

import promptgym as pg
from promptgym.stats import confidence_interval, paired_test

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from peers.dspy_arm import run_dspy_script  # noqa: E402
from task import calculate, items  # noqa: E402

RESULTS = HERE.parent / "results" / "agents_tool_use.json"
MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
MODEL = f"local/{MODEL_NAME}"


class Task(pg.DataModel):
    question: str = pg.Field(description="An arithmetic question")


class Answer(pg.DataModel):
    answer: float = pg.Field(description="The exact numerical answer")


def as_data(pairs: list[tuple[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([Task(question=q) for q, _ in pairs], dtype=object),
            np.array([Answer(answer=a) for _, a in pairs], dtype=object))


def build(max_iterations: int) -> tuple[pg.Program, pg.FunctionCallingAgent]:
    lm = pg.LanguageModel(model=MODEL, cache=False, max_tokens=160)
    agent = pg.FunctionCallingAgent(data_model=Answer, tools=[pg.Tool(calculate)], language_model=lm,
                                    max_iterations=max_iterations, return_inputs_with_trajectory=False)
    inputs = pg.Input(data_model=Task)
    return pg.Program(inputs=inputs, outputs=agent.symbolic_call(inputs), name="tool_agent"), agent


async def score(program: pg.Program, agent: pg.FunctionCallingAgent, x: np.ndarray, y: np.ndarray) -> dict:
    calls_before, counts_before = agent.language_model.usage.total().calls, dict(agent.tool_call_counts)
    started = time.perf_counter()
    evaluation = await program.evaluate(x, y, batch_size=8, verbose=0)
    interval = evaluation.interval()
    counts = {key: agent.tool_call_counts[key] - counts_before[key] for key in counts_before}
    return {"accuracy": evaluation["reward"], "interval": [interval.low, interval.high],
            "hits": list(evaluation.scores["reward"]), "tool_calls": counts["calls"],
            "invalid_tool_calls": counts["invalid"], "failed_tool_calls": counts["failed"],
            "failures": list(getattr(evaluation, "failures", ())), "seconds": round(time.perf_counter() - started, 1),
            "lm_calls": agent.language_model.usage.total().calls - calls_before}


def run_dspy(args: argparse.Namespace) -> dict:
    """DSPy's arms against llama_cpp.server (same gguf, 2 threads) behind the counting proxy; stops both."""
    native = args.dspy_agent == "native"  # llama_cpp.server takes OpenAI `tools` only in a function-calling format
    return run_dspy_script(HERE / "run_dspy_react.py",
                           ["--test", str(args.test), "--train", str(args.train), "--max-iters", str(args.max_iterations),
                            "--seed", str(args.seed), "--agent", args.dspy_agent,
                            "--show", str(getattr(args, "dspy_show", 0))],
                           timeout=args.dspy_timeout, log_name="agents",
                           server_args=["--chat_format", "chatml-function-calling"] if native else [],
                           stderr_path="/tmp/promptgym-bench-dspy-agents.err")  # trajectories with --show, warnings


def kept_promptgym_arms(report: dict) -> dict:
    """The promptgym arms of an earlier run on the same items, so DSPy's arms can be added to them.

    With fewer --test items than that run, its arms are cut to the first ones (``items(n)`` is a prefix of
    ``items(m)`` for n < m); their call counts and seconds stay those of the whole earlier run.
    """
    earlier = json.loads(RESULTS.read_text())
    same = ("train_items", "max_iterations")
    if any(earlier.get(key) != report[key] for key in same) or earlier["test_items"] < report["test_items"]:
        raise SystemExit(f"{RESULTS} was measured with other settings: {[earlier.get(key) for key in same]}, "
                         f"{earlier['test_items']} test items")
    kept = {"promptgym_training": earlier["promptgym_training"], "promptgym_command": earlier["command"]}
    for arm in ("promptgym_untrained", "promptgym_trained"):
        row = dict(earlier[arm])
        if earlier["test_items"] > report["test_items"]:
            row["hits"] = row["hits"][: report["test_items"]]
            interval = confidence_interval(row["hits"])
            row.update(accuracy=sum(row["hits"]) / len(row["hits"]), interval=[interval.low, interval.high],
                       counts_measured_on=earlier["test_items"])
        kept[arm] = row
    return kept


async def run_promptgym(report: dict, program: pg.Program, agent: pg.FunctionCallingAgent,
                        data: tuple[np.ndarray, ...], save) -> None:
    x_train, y_train, x_test, y_test = data
    lm = agent.language_model
    report["promptgym_untrained"] = await score(program, agent, x_test, y_test)
    save()
    print("promptgym untrained", report["promptgym_untrained"]["accuracy"], flush=True)
    started, calls0 = time.perf_counter(), lm.usage.total().calls
    await program.fit(x_train, y_train, epochs=1, batch_size=8, validation_split=0.25, verbose=0)
    report["promptgym_training"] = {"seconds": round(time.perf_counter() - started, 1),
                                    "lm_calls": lm.usage.total().calls - calls0,
                                    "demonstrations": len(agent.prompt_variable.get("examples", []))}
    save()
    report["promptgym_trained"] = await score(program, agent, x_test, y_test)
    save()
    print("promptgym trained", report["promptgym_trained"]["accuracy"], flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--train", type=int, default=16)
    parser.add_argument("--max-iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-dspy", action="store_true", help="leave DSPy's arms out")
    parser.add_argument("--dspy-timeout", type=int, default=5400)
    parser.add_argument("--dspy-agent", choices=("react", "native"), default="react",
                        help="DSPy's ReAct (text tool calls) or its native tool calling (OpenAI tools)")
    parser.add_argument("--dspy-show", type=int, default=0,
                        help="write this many DSPy calls to /tmp/promptgym-bench-dspy-agents.err, to read them")
    parser.add_argument("--keep-promptgym", action="store_true",
                        help="reuse the promptgym arms already in the results file (same items) and run DSPy's")
    args = parser.parse_args()
    x_train, y_train = as_data(items(args.train, seed=args.seed + 1))
    x_test, y_test = as_data(items(args.test, seed=args.seed))
    program, agent = build(args.max_iterations)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=pg.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=2, seed=args.seed))
    report: dict = {"model": MODEL, "test_items": args.test, "train_items": args.train,
                    "max_iterations": args.max_iterations, "command": " ".join(sys.argv)}

    def save() -> None:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=1))

    if args.keep_promptgym:
        report.update(kept_promptgym_arms(report))
    else:
        await run_promptgym(report, program, agent, (x_train, y_train, x_test, y_test), save)
    if not args.no_dspy:
        dspy_row = run_dspy(args)
        report["dspy"] = {key: value for key, value in dspy_row.items() if key not in ("untrained", "optimized")}
        for arm in ("untrained", "optimized"):
            if arm in dspy_row:
                row = dspy_row[arm]
                interval = confidence_interval(row["hits"])
                report[f"dspy_{arm}"] = {**row, "interval": [interval.low, interval.high]}
        save()
    arms = [name for name in ("promptgym_untrained", "promptgym_trained", "dspy_untrained", "dspy_optimized")
            if name in report]
    report["paired"] = {f"{b} vs {a}": str(paired_test(report[a]["hits"], report[b]["hits"]))
                        for a, b in [("promptgym_untrained", "promptgym_trained"),
                                     ("dspy_untrained", "dspy_optimized"),
                                     ("dspy_optimized", "promptgym_trained"),
                                     ("dspy_untrained", "promptgym_untrained")] if a in report and b in report}
    save()
    for arm in arms:
        row = report[arm]
        print(f"{arm:20} acc {row['accuracy']:.3f} [{row['interval'][0]:.3f}, {row['interval'][1]:.3f}] "
              f"LM calls {row['lm_calls']} invalid tool calls {row.get('invalid_tool_calls', '-')} {row['seconds']} s")
    for name, line in report["paired"].items():
        print(f"{name}: {line}")


if __name__ == "__main__":
    asyncio.run(main())
