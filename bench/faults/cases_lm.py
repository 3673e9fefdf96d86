"""Model-server faults, against the fault server on 127.0.0.1: through predict() and through ``promptgym train``."""

from __future__ import annotations

import json
import socket

from common import Case, Ran, cli, snippet
from configs import GENERATOR_PROGRAM, config, files, served_model

PREDICT = """
import asyncio, json, logging, time
import numpy as np
import promptgym as pg
from factories import Question, Answer
logging.basicConfig(level=logging.WARNING)

async def main():
    try:
        lm = pg.LanguageModel(model=MODEL, api_base=API_BASE, timeout=1.0, retries=1, cache=False)
    except Exception as error:
        print("RESULT " + json.dumps({"raised": type(error).__name__, "message": str(error)}))
        return
    if lm.model_string.provider == "local":  # never start the embedded engine here
        print("RESULT " + json.dumps({"raised": None, "provider": "local"}))
        return
    program = pg.Sequential([pg.Input(data_model=Question), pg.Generator(data_model=Answer, language_model=lm)], name="qa")
    x = np.array([Question(question=f"q{i}") for i in range(6)], dtype=object)
    started = time.time()
    try:
        predictions = await program.predict(x, batch_size=1, verbose=0)
    except Exception as error:
        print("RESULT " + json.dumps({"raised": type(error).__name__, "message": str(error)}))
        return
    backend = lm._engine
    print("RESULT " + json.dumps({"raised": None, "ok": sum(p is not None for p in predictions),
        "failed": len(predictions.failures), "errors": sorted(set(predictions.failures.values())),
        "mode": getattr(backend, "structured_mode", None), "seconds": time.time() - started,
        "provider": lm.model_string.provider}))

asyncio.run(main())
"""


def predict_case(name: str, api_base: str, expect: str = "error", mention: tuple[str, ...] = (),
                 model: str = "openai/fake", check=None) -> Case:
    code = PREDICT.replace("MODEL", json.dumps(model)).replace("API_BASE", json.dumps(api_base))
    return Case("lm", f"predict {name}", snippet(code), expect=expect, mention=mention, check=check, timeout=90)


def all_ok(ran: Ran) -> str | None:
    result = ran.result()
    return None if result.get("ok") == 6 else f"{result.get('ok')} of 6 predictions ok: {result.get('errors')}"


def all_failed(ran: Ran) -> str | None:
    result = ran.result()
    return None if result.get("raised") or result.get("failed") == 6 else f"{result.get('failed')} of 6 failed"


def stays_on_json_schema(server, mode: str, expected_ok: int):
    def check(ran: Ran) -> str | None:
        result = ran.result()
        if result.get("ok") != expected_ok:
            return f"{result.get('ok')} of 6 ok (expected {expected_ok}): {result.get('errors')}"
        if result.get("mode") != "json_schema":
            return f"switched to {result.get('mode')} after a 400 unrelated to response_format"
        return None
    return check


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def predict_cases(server) -> list[Case]:
    url = server.mode_url
    refused = f"http://127.0.0.1:{free_port()}/v1"
    return [
        predict_case("ok", url("ok"), expect="ok", check=all_ok),
        predict_case("401", url("401"), mention=("401", "127.0.0.1"), check=all_failed),
        predict_case("403", url("403"), mention=("403", "127.0.0.1"), check=all_failed),
        predict_case("500 always", url("500"), mention=("500", "127.0.0.1"), check=all_failed),
        predict_case("429 always", url("429"), mention=("rate limit", "127.0.0.1"), check=all_failed),
        predict_case("200 non-JSON body", url("nonjson"), mention=("JSON", "127.0.0.1"), check=all_failed),
        predict_case("200 empty choices", url("empty_choices"), mention=("choices", "127.0.0.1"), check=all_failed),
        predict_case("200 no choices key", url("no_choices"), mention=("choices", "127.0.0.1"), check=all_failed),
        predict_case("200 null content", url("null_content"), mention=("fake",), check=all_failed),
        predict_case("400 context length, every call", url("context_400"), mention=("400", "context length"),
                     check=stays_on_json_schema(server, "context_400", 0)),
        predict_case("400 once then fine", url("first_400"), expect="ok",
                     check=stays_on_json_schema(server, "first_400", 5)),
        predict_case("422 on json_schema (downgrade)", url("rf_422"), expect="ok", check=all_ok),
        predict_case("slow server, timeout 1 s", url("slow", seconds=5), mention=("127.0.0.1", "timed out"), check=all_failed),
        predict_case("connection dropped", url("close"), mention=("127.0.0.1",), check=all_failed),
        predict_case("truncated body", url("truncated"), mention=("127.0.0.1",), check=all_failed),
        predict_case("answer not JSON", url("garbage_answer"), mention=("no valid answer",), check=all_failed),
        predict_case("connection refused", refused, mention=(refused.split("/v1")[0],), check=all_failed),
        predict_case("unresolvable host", "http://no-such-host.invalid/v1", mention=("no-such-host.invalid",), check=all_failed),
        predict_case("ftp scheme", "ftp://127.0.0.1/v1", mention=("ftp://",), check=all_failed),
        predict_case("no scheme", "127.0.0.1:8080/v1", mention=("127.0.0.1:8080",), check=all_failed),
        predict_case("model ''", url("ok"), model="", mention=("model",),
                     check=lambda ran: "ran the embedded model" if ran.result().get("provider") == "local" else None),
    ]


def train_cases(server) -> list[Case]:
    url = server.mode_url
    refused = f"http://127.0.0.1:{free_port()}/v1"

    def train(name: str, api_base: str, expect: str = "error", mention: tuple[str, ...] = (), exit_code: int | None = 2,
              check=None) -> Case:
        text = config(model=served_model(api_base), program=GENERATOR_PROGRAM)
        return Case("lm", f"train {name}", cli("train", "-c", "run.toml", "--yes"), expect=expect, mention=mention,
                    exit_code=exit_code, files=files(text), check=check, timeout=120)

    def failed_run(ran: Ran) -> str | None:
        runs = list((ran.folder / "runs").glob("*/run.json"))
        if not runs:
            return None
        status = json.loads(runs[0].read_text())
        summary = runs[0].parent / "summary.md"
        if status.get("status") != "failed":
            return f"run ended {status.get('status')}"
        if summary.is_file() and "fail" not in summary.read_text().lower():
            return "summary.md does not state the failures"
        return None

    return [
        train("ok", url("ok"), expect="ok"),
        train("flaky 1 in 3", url("flaky"), expect="ok"),
        train("422 on json_schema", url("rf_422"), expect="ok"),
        train("401", url("401"), mention=("401", "openai/fake", "127.0.0.1")),
        train("403", url("403"), mention=("403", "openai/fake", "127.0.0.1")),
        train("connection refused", refused, mention=("openai/fake", refused.split("/v1")[0])),
        train("unresolvable host", "http://no-such-host.invalid/v1", mention=("no-such-host.invalid",)),
        train("500 always", url("500"), mention=("500", "127.0.0.1"), exit_code=None, check=failed_run),
        train("200 non-JSON body", url("nonjson"), mention=("JSON",), exit_code=None, check=failed_run),
        train("200 empty choices", url("empty_choices"), mention=("choices",), exit_code=None, check=failed_run),
        train("400 context length", url("context_400"), mention=("400",), exit_code=None, check=failed_run),
        train("answer not JSON", url("garbage_answer"), exit_code=None, check=failed_run),
    ]


def cache_cases(server) -> list[Case]:
    """A broken response cache: warn naming the file and go on uncached (or one clear error)."""
    text = config(model=served_model(server.mode_url("ok")), program=GENERATOR_PROGRAM)
    command = cli("train", "-c", "run.toml", "--yes")

    def broken(name: str, prepare) -> Case:
        return Case("cache", name, command, expect="ok", mention=("responses.sqlite",), files=files(text),
                    prepare=prepare, check=completed, timeout=120)

    def completed(ran: Ran) -> str | None:
        runs = list((ran.folder / "runs").glob("*/run.json"))
        status = json.loads(runs[0].read_text()) if runs else {}
        if status.get("status") != "completed":
            return f"run ended {status.get('status')}"
        failed = sum(1 for line in (runs[0].parent / "events.jsonl").read_text().splitlines() if '"example_failed"' in line)
        return f"{failed} examples failed because of the cache" if failed else None

    def garbage(folder):
        (folder / "cache").mkdir()
        (folder / "cache" / "responses.sqlite").write_bytes(b"this is not a database" * 100)

    def truncated(folder):
        import sqlite3

        (folder / "cache").mkdir()
        path = folder / "cache" / "responses.sqlite"
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        connection.executemany("INSERT INTO responses VALUES (?, ?)", [(str(i), "x" * 500) for i in range(200)])
        connection.commit()
        connection.close()
        path.write_bytes(path.read_bytes()[:5000])

    def directory(folder):
        (folder / "cache" / "responses.sqlite").mkdir(parents=True)

    def read_only(folder):
        import subprocess

        (folder / "cache").mkdir()
        (folder / "cache" / "responses.sqlite").write_bytes(b"")
        subprocess.run(["chattr", "+i", str(folder / "cache" / "responses.sqlite")], check=False)

    def unwritable_dir(folder):
        import subprocess

        (folder / "cache").mkdir()
        subprocess.run(["chattr", "+i", str(folder / "cache")], check=False)

    cases = [broken("cache file garbage", garbage), broken("cache file truncated", truncated),
             broken("cache path is a directory", directory), broken("cache file immutable (read-only)", read_only),
             broken("cache dir immutable (unwritable)", unwritable_dir)]
    under_file = Case("cache", "cache dir under a file", command, expect="ok", mention=("cache",), files={**files(text), "afile": "x"},
                      env={}, check=completed, timeout=120)
    under_file.prepare = lambda folder: None
    cases.append(under_file)
    return cases


def cases(server) -> list[Case]:
    found = [*predict_cases(server), *train_cases(server), *cache_cases(server)]
    for case in found:
        if case.name == "cache dir under a file":
            case.argv = ["bash", "-c", "PROMPTGYM_CACHE_DIR=$PWD/afile/cache " + " ".join(case.argv)]
    return found
