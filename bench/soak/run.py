"""A soak: ``promptgym serve`` under steady load for minutes, watching memory, descriptors and latency.

    .venv/bin/python bench/soak/run.py --minutes 30                       # the fake model server (issue 44)
    .venv/bin/python bench/soak/run.py --minutes 5 --out bench/results/soak_fake_5min.json
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/soak/run.py --minutes 5 \
        --model local/smollm2-135m-instruct --out bench/results/soak_embedded.json

The one-step QA program of bench/serving (every cache off) is served by ``promptgym serve`` in its own
process; the fake OpenAI server (``--latency-ms`` per answer, like a model) and the load client
(``bench/soak/load.py``, concurrency 32, every question different) run in processes of their own, so
the server's resident memory and open descriptors, sampled from /proc every few seconds, are its own.

Reported: RSS and open descriptors over time, p50/p99 latency per minute, every non-2xx answer and
every lost request (a connection that failed; the first 10 with their bodies in ``first_bad``), on an
embedded model the answers cut at ``--max-tokens`` (closed and served 200), and RSS growth after warm-up (the first minute, or the
first fifth of a shorter run): the mean of the last minute against the end of warm-up. Targets: growth
under 5%, 0 lost, 0 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH / "serving"))
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from run_all import Answer, Question, free_port, percentile, start_serve, stop, wait_until_up  # noqa: E402

import promptgym as pg  # noqa: E402

PY = sys.executable


async def save_program(model: str, base_url: str | None, path: Path, max_tokens: int) -> None:
    """The one-step QA program, every cache off, on the fake server or an embedded model."""
    if model == "fake":
        lm = pg.LanguageModel(model="openai/fake", api_base=f"{base_url}/v1", api_key="fake", cache=False,
                              concurrency=64)
    else:
        lm = pg.LanguageModel(model=model, cache=False, max_tokens=max_tokens)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm, instructions="Answer the question.")(inputs)
    pg.Program(inputs=inputs, outputs=outputs, name="qa").save(str(path))


def sample(pid: int) -> dict[str, float]:
    """The process's resident memory (MiB) and open file descriptors, from /proc."""
    rss_kib = 0
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return {"rss_mib": round(rss_kib / 1024, 1), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def per_minute(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_minute: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        by_minute[int(row["t"] // 60)].append(row)
    table = []
    for minute, items in sorted(by_minute.items()):
        ok = [row["ms"] for row in items if 200 <= row["status"] < 300]
        table.append({"minute": minute, "requests": len(items), "ok": len(ok),
                      "p50_ms": round(statistics.median(ok), 1) if ok else None,
                      "p99_ms": round(percentile(ok, 99), 1) if ok else None,
                      "non_2xx": sum(1 for row in items if row["status"] and not 200 <= row["status"] < 300),
                      "lost": sum(1 for row in items if row["status"] == 0)})
    return table


def rss_growth(samples: list[dict[str, float]], seconds: float) -> dict[str, float]:
    """RSS at the end of warm-up against the mean of the last minute (or last fifth)."""
    warmup = min(60.0, seconds / 5)
    tail = min(60.0, seconds / 5)
    after = [s for s in samples if s["t"] >= warmup]
    if not after:
        return {}
    start = after[0]["rss_mib"]
    last = [s["rss_mib"] for s in samples if s["t"] >= seconds - tail] or [after[-1]["rss_mib"]]
    end = statistics.mean(last)
    return {"warmup_s": warmup, "rss_after_warmup_mib": start, "rss_end_mib": round(end, 1),
            "growth_pct": round(100 * (end - start) / start, 2),
            "fds_after_warmup": after[0]["fds"], "fds_end": samples[-1]["fds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--model", default="fake", help="'fake' (the fake OpenAI server) or local/NAME")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the fake server's time per answer")
    parser.add_argument("--max-tokens", type=int, default=48,
                        help="the embedded model's answer limit (an answer cut there is closed, and counted)")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS/fd samples")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "soak_fake.json")
    args = parser.parse_args()
    seconds = args.minutes * 60
    fake: subprocess.Popen | None = None
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        folder = Path(scratch)
        base_url = None
        if args.model == "fake":
            fake_port = free_port()
            fake = subprocess.Popen([PY, str(BENCH / "fake_openai_server.py"), "--port", str(fake_port),
                                     "--latency-ms", str(args.latency_ms)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base_url = f"http://127.0.0.1:{fake_port}"
            wait_until_up(f"{base_url}/v1/models")
        program = folder / "qa.json"
        asyncio.run(save_program(args.model, base_url, program, args.max_tokens))
        port = free_port()
        server = start_serve(program, port, folder / "serve.log")
        try:
            loader = subprocess.Popen([PY, str(BENCH / "soak" / "load.py"), "--url", f"http://127.0.0.1:{port}",
                                       "--path", "/v1/programs/qa/predict", "--seconds", str(seconds),
                                       "--concurrency", str(args.concurrency), "--out", str(folder / "load.jsonl")])
            started, samples = time.monotonic(), []
            while loader.poll() is None:
                samples.append({"t": round(time.monotonic() - started, 1), **sample(server.pid)})
                time.sleep(args.sample_every)
            samples.append({"t": round(time.monotonic() - started, 1), **sample(server.pid)})
            exit_status = stop(server)
        finally:
            if server.poll() is None:
                stop(server)
            if fake is not None:
                fake.terminate()
                fake.wait(timeout=30)
        rows = [json.loads(line) for line in (folder / "load.jsonl").read_text().splitlines() if line.strip()]
        log = (folder / "serve.log").read_text()
        log_tail = log[-2000:]
    # The log line's tokens=PROMPT+COMPLETION: an answer of exactly max_tokens was cut there (and closed).
    completions = [int(match) for match in re.findall(r" 200 .* tokens=\d+\+(\d+)", log)]
    cut = sum(1 for tokens in completions if tokens >= args.max_tokens) if args.model != "fake" else 0
    bad = [row for row in rows if not 200 <= row["status"] < 300]
    report = {
        "command": " ".join(["bench/soak/run.py", *sys.argv[1:]]), "model": args.model,
        "minutes": args.minutes, "concurrency": args.concurrency, "requests": len(rows),
        "ok": len(rows) - len(bad), "lost": sum(1 for row in bad if row["status"] == 0),
        "5xx": sum(1 for row in bad if row["status"] >= 500),
        "non_2xx": collections.Counter(str(row["status"]) for row in bad),
        "answers_cut_at_max_tokens": cut, "first_bad": bad[:10], "server_exit": exit_status, "rss": rss_growth(samples, seconds),
        "per_minute": per_minute(rows), "samples": samples, "server_log_tail": log_tail,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    summary = {key: report[key] for key in ("model", "minutes", "requests", "ok", "lost", "5xx", "non_2xx",
                                            "answers_cut_at_max_tokens", "rss")}
    print(json.dumps(summary, indent=1))
    for row in report["per_minute"]:
        print(row)


if __name__ == "__main__":
    main()
