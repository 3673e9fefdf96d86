"""DSPy 3.4.1 ``ReAct`` with the same calculator tool and model, untrained and optimized (run in its venv).

    ~/.cache/promptgym-bench/venvs/dspy/bin/python bench/agents/run_dspy_react.py --proxy-url http://127.0.0.1:8932 \
        --test 100 --train 16

``dspy.ReAct("question -> answer: float", tools=[calculate], max_iters=...)`` on the counting proxy in front
of llama_cpp.server (the same Qwen2.5-Coder-0.5B gguf), ``JSONAdapter``, temperature 0, no cache. Optimized:
``BootstrapFewShot(max_bootstrapped_demos=2, max_labeled_demos=0)`` on the train items (whole successful
ReAct trajectories become demonstrations, as promptgym's RandomFewShot does). Prints one JSON line.

``--agent native``: DSPy's native tool calling instead of ReAct's text format (``dspy.ToolCalls`` out
of a ``list[dspy.Tool]`` input, the ChatAdapter sending OpenAI ``tools``; the server must run with
``--chat_format chatml-function-calling``), then one call that answers from the tool's result: the
same two calls per question as ReAct with ``max_iters=2``. ``--show N`` prints N trajectories to
stderr, to read what the model wrote.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "peers"))

import dspy  # noqa: E402
from dspy_local import local_lm  # noqa: E402
from task import calculate, correct, items  # noqa: E402


def calculator(expression: str) -> dict:
    """Evaluate an arithmetic expression exactly, with numbers and + - * ( ), like '12 * (3 + 4)'."""
    return asyncio.run(calculate(expression))


class CallTools(dspy.Signature):
    """Call the calculator with the arithmetic expression the question asks about."""

    question: str = dspy.InputField()
    tools: list[dspy.Tool] = dspy.InputField()
    tool_calls: dspy.ToolCalls = dspy.OutputField()


class AnswerFromResult(dspy.Signature):
    """Answer the question with the number the calculator returned."""

    question: str = dspy.InputField()
    tool_results: str = dspy.InputField(desc="what the calculator returned, as JSON")
    answer: float = dspy.OutputField()


class NativeToolAgent(dspy.Module):
    """One native tool-calling step, the tools run, one answering step."""

    def __init__(self) -> None:
        super().__init__()
        self.tool = dspy.Tool(calculator, name="calculate")
        self.call = dspy.Predict(CallTools)
        self.answer = dspy.Predict(AnswerFromResult)

    def forward(self, question: str) -> dspy.Prediction:
        # tool_choice names the tool: with "auto" the 0.5B model answers in text and never calls it
        calls = self.call(question=question, tools=[self.tool],
                          config={"tool_choice": {"type": "function", "function": {"name": "calculate"}}}).tool_calls
        results = []
        for call in (calls.tool_calls if calls else []):
            try:
                results.append(call.execute(functions=[self.tool]))
            except Exception as error:  # noqa: BLE001 - the model sees the failure, as a ReAct observation
                results.append({"error": f"{type(error).__name__}: {error}"})
        return self.answer(question=question, tool_results=json.dumps(results, default=str))


def metric(example: dspy.Example, prediction: dspy.Prediction, trace: object = None) -> float:
    return float(correct(getattr(prediction, "answer", None), example.answer))


def evaluate(program: dspy.Module, examples: list[dspy.Example]) -> tuple[list[float], int]:
    hits, failures = [], 0
    for example in examples:
        try:
            hits.append(metric(example, program(question=example.question)))
        except Exception:  # noqa: BLE001 - a failed example scores 0, as in promptgym
            hits.append(0.0)
            failures += 1
    return hits, failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy-url", required=True)
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--train", type=int, default=16)
    parser.add_argument("--max-iters", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agent", choices=("react", "native"), default="react")
    parser.add_argument("--show", type=int, default=0, help="print this many trajectories to stderr")
    args = parser.parse_args()
    lm = local_lm(f"{args.proxy_url}/v1", "qwen2.5-coder-0.5b-instruct", structured=True, max_tokens=160,
                  function_calling=args.agent == "native")
    # native: ChatAdapter, since the JSONAdapter also sends a json_schema of the remaining (no) output fields, which
    # llama_cpp.server's grammar turns into "{ }": the model can't write a tool call at all
    adapter = dspy.ChatAdapter(use_native_function_calling=True) if args.agent == "native" else dspy.JSONAdapter()
    dspy.configure(lm=lm, adapter=adapter)
    test = [dspy.Example(question=q, answer=a).with_inputs("question") for q, a in items(args.test, args.seed)]
    train = [dspy.Example(question=q, answer=a).with_inputs("question") for q, a in items(args.train, args.seed + 1)]
    if args.agent == "native":
        react = NativeToolAgent()
    else:
        react = dspy.ReAct("question -> answer: float", tools=[calculator], max_iters=args.max_iters)
    row: dict = {"framework": "dspy", "dspy": dspy.__version__, "agent": args.agent, "max_iters": args.max_iters}
    started, calls = time.perf_counter(), len(lm.history)
    hits, failures = evaluate(react, test)
    for entry in lm.history[calls:calls + args.show]:
        print(json.dumps({"messages": entry.get("messages"), "outputs": entry.get("outputs"),
                          "tools": (entry.get("kwargs") or {}).get("tools"),
                          "response": str(entry.get("response"))[:1500]}, default=str)[:4000], file=sys.stderr)
    row["untrained"] = {"hits": hits, "accuracy": sum(hits) / len(hits), "failures": failures,
                        "lm_calls": len(lm.history) - calls, "seconds": round(time.perf_counter() - started, 1)}
    started, calls = time.perf_counter(), len(lm.history)
    optimizer = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=2, max_labeled_demos=0, max_rounds=1)
    optimized = optimizer.compile(react, trainset=train)
    row["training"] = {"lm_calls": len(lm.history) - calls, "seconds": round(time.perf_counter() - started, 1)}
    started, calls = time.perf_counter(), len(lm.history)
    hits, failures = evaluate(optimized, test)
    row["optimized"] = {"hits": hits, "accuracy": sum(hits) / len(hits), "failures": failures,
                        "lm_calls": len(lm.history) - calls, "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
