"""Streaming through ``promptgym serve``: many streamed requests with clients that leave, and time to first token.

    # 1,000 streamed requests at concurrency 32 through serve to the fake server (no model);
    # every 4th client leaves after its first piece of content
    .venv/bin/python bench/serving/stream.py fake --n 1000 --concurrency 32

    # time to first token through serve vs the embedded engine's own, on the real model
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/serving/stream.py ttft --n 20

``fake``: a program (a chat Generator on ``openai/fake``) served by ``promptgym serve`` in its
own process, the fake OpenAI server (bench/fake_openai_server.py) in another, streaming 20
words 1 ms apart. A request that reads to the end must get every word in order, the finish
chunk, the usage chunk and ``[DONE]``; one that fails to is *lost*. After the run the server's
``/healthz`` must show no request running or waiting (a *leaked* slot would stay counted),
and the fake server counts the upstream streams that serve closed for the clients that left.

``ttft``: the same prompts (distinct, so serve's response cache never answers) to the
embedded model through serve, read with the official ``openai`` client, and to llama.cpp
directly in this process (``create_chat_completion(stream=True)``: the engine's own first
token), alternating which goes first; each pair's serve / engine ratio and added milliseconds,
with bootstrap intervals of their medians, over all pairs and the quiet ones. Then three
requests to a program on the same model (constrained JSON) check that its last field streams
in pieces and joins to its output. Writes bench/results/serving_stream_{fake,ttft}.json.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

import promptgym as pg  # noqa: E402

PY = sys.executable
RESULTS = BENCH / "results"
WORDS = 20
LOCAL_MODEL = "local/smollm2-135m-instruct"


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


def start_process(command: list[str], pattern: str, timeout: float = 120,
                  env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A process started (``env`` added to this one's), and the URL it prints (``pattern`` with one group)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
    lines: list[str] = []
    found: list[str] = []

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.append(line)
            match = re.search(pattern, line)
            if match and not found:
                found.append(match.group(1))

    threading.Thread(target=read, daemon=True).start()
    process.lines = lines  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{command[:4]} did not start:\n{''.join(lines)}")
        time.sleep(0.05)
    return process, found[0]


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def wait_until_up(url: str, timeout: float = 120) -> None:
    """``serve`` prints its address just before uvicorn listens: wait until /healthz answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            get_json(f"{url}/healthz")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


# -- fake: 1,000 streamed requests, some clients leaving ----------------------------------------


def stream_once(host: str, port: int, index: int, leave: bool) -> dict[str, Any]:
    """One streamed chat request; reads to the end, or leaves after the first piece of content."""
    body = json.dumps({"model": "chat", "stream": True, "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": json.dumps({"question": f"q{index}"})}]})
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=120)
    result: dict[str, Any] = {"index": index, "leave": leave, "ok": False}
    try:
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        result["status"] = response.status
        if response.status != 200:
            result["error"] = response.read()[:300].decode(errors="replace")
            return result
        text, finish, usage, done = [], None, None, False
        while True:
            line = response.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                done = True
                break
            event = json.loads(data)
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                finish = choice.get("finish_reason") or finish
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    if not text:
                        result["ttft_ms"] = (time.perf_counter() - started) * 1000
                    text.append(piece)
                    if leave:
                        result["ok"] = True  # left on purpose, mid-answer
                        return result
        expected = " ".join(f"w{i}" for i in range(WORDS))
        result["ok"] = done and finish == "stop" and bool(usage) and "".join(text) == expected
        if not result["ok"]:
            result["error"] = f"done={done} finish={finish} usage={usage} text={''.join(text)[:80]!r}"
        result["ms"] = (time.perf_counter() - started) * 1000
        return result
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as error:
        result["error"] = f"{type(error).__name__}: {error}"
        return result
    finally:
        connection.close()  # for a client leaving: mid-answer, the server sees the disconnect


async def save_chat_program(api_base: str, path: Path) -> None:
    lm = pg.LanguageModel(model="openai/fake", api_base=api_base, api_key="fake", cache=False, concurrency=64)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(language_model=lm, instructions="Answer the question.")(inputs)
    pg.Program(inputs=inputs, outputs=outputs, name="chat").save(str(path))


def run_fake(n: int, concurrency: int, leave_every: int, chunk_ms: float) -> dict[str, Any]:
    fake, fake_url = start_process([PY, str(BENCH / "fake_openai_server.py"), "--port", "0", "--stream-words",
                                    str(WORDS), "--chunk-ms", str(chunk_ms)], r"(http://\S+/v1)")
    try:
        with tempfile.TemporaryDirectory() as folder:
            program = Path(folder) / "chat.json"
            asyncio.run(save_chat_program(fake_url, program))
            serve, url = start_process([PY, "-m", "promptgym.cli.main", "serve", str(program), "--port", "0",
                                        "--concurrency", str(concurrency)], r"serving on (http://\S+)")
            try:
                wait_until_up(url)
                host, port = url.removeprefix("http://").split(":")
                started = time.perf_counter()
                with ThreadPoolExecutor(concurrency) as pool:
                    results = list(pool.map(lambda i: stream_once(host, int(port), i, leave_every > 0 and
                                                                  i % leave_every == leave_every - 1), range(n)))
                wall = time.perf_counter() - started
                health = {}
                if serve.poll() is not None:
                    raise RuntimeError("promptgym serve exited:\n" + "".join(serve.lines[-30:]))  # type: ignore[attr-defined]
                for _ in range(200):  # the last clients' disconnects are noticed within a piece or two
                    health = get_json(f"{url}/healthz")
                    if health["running"] == 0 and health["waiting"] == 0:
                        break
                    time.sleep(0.05)
                stats = get_json(fake_url.removesuffix("/v1") + "/stats")
            finally:
                stop(serve)
    finally:
        stop(fake)
    read = [r for r in results if not r["leave"]]
    left = [r for r in results if r["leave"]]
    ttft = [r["ttft_ms"] for r in results if "ttft_ms" in r]
    lost = [r for r in results if not r["ok"]]
    return {
        "bench": "serving_stream_fake", "n": n, "concurrency": concurrency, "words_per_answer": WORDS,
        "chunk_ms": chunk_ms, "clients_leaving": len(left), "read_to_end": len(read),
        "read_to_end_ok": sum(r["ok"] for r in read), "left_after_first_piece": sum(r["ok"] for r in left),
        "lost": len(lost), "lost_examples": [r.get("error") for r in lost[:5]],
        "slots_leaked": health.get("running", -1) + health.get("waiting", -1) if health else None,
        "healthz_after": health, "upstream_streams": stats.get("streams", 0),
        "upstream_streams_broken": stats.get("streams_broken", 0),
        "wall_s": round(wall, 2), "requests_per_s": round(n / wall, 1),
        "ttft_p50_ms": round(statistics.median(ttft), 2), "ttft_p95_ms": round(percentile(ttft, 95), 2),
        "read_to_end_p50_ms": round(statistics.median([r["ms"] for r in read if "ms" in r]), 2),
    }


# -- ttft: through serve vs the engine's own first token -----------------------------------------


def prompt(index: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Give one short fact about the number {index + 7}."}]


def engine_ttft(llama: Any, messages: list[dict[str, str]], max_tokens: int) -> tuple[float, int]:
    """Seconds to the first content token from llama.cpp itself, and the content chunks of the answer."""
    started = time.perf_counter()
    first, pieces = None, 0
    for chunk in llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=max_tokens, seed=0,
                                              stream=True):
        if (chunk["choices"][0].get("delta") or {}).get("content"):
            first = time.perf_counter() - started if first is None else first
            pieces += 1
    return first if first is not None else float("nan"), pieces


def serve_ttft(client: Any, messages: list[dict[str, str]], max_tokens: int,
               model: str = LOCAL_MODEL) -> tuple[float, int]:
    """Seconds to the first content delta through serve, read with the official openai client."""
    started = time.perf_counter()
    first, pieces = None, 0
    stream = client.chat.completions.create(model=model, messages=messages, temperature=0.0,
                                            max_tokens=max_tokens, stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started if first is None else first
            pieces += 1
    return first if first is not None else float("nan"), pieces


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer, in one sentence")


async def save_local_program(path: Path, model: str = LOCAL_MODEL) -> None:
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=pg.LanguageModel(model=model, max_tokens=48),
                                 instructions="Answer the question in one short sentence.")(inputs)
    pg.Program(inputs=inputs, outputs=outputs, name="qa").save(str(path))


def program_stream_check(client: Any, index: int) -> dict[str, Any]:
    """A program's streamed answer on the embedded engine (constrained JSON): its pieces, and the same
    request without streaming (then a cache hit of the streamed answer) for its whole output."""
    messages = [{"role": "user", "content": json.dumps({"question": f"Why is the number {index + 3} odd or even?"})}]
    started = time.perf_counter()
    first, texts = None, []
    for chunk in client.chat.completions.create(model="qa", messages=messages, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started if first is None else first
            texts.append(chunk.choices[0].delta.content)
    whole = json.loads(client.chat.completions.create(model="qa", messages=messages).choices[0].message.content)
    return {"pieces": len(texts), "ttft_ms": round((first or float("nan")) * 1000, 1), "streamed": "".join(texts),
            "answer": whole.get("answer"), "same": "".join(texts) == whole.get("answer")}


QUIET = 1.25
"""A pair is *quiet* when its engine side is within this factor of the run's fastest engine first token (the
machine's other jobs held it up least)."""


def bootstrap_median(values: list[float], rounds: int = 4000, seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval of the median of ``values`` (seeded: a rerun gives the same interval)."""
    draw = random.Random(seed)
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def paired_summary(engine: list[float], served: list[float]) -> dict[str, Any]:
    """Per pair (the same prompt, one side after the other): serve / engine and serve - engine, their medians
    with bootstrap intervals, over all pairs and over the quiet ones."""
    out: dict[str, Any] = {}
    fastest = min(engine)
    for name, pairs in (("all", list(zip(engine, served))),
                        ("quiet", [(e, s) for e, s in zip(engine, served) if e <= QUIET * fastest])):
        ratios = [s / e for e, s in pairs]
        added = [(s - e) * 1000 for e, s in pairs]
        low, high = bootstrap_median(ratios)
        added_low, added_high = bootstrap_median(added)
        out[f"pairs_{name}"] = {
            "n": len(pairs), "ratio_median": round(statistics.median(ratios), 3),
            "ratio_median_95ci": [round(low, 3), round(high, 3)],
            "added_ms_median": round(statistics.median(added), 1),
            "added_ms_median_95ci": [round(added_low, 1), round(added_high, 1)],
            "engine_ms_median": round(statistics.median(e for e, _ in pairs) * 1000, 1),
            "within_20_percent": round(sum(r <= 1.2 for r in ratios) / len(ratios), 3)}
    return out


def run_ttft(n: int, max_tokens: int, warmup: int, model: str = LOCAL_MODEL) -> dict[str, Any]:
    import openai  # deferred: only this mode needs the client

    from promptgym.lm.cache import models_dir
    from promptgym.lm.local_engine import shared_local_engine
    from promptgym.lm.local_models import resolve_local_model

    files = resolve_local_model(model.removeprefix("local/"))
    llama = shared_local_engine(files.model_path)._engine()
    folder = tempfile.TemporaryDirectory()
    program = Path(folder.name) / "qa.json"
    asyncio.run(save_local_program(program, model))
    # A fresh response cache: prompts distinct within a run repeat across runs, and a cached answer is no first token.
    fresh = {"PROMPTGYM_CACHE_DIR": str(Path(folder.name) / "cache"), "PROMPTGYM_MODELS_DIR": str(models_dir())}
    serve, url = start_process([PY, "-m", "promptgym.cli.main", "serve", str(program), "--model", model,
                                "--port", "0"], r"serving on (http://\S+)", env=fresh)
    engine, served, pieces = [], [], []
    load_before = round(os.getloadavg()[0], 2)
    try:
        wait_until_up(url)
        client = openai.OpenAI(api_key="unused", base_url=f"{url}/v1", max_retries=0, timeout=120)
        for index in range(-warmup, n):  # the warm-up loads both models and fills their caches of the system prompt
            messages = prompt(index + 1000 if index < 0 else index)
            order = (engine_ttft, serve_ttft) if index % 2 == 0 else (serve_ttft, engine_ttft)
            for measure in order:
                seconds, count = engine_ttft(llama, messages, max_tokens) if measure is engine_ttft else \
                    serve_ttft(client, messages, max_tokens, model)
                if index >= 0:
                    (engine if measure is engine_ttft else served).append(seconds)
                    if measure is serve_ttft:
                        pieces.append(count)
        programs = [program_stream_check(client, index) for index in range(3)]
    finally:
        stop(serve)
        folder.cleanup()
    engine_p50, serve_p50 = statistics.median(engine), statistics.median(served)
    return {
        **paired_summary(engine, served), "load_average_1min": [load_before, round(os.getloadavg()[0], 2)],
        "bench": "serving_stream_ttft", "model": model, "n": n, "max_tokens": max_tokens, "warmup": warmup,
        "engine_ttft_p50_ms": round(engine_p50 * 1000, 1), "serve_ttft_p50_ms": round(serve_p50 * 1000, 1),
        "engine_ttft_mean_ms": round(statistics.fmean(engine) * 1000, 1),
        "serve_ttft_mean_ms": round(statistics.fmean(served) * 1000, 1),
        "serve_over_engine_p50": round(serve_p50 / engine_p50, 3),
        "serve_minus_engine_p50_ms": round((serve_p50 - engine_p50) * 1000, 1),
        "serve_content_chunks_min": min(pieces), "serve_content_chunks_p50": statistics.median(pieces),
        "engine_ttft_ms": [round(value * 1000, 1) for value in engine],
        "serve_ttft_ms": [round(value * 1000, 1) for value in served],
        "program_streams": programs,
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("fake", "ttft"))
    parser.add_argument("--n", type=int, default=None, help="requests (fake: 1000, ttft: 20)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--leave-every", type=int, default=4, help="fake: every N-th client leaves mid-answer")
    parser.add_argument("--chunk-ms", type=float, default=1.0, help="fake: pause between streamed words")
    parser.add_argument("--max-tokens", type=int, default=32, help="ttft: tokens per answer")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--model", default=LOCAL_MODEL, help="ttft: the local/... model served and run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.mode == "fake":
        result = run_fake(args.n or 1000, args.concurrency, args.leave_every, args.chunk_ms)
    else:
        result = run_ttft(args.n or 20, args.max_tokens, args.warmup, args.model)
    out = args.out or RESULTS / f"serving_stream_{args.mode}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_suffix(".tmp")
    temporary.write_text(json.dumps(result, indent=2) + "\n")
    temporary.replace(out)  # atomic: a result file is never half written
    print(json.dumps({key: value for key, value in result.items() if not key.endswith("_ttft_ms")}, indent=2))


if __name__ == "__main__":
    main()
