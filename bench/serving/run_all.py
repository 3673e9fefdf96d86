"""Serving overhead, side by side in one run: promptgym serve vs in-process vs DSPy behind FastAPI.

    .venv/bin/python bench/serving/run_all.py                  # N=1000 at concurrency 1 and 32
    .venv/bin/python bench/serving/run_all.py --n 200 --skip-dspy

Against the instant fake OpenAI server (a thread of this process), each setting runs in its own
process(es): the in-process timing (``bench/serving/inprocess.py``), ``promptgym serve`` with the
load client (``bench/serving/load.py``), DSPy's program behind the minimal FastAPI app of its
deployment tutorial (``bench/serving/dspy_app.py``, the DSPy venv of bench/peers/setup.sh) with
the same client. Then two checks on ``promptgym serve``: a SIGTERM during a 1,000-request load
(every request the server accepted must be answered), and the malformed requests of
tests/serving/malformed.py against the real process (right 4xx, field named, no traceback in the
responses or the server's log). Writes bench/results/serving.json.

All settings share one machine: run it when the machine is otherwise idle, or read the ratios
(both sides of a ratio ran minutes apart in the same run), not the absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from fake_openai_server import start_fake_server  # noqa: E402

import promptgym as pg  # noqa: E402
from tests.serving.malformed import CASES, problems, request_headers  # noqa: E402

BENCH_HOME = Path(os.environ.get("PROMPTGYM_BENCH_HOME", Path.home() / ".cache" / "promptgym-bench"))
PY = sys.executable
KEY = "bench-key-0123456789"


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


async def save_program(base_url: str, path: Path) -> None:
    """The one-step QA program of bench/overhead, every cache off, on the fake server."""
    lm = pg.LanguageModel(model="openai/fake", api_base=f"{base_url}/v1", api_key="fake", cache=False,
                          concurrency=64)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm, instructions="Answer the question.")(inputs)
    pg.Program(inputs=inputs, outputs=outputs, name="qa").save(str(path))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(name: str, concurrency: int, data: dict[str, Any]) -> dict[str, Any]:
    results = data["results"]
    ok = [r for r in results if r.get("status") == 200]
    latencies = [r["ms"] for r in ok]
    echoes = [r.get("echo") for r in ok if r.get("echo") is not None]
    row = {"setting": name, "concurrency": concurrency, "n": len(results), "ok": len(ok),
           "failed": len(results) - len(ok), "wall_s": round(data["wall_s"], 3),
           "requests_per_s": round(len(ok) / data["wall_s"], 1) if data["wall_s"] else None,
           "p50_ms": round(statistics.median(latencies), 3) if latencies else None,
           "p99_ms": round(percentile(latencies, 99), 3) if latencies else None,
           "wrong_id": sum(1 for r in ok if r.get("id_ok") is False),
           "duplicated_ids": len(echoes) - len(set(echoes))}
    if "predict_wall_s" in data:
        row["predict_per_s"] = round(len(results) / data["predict_wall_s"], 1)
    return row


def wait_until_up(url: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError as error:
            if getattr(error, "code", None):  # an HTTP error: it answers
                return
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up in {timeout} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_serve(program: Path, port: int, log: Path, extra: list[str] = ()) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENCH_SERVE_KEY": KEY}
    process = subprocess.Popen([PY, "-m", "promptgym.cli.main", "serve", str(program), "--port", str(port),
                                "--concurrency", "64", "--queue", "4096", *extra],
                               stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=REPO)
    wait_until_up(f"http://127.0.0.1:{port}/healthz")
    return process


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
    return process.wait(timeout=60)


def load(port: int, path: str, n: int, concurrency: int, out: Path, python: str = PY,
         headers: list[str] = ()) -> subprocess.Popen:
    command = [python, str(BENCH / "serving" / "load.py"), "--url", f"http://127.0.0.1:{port}", "--path", path,
               "--n", str(n), "--concurrency", str(concurrency), "--out", str(out)]
    for header in headers:
        command += ["--header", header]
    return subprocess.Popen(command)


def run_load(*args: Any, **kwargs: Any) -> dict[str, Any]:
    process = load(*args, **kwargs)
    if process.wait() != 0:
        raise RuntimeError("the load client failed")
    return json.loads(Path(args[4]).read_text())


def sigterm_during_load(program: Path, n: int, folder: Path) -> dict[str, Any]:
    """SIGTERM the server once a third of ``n`` requests are answered; every request it accepted must be answered."""
    port = free_port()
    log = folder / "sigterm_server.log"
    server = start_serve(program, port, log)
    out = folder / "sigterm_load.json"
    client = load(port, "/v1/programs/qa/predict", n, 32, out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answered = log.read_text().count(" 200 ")
        if answered >= n // 3 + 20:  # + the load client's warm-up requests
            break
        time.sleep(0.005)
    os.kill(server.pid, signal.SIGTERM)
    status = server.wait(timeout=60)
    client.wait(timeout=120)
    results = json.loads(out.read_text())["results"]
    text = log.read_text()
    accepted = set(re.findall(r"id=(r\d+) POST \S+ (\d{3})", text))
    accepted_ok = {rid for rid, code in accepted if code == "200"}
    answered_ok = {f"r{r['i']}" for r in results if r.get("status") == 200}
    other = [r for r in results if r.get("status") not in (0, 200)]
    return {"n": n, "server_exit": status, "accepted": len({rid for rid, _ in accepted}),
            "answered_200": len(answered_ok), "refused_before_accepting": sum(r.get("status") == 0 for r in results),
            "accepted_but_not_answered": sorted(accepted_ok - answered_ok)[:20],
            "accepted_lost": len(accepted_ok - answered_ok) + len({rid for rid, code in accepted if code != "200"}),
            "non_200_answers": len(other), "tracebacks_in_log": text.count("Traceback")}


def malformed(program: Path, folder: Path) -> dict[str, Any]:
    port = free_port()
    log = folder / "malformed_server.log"
    server = start_serve(program, port, log, ["--api-key-env", "BENCH_SERVE_KEY"])
    failures = []
    for case in CASES:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = request_headers(case)
        headers = {**headers, "authorization": headers["authorization"].replace("test-key-123", KEY)} \
            if "authorization" in headers else headers
        connection.request(case.method, case.path, case.body, headers)
        response = connection.getresponse()
        found = problems(case, response.status, response.read())
        connection.close()
        if found:
            failures.append({"case": case.name, "problems": found})
    stop(server)
    text = log.read_text()
    return {"cases": len(CASES), "right": len(CASES) - len(failures), "failures": failures,
            "tracebacks_in_log": text.count("Traceback"), "key_in_log": text.count(KEY)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--skip-dspy", action="store_true")
    parser.add_argument("--out", default=str(BENCH / "results" / "serving.json"))
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    fake = start_fake_server()
    base_url = fake.url.rstrip("/")
    folder = Path(tempfile.mkdtemp(prefix="promptgym-serving-bench-"))
    program = folder / "qa.json"
    asyncio.run(save_program(base_url, program))
    rows = []
    dspy_python = BENCH_HOME / "venvs" / "dspy" / "bin" / "python"
    for concurrency in levels:
        out = folder / f"inproc_{concurrency}.json"
        subprocess.run([PY, str(BENCH / "serving" / "inprocess.py"), "--program", str(program), "--n", str(args.n),
                        "--concurrency", str(concurrency), "--out", str(out)], check=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        rows.append(summarize("promptgym in-process (await program(x))", concurrency, json.loads(out.read_text())))
        print(json.dumps(rows[-1]), flush=True)
        port = free_port()
        server = start_serve(program, port, folder / f"serve_{concurrency}.log")
        data = run_load(port, "/v1/programs/qa/predict", args.n, concurrency, folder / f"serve_{concurrency}.json")
        rows.append(summarize("promptgym serve (predict route)", concurrency, data))
        print(json.dumps(rows[-1]), flush=True)
        stop(server)
        if not args.skip_dspy and dspy_python.is_file():
            port = free_port()
            app = subprocess.Popen([str(dspy_python), str(BENCH / "serving" / "dspy_app.py"), "--base-url", base_url,
                                    "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            try:
                wait_until_up(f"http://127.0.0.1:{port}/docs")
                data = run_load(port, "/predict", args.n, concurrency, folder / f"dspy_{concurrency}.json")
                rows.append(summarize("DSPy 3.4.1 + FastAPI (dspy.asyncify)", concurrency, data))
                print(json.dumps(rows[-1]), flush=True)
            finally:
                stop(app)
    sigterm = sigterm_during_load(program, args.n, folder)
    print(json.dumps({"sigterm": sigterm}), flush=True)
    bad = malformed(program, folder)
    print(json.dumps({"malformed": {key: value for key, value in bad.items() if key != "failures"}}), flush=True)
    fake.stop()
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "n": args.n, "load_avg_1m": os.getloadavg()[0],
              "cpus": os.cpu_count(), "rows": rows, "sigterm": sigterm, "malformed": bad}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print_table(rows)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'setting':45} {'conc':>4} {'ok':>5} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for row in rows:
        print(f"{row['setting']:45} {row['concurrency']:>4} {row['ok']:>5} {row['requests_per_s']:>8} "
              f"{row['p50_ms']:>8} {row['p99_ms']:>8}")


if __name__ == "__main__":
    main()
