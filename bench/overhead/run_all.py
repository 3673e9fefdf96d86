"""Side-by-side framework overhead: promptgym vs DSPy vs synalinks on an instant server.

    .venv/bin/python bench/overhead/run_all.py [--frameworks dspy,synalinks,promptgym] [--n 200]

Starts the fake OpenAI server in-process, runs each framework's script in its own venv
(peers: ``bench/peers/setup.sh``), prints a markdown table and writes
``bench/results/overhead.json``. Wire calls are the server's own request counts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from fake_openai_server import start_fake_server

BENCH_HOME = Path(os.environ.get("PROMPTGYM_BENCH_HOME", Path.home() / ".cache" / "promptgym-bench"))
SCRIPTS = {"promptgym": "run_promptgym.py", "dspy": "run_dspy.py", "synalinks": "run_synalinks.py"}


def interpreter(framework: str) -> Path:
    """The python that runs ``framework``'s script: ours, or the peer's venv."""
    if framework == "promptgym":
        return Path(sys.executable)
    return BENCH_HOME / "venvs" / framework / "bin" / "python"


def run_framework(framework: str, base_url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run one framework's script; its JSON lines, or one error row."""
    python = interpreter(framework)
    if not python.exists():
        return [{"framework": framework, "error": f"no venv at {python}: run bench/peers/setup.sh"}]
    command = [str(python), str(HERE / SCRIPTS[framework]), "--base-url", base_url, "--n", str(args.n),
               "--batch-size", str(args.batch_size), "--repeat", str(args.repeat)]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "fake",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    print(f"[run_all] {framework}: {python}", file=sys.stderr, flush=True)
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=args.timeout)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows:
        tail = done.stderr.strip().splitlines()[-5:]
        rows.append({"framework": framework, "error": f"exit {done.returncode}: " + " | ".join(tail)})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table (errors as their own rows)."""
    head = ("| framework | setting | concurrency | predictions/s | ms/call | overhead ms/call "
            "| CPU ms/call | wire calls |\n|---|---|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['framework']} | error: {r['error'][:120]} | | | | | | |")
            continue
        lines.append(
            f"| {r['framework']} {r['version']} | {r['setting']} | {r['concurrency']} | {r['predictions_per_s']:.1f} "
            f"| {r['ms_per_call']:.2f} | {r['overhead_ms_per_call']:.2f} | {r['cpu_ms_per_call']:.2f} "
            f"| {r['wire_calls']} |"
        )
    floor = [r for r in rows if "raw_ms_per_call" in r]
    if floor:
        lines.append(
            f"\nFloor (plain http.client, same calls): {min(r['raw_ms_per_call'] for r in floor):.2f}"
            f"-{max(r['raw_ms_per_call'] for r in floor):.2f} ms/call; one httpx.AsyncClient: "
            f"{min(r['httpx_async_ms_per_call'] for r in floor):.2f}"
            f"-{max(r['httpx_async_ms_per_call'] for r in floor):.2f} ms/call."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="promptgym,dspy,synalinks")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per framework")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "overhead.json")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    with start_fake_server() as server:
        for framework in args.frameworks.split(","):
            rows += run_framework(framework.strip(), server.url, args)
    table = markdown(rows)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_avg_1m_end": round(os.getloadavg()[0], 2), "n": args.n, "batch_size": args.batch_size,
            "repeat": args.repeat, "method": "bench/overhead/common.py docstring"}
    args.out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
