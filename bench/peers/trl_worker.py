"""Running one side of a promptgym-vs-TRL benchmark in its own process (shared by bench/sft and bench/rl)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

TRL_PYTHON = Path(os.environ.get("PROMPTGYM_BENCH_HOME", Path.home() / ".cache/promptgym-bench")) / "venvs/trl/bin/python"
"""The TRL venv's interpreter, made by bench/peers/setup.sh."""


def run_worker(command: list[str]) -> dict:
    """Run a training worker; its last stdout line is its JSON measurements, to which the wall time is added."""
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{command[1]} failed:\n{result.stderr[-3000:]}")
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    measured["wall_s"] = round(time.perf_counter() - started, 2)
    return measured
