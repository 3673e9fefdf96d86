"""Shared by the training benchmark scripts; stdlib only (runs in every venv).

Each ``run_<framework>.py`` reads the task file written by ``run_all.py`` (the same
seeded train / val / test split for everyone), talks to the model only through the
counting proxy, reads the proxy's ``/stats`` between phases (so LM calls are counted
at the wire, per phase) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

# Every task is "one input text field -> one output string field", scored by exact match
# after stripping whitespace (promptgym's and synalinks' ExactMatch; DSPy metric below).
# ``sizes`` (train / val / test) are the task's own; tasks without them take run_all.py's flags.
TASKS: dict[str, dict[str, Any]] = {
    "dates_dmy": {"loader": "dates", "kwargs": {"output_format": "%d.%m.%Y"}},
    "dates_iso": {"loader": "dates", "kwargs": {"output_format": "%Y-%m-%d"}},
    # issue 18 (demonstrations per input): >= 200 test items each, so a 5-point difference is outside noise
    "dates_dmy_200": {"loader": "dates", "kwargs": {"output_format": "%d.%m.%Y"},
                      "sizes": {"n_train": 200, "n_val": 20, "n_test": 200}},
    "mmlu_topics_200": {"loader": "mmlu_topics", "kwargs": {},
                        "sizes": {"n_train": 380, "n_val": 20, "n_test": 200}},
    # reasoning-gym's calendar questions mix six kinds (leap years, weekdays, counts, ...), each with its own answer form
    "calendar_200": {"loader": "reasoning_gym", "task": "calendar_arithmetic", "kwargs": {},
                     "sizes": {"n_train": 200, "n_val": 20, "n_test": 200}},
}


def load_task(name: str) -> dict[str, Any]:
    """``{"input": {...}, "output": {...}, "train": [...], "val": [...], "test": [...]}``."""
    path = DATA / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"no task file {path}: run bench/training/run_all.py (it writes it) first")
    return json.loads(path.read_text())


def exact(predicted: Any, expected: Any) -> float:
    return float(predicted is not None and str(predicted).strip() == str(expected).strip())


def test_score(predictions: list[Any], task: dict[str, Any]) -> dict[str, Any]:
    """Exact matches of ``predictions`` (strings or None) against the test targets."""
    out = task["output"]["name"]
    hits = [exact(p, row[out]) for p, row in zip(predictions, task["test"], strict=True)]
    return {"correct": int(sum(hits)), "n": len(hits), "score": round(sum(hits) / len(hits), 4),
            "hits": [int(hit) for hit in hits],  # per item, for intervals and paired tests between rows
            "predictions": [None if p is None else str(p) for p in predictions]}  # to classify the failures


class Wire:
    """Reads the counting proxy's counters; ``phase(name)`` records a delta and a wall time."""

    def __init__(self, proxy_url: str) -> None:
        self.url = proxy_url.rstrip("/")
        self.calls: dict[str, dict[str, Any]] = {}
        self.wall: dict[str, float] = {}

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as response:
            return json.loads(response.read())

    @contextlib.contextmanager
    def measure(self, name: str) -> Iterator[None]:
        """Record the wall time and the proxy's counts of the block as phase ``name``."""
        before, started = self.stats(), time.perf_counter()
        yield
        self.wall[name] = round(time.perf_counter() - started, 2)
        after = self.stats()
        self.calls[name] = {k: after[k] - before[k] for k in ("requests", "chat_completions", "errors",
                                                              "prompt_tokens", "completion_tokens")}
        # the server answers one request at a time and the phase keeps it busy: wall time per call is its latency
        requests = self.calls[name]["requests"]
        self.calls[name]["seconds_per_call"] = round(self.wall[name] / requests, 3) if requests else None
        log(f"  {name}: {self.calls[name]['requests']} wire calls, {self.wall[name]:.1f} s")

    def phase(self, name: str, fn: Callable[[], Any]) -> Any:
        with self.measure(name):
            return fn()


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--proxy-url", required=True, help="counting proxy root, e.g. http://127.0.0.1:8932")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="model alias sent to the server")
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4, help="parallel requests in the eval phases")
    parser.add_argument("--optimizer", default="randomfewshot")
    parser.add_argument("--settings", default="{}", help="JSON dict of framework-specific optimizer/fit settings")
    args = parser.parse_args()
    args.settings = json.loads(args.settings)
    return args


OPTIMIZER_LM_KEYS = ("optimizer_max_tokens", "optimizer_model")
"""Settings keys about the optimizer's own LM (never passed to ``fit()``)."""
RUN_KEYS = ("untrained",)
"""Settings keys about the run itself: ``"untrained": false`` skips the untrained test eval (another row has it)."""


def optimizer_lm(args: argparse.Namespace) -> dict[str, Any] | None:
    """The optimizer's own LM, ``{"optimizer_model": alias, "optimizer_max_tokens": n}``, or None: the task's LM.

    Instruction proposals and reflections need more output room than the task
    (``optimizer_max_tokens``), and may use a second model (``optimizer_model``).
    """
    if not any(args.settings.get(key) for key in OPTIMIZER_LM_KEYS):
        return None
    return {"optimizer_model": args.settings.get("optimizer_model", args.model),
            "optimizer_max_tokens": int(args.settings.get("optimizer_max_tokens", args.max_tokens))}


def recorded_optimizer_lm(args: argparse.Namespace) -> dict[str, Any]:
    """What a row records of the optimizer's LM (the task's model and bound when it has none of its own)."""
    return optimizer_lm(args) or {"optimizer_model": args.model, "optimizer_max_tokens": args.max_tokens}


def fit_settings(args: argparse.Namespace, defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` updated with the settings that are neither the optimizer's arguments nor its LM's."""
    return {**defaults, **{k: v for k, v in args.settings.items()
                           if k not in ("optimizer", *OPTIMIZER_LM_KEYS, *RUN_KEYS)}}


def wants_untrained(args: argparse.Namespace) -> bool:
    return bool(args.settings.get("untrained", True))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(row: dict[str, Any]) -> None:
    print(json.dumps(row), flush=True)


def row(framework: str, version: str, args: argparse.Namespace, task: dict[str, Any], wire: Wire,
        untrained: dict[str, Any], trained: dict[str, Any], settings: dict[str, Any], demos: list[Any],
        **extra: Any) -> dict[str, Any]:
    train_calls = sum(v["requests"] for k, v in wire.calls.items() if k == "train")
    return {
        "framework": framework, "version": version, "task": args.task, "optimizer": args.optimizer,
        "sizes": {k: len(task[k]) for k in ("train", "val", "test")},
        "untrained": untrained, "trained": trained,
        "train_calls": train_calls,
        "eval_calls": sum(v["requests"] for k, v in wire.calls.items() if k != "train"),
        "wire": wire.calls, "wall_s": {**wire.wall, "total": round(sum(wire.wall.values()), 2)},
        "settings": settings, "demos": demos, **extra,
    }


async def timed(wire: Wire, name: str, make: Callable[[], Any]) -> Any:
    """``Wire.phase`` for a coroutine factory."""
    with wire.measure(name):
        return await make()
