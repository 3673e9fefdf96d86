"""Task-app faults: the server helper (in-process test client) and the client against broken apps."""

from __future__ import annotations

import json

from common import Case, Ran, cli, snippet
from configs import config, files

SERVER = """
import json, logging, io
from fastapi.testclient import TestClient
from promptgym.taskapp import TaskInfo, RolloutResponse, create_task_app
log = io.StringIO()
logging.basicConfig(stream=log, level=logging.WARNING)
info = TaskInfo(name="t", splits={"train": [0, 1, 2], "test": [10, 11]})

def rollout(request):
    return ROLLOUT

app = create_task_app(info, rollout, api_key=KEY, api_key_env=None)
client = TestClient(app, raise_server_exceptions=False)
body = {"seed": SEED, "split": SPLIT, "policy": {"model": "m"}}
headers = HEADERS
try:
    response = client.post("/rollout", content=BODY if BODY is not None else json.dumps(body).encode(),
                           headers={"Content-Type": "application/json", **headers})
    print("RESULT " + json.dumps({"raised": None, "status": response.status_code, "body": response.text[:300],
                                  "log": log.getvalue()[-300:]}))
except Exception as error:
    print("RESULT " + json.dumps({"raised": type(error).__name__, "message": str(error)[:300]}))
"""


def server_case(name: str, expect_status: int | tuple[int, ...], mention: tuple[str, ...] = (), rollout: str = '{"reward": 1.0}',
                key: str | None = "k", headers: str = '{"X-API-Key": "k"}', seed: int = 0, split: str = "train",
                body: str = "None", log_mention: str | None = None) -> Case:
    code = (SERVER.replace("ROLLOUT", rollout).replace("KEY", json.dumps(key).replace("null", "None"))
            .replace("SEED", str(seed)).replace("SPLIT", json.dumps(split)).replace("HEADERS", headers)
            .replace("BODY", body))
    statuses = expect_status if isinstance(expect_status, tuple) else (expect_status,)

    def check(ran: Ran) -> str | None:
        result = ran.result()
        if result.get("status") not in statuses:
            return f"HTTP {result.get('status')} (expected {statuses}): {result.get('body')}"
        missing = [word for word in mention if word.lower() not in result.get("body", "").lower()]
        if missing:
            return f"answer lacks {missing}: {result.get('body')}"
        if log_mention and log_mention not in result.get("log", ""):
            return f"no warning mentioning {log_mention!r} in the log"
        return None

    # The snippet runs fine either way; the check decides, and a right refusal counts as a clear error.
    return Case("taskapp", f"server {name}", snippet(code), expect="ok", check=check,
                ok_means="ok" if statuses[0] < 300 else "clear")


def server_cases() -> list[Case]:
    cases = [
        server_case("good rollout", 200),
        server_case("non-ASCII X-API-Key (UTF-8)", 401, headers='{"X-API-Key": "k\\u00e9y".encode("utf-8")}'),
        server_case("non-ASCII X-API-Key (Latin-1)", 401, headers='{"X-API-Key": b"k\\xe9y"}'),
        server_case("wrong key", 401, headers='{"X-API-Key": "no"}'),
        server_case("app without key warns", 200, key=None, headers="{}", log_mention="key"),
        server_case("rollout returns int", 500, mention=("int",), rollout="42"),
        server_case("rollout returns bad reward", 500, mention=("reward",), rollout='{"reward": "abc"}'),
        server_case("rollout returns None", 500, mention=("None",), rollout="None"),
        server_case("seed -1", (400, 404, 422), mention=("seed",), seed=-1),
        server_case("seed in no split", (400, 404, 422), mention=("seed",), seed=999),
        server_case("seed of another split", (400, 404, 422), mention=("seed",), seed=10, split="train"),
        server_case("unknown split", (400, 404, 422), mention=("split",), split="bogus"),
        server_case("20 MB body", 413, body='b"{\\"seed\\": 0, \\"pad\\": \\"" + b"x" * 20_000_000 + b"\\"}"'),
        server_case("malformed JSON body", (400, 422), body='b"{not json"'),
    ]
    return cases


CLIENT = """
import asyncio, json
from promptgym.taskapp import TaskAppClient, RolloutRequest, Policy
async def main():
    client = TaskAppClient(URL, retries=1, backoff_s=0.01, timeout=5)
    try:
        response = await client.rollout(RolloutRequest(seed=0, policy=Policy(model="m")))
        print("RESULT " + json.dumps({"raised": None, "reward": str(response.reward)}))
    except Exception as error:
        print("RESULT " + json.dumps({"raised": type(error).__name__, "message": str(error)[:300]}))
asyncio.run(main())
"""


def client_cases(broken_app) -> list[Case]:
    def train(mode: str, mention: tuple[str, ...]) -> Case:
        text = config(program="", data=f'[data]\ntask_url = "{broken_app.url}/{mode}"\n')
        return Case("taskapp", f"train task_info {mode}", cli("train", "-c", "run.toml", "--dry-run"), files=files(text),
                    mention=mention)

    def nan_run() -> Case:
        """Every rollout's reward is NaN: the run must not 'complete' with scores of None."""
        text = config(program="", data=f'[data]\ntask_url = "{broken_app.url}/nan_reward"\n')
        return Case("taskapp", "train rewards NaN", cli("train", "-c", "run.toml", "--yes"), files=files(text),
                    mention=("not a finite number",), exit_code=1, timeout=120)

    def rollout(mode: str, mention: tuple[str, ...]) -> Case:
        return Case("taskapp", f"client rollout {mode}", snippet(CLIENT.replace("URL", json.dumps(f"{broken_app.url}/{mode}"))),
                    mention=mention)

    return [
        train("bad_json", ("task_info", "JSON", "127.0.0.1")),
        train("wrong_shape", ("task_info", "splits")),
        train("wrong_shape2", ("task_info",)),
        rollout("nonjson_rollout", ("JSON", "127.0.0.1")),
        nan_run(),
    ]


def cases(broken_app) -> list[Case]:
    return [*server_cases(), *client_cases(broken_app)]
