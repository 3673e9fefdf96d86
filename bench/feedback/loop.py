"""The loop from serving back to training, measured on the embedded model with no glue code.

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/feedback/loop.py --out bench/results/feedback_loop.json

1. ``promptgym serve served.json --record rec`` serves an untrained program (the bundled ``dates`` task,
   dates written DD.MM.YYYY: a convention the model does not guess without examples).
2. ``--traffic`` requests (training sentences) go through it; a person (the script, from the gold
   labels) reviews every third answer: a wrong one gets its correction, a right one a rating of 1,
   through ``POST /v1/feedback``.
3. One command retrains it from the trace store: ``promptgym train --config loop.toml`` with
   ``[data] traces = "rec"`` (KNNFewShot: each sentence is shown the corrected traces nearest to it).
4. The retrained version is served too, and ``--held-out`` new sentences (the test split, never
   served before) go to each version; both are scored by exact match, with 95% intervals and a
   paired test (McNemar's exact test on the items one version gets right and the other wrong).

Every step is a command a user types (docs/feedback.md lists them); this script only plays the
traffic and the person. Model calls are counted from the servers' logs and the run's status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH / "serving"))
sys.path.insert(0, str(REPO))

from run_all import free_port, wait_until_up  # noqa: E402

import promptgym as pg  # noqa: E402
from promptgym.datasets import dates  # noqa: E402
from promptgym.stats import confidence_interval, paired_test  # noqa: E402

PY = sys.executable
MODEL = "local/qwen2.5-coder-0.5b-instruct"
CONFIG = """[job]
type = "prompt_learning"
name = "dates-from-feedback"
seed = 0

[model]
name = "{model}"
max_tokens = 48

[program]
path = "{program}"

[data]
traces = "{traces}"
traces_program = "dates"
traces_holdout = 0
validation_split = 0.25

[reward]
name = "exactmatch"
params = {{ in_mask = ["date"] }}

[optimizer]
name = "knnfewshot"
params = {{ k = 3, embedding_model = "local/multilingual-e5-small" }}

[training]
epochs = 1
batch_size = 10
minibatch_size = 8
validation_freq = 2
"""


async def save_untrained(path: Path) -> None:
    lm = pg.LanguageModel(model=MODEL, max_tokens=48, cache=False)
    inputs = pg.Input(data_model=dates.Text)
    outputs = await pg.Generator(data_model=dates.Date, language_model=lm, name="date_reader")(inputs)
    pg.Program(inputs=inputs, outputs=outputs, name="dates").save(str(path))


def serve(program: Path, log: Path, extra: list[str] = ()) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([PY, "-m", "promptgym.cli.main", "serve", str(program), "--port", str(port),
                                "--concurrency", "2", *extra], stdout=log.open("w"), stderr=subprocess.STDOUT,
                               cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    url = f"http://127.0.0.1:{port}"
    wait_until_up(f"{url}/healthz")
    return process, url


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
    process.wait(timeout=120)


def ask_all(url: str, sentences: list[str]) -> list[tuple[str | None, str | None]]:
    """(answer, trace id) per sentence, two at a time (the machine's cores)."""
    def ask(text: str) -> tuple[str | None, str | None]:
        response = httpx.post(f"{url}/v1/programs/dates/predict", json={"text": text}, timeout=300)
        if response.status_code != 200:
            return None, response.headers.get("x-promptgym-trace-id")
        return response.json().get("date"), response.headers.get("x-promptgym-trace-id")

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(ask, sentences))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traffic", type=int, default=300)
    parser.add_argument("--held-out", type=int, default=200)
    parser.add_argument("--review-every", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the folder (programs, traces, runs) here")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "feedback_loop.json")
    args = parser.parse_args()
    (x_traffic, y_traffic), (x_test, y_test) = dates.load_data(n_train=args.traffic, n_test=args.held_out,
                                                               seed=args.seed, output_format="%d.%m.%Y")
    scratch = tempfile.TemporaryDirectory(prefix="feedback-loop-")
    folder = args.keep or Path(scratch.name)
    folder.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    served = folder / "served.json"
    asyncio.run(save_untrained(served))

    started = time.monotonic()
    server, url = serve(served, folder / "serve-record.log", ["--record", str(folder / "rec")])
    try:
        answers = ask_all(url, [x.get("text") for x in x_traffic])
        corrections = ratings = 0
        for index in range(0, len(answers), args.review_every):
            answer, trace_id = answers[index]
            gold = y_traffic[index].get("date")
            body = {"trace_id": trace_id, "rating": 1} if answer == gold else \
                {"trace_id": trace_id, "correction": {"date": gold}}
            response = httpx.post(f"{url}/v1/feedback", json=body, timeout=60)
            response.raise_for_status()
            corrections += "correction" in body
            ratings += "rating" in body
    finally:
        stop(server)
    timings["serve_and_review_s"] = round(time.monotonic() - started, 1)
    traffic_right = sum(answer == y.get("date") for (answer, _), y in zip(answers, y_traffic))

    started = time.monotonic()
    config = folder / "loop.toml"
    config.write_text(CONFIG.format(model=MODEL, program=served, traces=folder / "rec"))
    train = subprocess.run([PY, "-m", "promptgym.cli.main", "train", "--config", str(config), "--yes",
                            "--runs-dir", str(folder / "runs")], cwd=REPO, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    if train.returncode != 0:
        raise SystemExit(f"train failed:\n{train.stdout[-3000:]}\n{train.stderr[-3000:]}")
    (run,) = [path for path in (folder / "runs").iterdir() if path.is_dir()]
    status = json.loads((run / "run.json").read_text())
    timings["retrain_s"] = round(time.monotonic() - started, 1)
    if status["status"] != "completed":
        raise SystemExit(f"the retraining ended {status['status']}: {status.get('error')}")

    scores, outputs = {}, {}
    for arm, program in (("served", served), ("retrained", run / "best_program.json")):
        started = time.monotonic()
        server, url = serve(program, folder / f"serve-{arm}.log")
        try:
            held = ask_all(url, [x.get("text") for x in x_test])
        finally:
            stop(server)
        timings[f"held_out_{arm}_s"] = round(time.monotonic() - started, 1)
        scores[arm] = [float(answer == y.get("date")) for (answer, _), y in zip(held, y_test)]
        outputs[arm] = [answer for answer, _ in held]
    test = paired_test(scores["served"], scores["retrained"])
    report = {
        "command": " ".join(["bench/feedback/loop.py", *sys.argv[1:]]), "model": MODEL,
        "traffic": len(answers), "traffic_right": traffic_right, "reviewed": corrections + ratings,
        "corrections": corrections, "ratings": ratings, "held_out": len(x_test),
        "served": confidence_interval(scores["served"]).as_dict(),
        "retrained": confidence_interval(scores["retrained"]).as_dict(),
        "difference": test.as_dict(), "verdict": test.verdict(), "run_lm_calls": status.get("lm_calls"),
        "run_status": {key: status.get(key) for key in ("baseline", "final", "elapsed_s")},
        "timings": timings, "folder": str(folder) if args.keep else None,
        "first_answers": [{"text": x.get("text"), "gold": y.get("date"), "served": outputs["served"][i],
                           "retrained": outputs["retrained"][i]} for i, (x, y) in enumerate(zip(x_test[:8], y_test))],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
