"""An RL task app whose episodes call a tool: arithmetic with a calculator, over several turns.

    promptgym train --config examples/configs/rl_tools.toml --yes      # the CLI starts this file itself
    TASK_APP_API_KEY=dev-key python examples/rl_tools.py --port 8002   # or run it yourself (task_url)

Each seed asks for a sum or difference of three 3-4 digit numbers ("What is 4821 + 3907 - 1266?"). The
policy gets the ``calculate`` tool (OpenAI ``tools``); each turn it either calls it (the app runs the call
and sends the result back as a ``tool`` message) or answers. At most ``MAX_TURNS`` turns. The reward gives
partial credit, so the rollouts of a seed differ: 1 for the exact number, 0.5 for a number within 1%, 0.2
for a well-formed tool call whose result was never used, 0 otherwise. The update trains on the policy's own
replies only: the tool results are context, never targets.
"""

from __future__ import annotations

import argparse
import json
import random
import re

from promptgym import Tool
from promptgym.taskapp import (
    PolicyModule, RolloutRequest, RolloutResponse, TaskInfo, TrajectoryStep, ask_policy_turn, create_task_app, serve,
)

INSTRUCTIONS = ('Use the calculate tool for the arithmetic: reply with only <tool_call>{"name": "calculate", "arguments": '
                '{"expression": "..."}}</tool_call> with the question\'s expression. When the result comes back, answer '
                'with that number only.')
SPLITS = {"train": list(range(0, 1000)), "validation": list(range(5000, 5016)), "test": list(range(9000, 9032))}
INFO = TaskInfo(name="calculator", description="Arithmetic with a calculator tool, over several turns.",
                splits=SPLITS, modules=[PolicyModule(name="policy", instructions=INSTRUCTIONS)])
MAX_TURNS = 3
MAX_TOKENS = 48


async def calculate(expression: str) -> dict:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: Numbers with + - * ( ), like '4821 + 3907 - 1266'.
    """
    if not expression or not all(c in "0123456789+-*(). " for c in expression):
        return {"error": "use only numbers, + - * ( ) and spaces"}
    try:
        return {"result": eval(expression, {"__builtins__": None}, {})}  # noqa: S307 - digits and operators only
    except SyntaxError as error:
        return {"error": f"not an expression: {error.msg}"}


CALCULATOR = Tool(calculate)


def problem(seed: int) -> tuple[str, int]:
    rng = random.Random(seed)
    a, b, c = (rng.randint(100, 9999) for _ in range(3))
    first, second = rng.choice("+-"), rng.choice("+-")
    expression = f"{a} {first} {b} {second} {c}"
    return expression, eval(expression)  # noqa: S307 - generated digits and operators


def last_number(text: str | None) -> float | None:
    """The answer: the last number of the reply ("4821 + 3907 - 1266 = 7462" answers 7462)."""
    found = re.findall(r"-?\d[\d,]*(?:\.\d+)?", text or "")
    return float(found[-1].replace(",", "")) if found else None


def score(answer: float | None, truth: int, called: bool) -> float:
    if answer is not None and answer == truth:
        return 1.0
    if answer is not None and abs(answer - truth) <= 0.01 * max(1, abs(truth)):
        return 0.5
    return 0.2 if called else 0.0


async def rollout(request: RolloutRequest) -> RolloutResponse:
    expression, truth = problem(request.seed)
    state = request.policy.variables.get("policy", {})
    messages = [{"role": "system", "content": state.get("instructions") or INSTRUCTIONS},
                {"role": "user", "content": f"What is {expression}?"}]
    called, answer, steps = False, None, []
    for _ in range(MAX_TURNS):
        reply = await ask_policy_turn(request.policy, messages, tools=[CALCULATOR.openai_tool()], max_tokens=MAX_TOKENS)
        messages.append(reply)
        if not reply.get("tool_calls"):
            answer = last_number(reply.get("content"))
            break
        for call in reply["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            result = (await CALCULATOR(**arguments)).get_json() if call["function"]["name"] == "calculate" \
                else {"error": f"no tool named {call['function']['name']!r}"}
            called = called or "result" in result
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
            steps.append(TrajectoryStep(module="policy", inputs={"call": arguments}, outputs=result))
    reward = score(answer, truth, called)
    return RolloutResponse(seed=request.seed, reward=reward, metrics={"exact": float(reward == 1.0),
                                                                      "called_tool": float(called)},
                           feedback="" if reward == 1 else f"expected {truth}, got {answer}",
                           trajectory=[*steps, TrajectoryStep(module="policy", inputs={"question": expression},
                                                              outputs={"answer": answer})])


app = create_task_app(INFO, rollout, api_key_env="TASK_APP_API_KEY")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8002)
    serve(app, port=parser.parse_args().port)
