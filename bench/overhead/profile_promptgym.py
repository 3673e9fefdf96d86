"""Where promptgym's per-call time goes: cProfile of ``await program(x)`` against the instant fake server.

    PYTHONPATH=$PWD .venv/bin/python bench/overhead/profile_promptgym.py [--n 500] [--top 30] [--sort tottime]

Same program as ``run_promptgym.py`` (one Generator, cache off), sequential calls after a
2-call warm-up; the fake server runs in its own process so its time is not in the profile.
Prints the top functions by self time (``tottime``) or cumulative time, and the wall ms/call
without the profiler.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_promptgym import build, sequential  # noqa: E402

from common import questions  # noqa: E402


def start_server(port: int) -> subprocess.Popen[bytes]:
    """The fake server in its own process (its CPU time stays out of the profile)."""
    server = subprocess.Popen([sys.executable, str(HERE.parent / "fake_openai_server.py"), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=1).read()
            return server
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("fake server did not start")


async def run(base_url: str, n: int, top: int, sort: str) -> None:
    program = await build(base_url)
    items = questions(n)
    await sequential(program, ["warm-up 1", "warm-up 2"])
    start = time.perf_counter()
    await sequential(program, items)
    print(f"unprofiled: {(time.perf_counter() - start) / n * 1e3:.3f} ms/call over {n} calls")
    profiler = cProfile.Profile()
    profiler.enable()
    await sequential(program, items)
    profiler.disable()
    pstats.Stats(profiler).sort_stats(sort).print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    parser.add_argument("--port", type=int, default=8941)
    args = parser.parse_args()
    server = start_server(args.port)
    try:
        asyncio.run(run(f"http://127.0.0.1:{args.port}", args.n, args.top, args.sort))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
