"""The tool-use task both frameworks run: arithmetic over 3-4 numbers with a ``calculate`` tool.

No promptgym import here: DSPy's venv imports this file too, so both sides get the same items and tool.
"""

from __future__ import annotations

import random


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


def items(n: int, seed: int) -> list[tuple[str, float]]:
    """``n`` (question, exact answer) pairs, the same for a given seed."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        count = rng.choice([3, 4])
        numbers = [rng.randint(100, 9999) for _ in range(count)]
        ops = [rng.choice(["+", "-", "+"]) for _ in range(count - 1)]
        if rng.random() < 0.3:
            ops[0] = "*"
            numbers[1] = rng.randint(2, 99)
        expression = str(numbers[0]) + "".join(f" {op} {num}" for op, num in zip(ops, numbers[1:]))
        pairs.append((f"What is {expression}?", float(eval(expression))))  # noqa: S307 - generated digits and operators
    return pairs


def correct(answer: object, truth: float) -> bool:
    try:
        return abs(float(answer) - truth) < 1e-6
    except (TypeError, ValueError):
        return False
