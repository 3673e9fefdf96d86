"""Task-app server and client facing bad requests and bad answers."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from fastapi.testclient import TestClient

from promptgym.taskapp import RolloutRequest, TaskAppClient, TaskAppError, TaskInfo, create_task_app
from promptgym.taskapp.client import RolloutFailed
from promptgym.taskapp.protocol import Policy

INFO = TaskInfo(name="t", splits={"train": [0, 1, 2], "test": [10, 11]})


def client_for(rollout: Any = lambda request: {"reward": 1.0}, **options: Any) -> TestClient:
    app = create_task_app(INFO, rollout, api_key=options.pop("api_key", "k"), api_key_env=None, **options)
    return TestClient(app, raise_server_exceptions=False)


def post(client: TestClient, seed: int = 0, split: str = "train", key: str = "k", **extra: Any):
    body = {"seed": seed, "split": split, "policy": {"model": "m"}, **extra}
    return client.post("/rollout", json=body, headers={"X-API-Key": key})


@pytest.mark.parametrize("key", ["kéy", "k\u00e9", "ключ"])
def test_a_key_that_is_not_ascii_is_a_401(key):
    response = client_for().post("/rollout", content=json.dumps({"seed": 0, "policy": {"model": "m"}}).encode(),
                                 headers={"X-API-Key": key.encode("utf-8"), "Content-Type": "application/json"})
    assert response.status_code == 401


def test_an_app_without_a_key_warns_that_it_is_open(caplog):
    caplog.set_level(logging.WARNING, logger="promptgym.taskapp")
    client = client_for(api_key=None)
    assert post(client, key="").status_code == 200
    assert "has no API key: anyone who can reach it can run rollouts" in caplog.text


@pytest.mark.parametrize(("result", "words"), [
    (42, "returned int, expected a RolloutResponse"),
    (None, "returned NoneType"),
    ({"reward": "abc"}, "reward: Input should be a valid number"),
    ({"feedback": "no reward"}, "reward: Field required"),
])
def test_a_rollout_returning_the_wrong_thing_keeps_its_message(result, words):
    response = post(client_for(lambda request: result))
    assert response.status_code == 500
    assert words in response.json()["detail"]


@pytest.mark.parametrize(("seed", "split", "words"), [
    (-1, "train", "seed -1 is not in split 'train' (its seeds: 0, 1, 2)"),
    (10, "train", "seed 10 is not in split 'train'"),
    (999, "test", "seed 999 is not in split 'test'"),
    (0, "bogus", "unknown split 'bogus'; this app has test, train"),
])
def test_seeds_and_splits_the_app_does_not_list_are_refused(seed, split, words):
    served: list[int] = []
    response = post(client_for(lambda request: served.append(request.seed) or {"reward": 1.0}), seed=seed, split=split)
    assert response.status_code == 400 and words in response.json()["detail"]
    assert served == []


def test_an_app_may_serve_any_seed_when_asked():
    assert post(client_for(check_seeds=False), seed=12345).status_code == 200


def test_a_body_over_the_limit_is_a_413():
    client = client_for(max_body_bytes=1000)
    assert post(client, pad="x" * 2000).status_code == 413
    assert post(client, pad="x" * 10).status_code == 200


class Broken(BaseHTTPRequestHandler):
    """/health answers; everything else answers what the path's first part says."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        if self.path.endswith("/health"):
            return self._send(200, b'{"status": "ok", "protocol": 1}')
        self._send(200, {"bad_json": b"{not json", "wrong_shape": b'{"name": "x", "splits": [1, 2]}',
                         "a_list": b'["a"]'}.get(mode, b"{}"))

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(200, b"<html>oops</html>")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def broken_app() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("mode", "words"), [
    ("bad_json", "/bad_json/task_info: the answer is not JSON"),
    ("wrong_shape", "/wrong_shape/task_info: the answer is not a valid TaskInfo (splits: Input should be a valid dictionary"),
    ("a_list", "/a_list/task_info: the answer is not a valid TaskInfo ((top level)"),
])
async def test_task_info_that_is_not_json_or_not_the_protocol_is_a_clear_error(broken_app, mode, words):
    with pytest.raises(TaskAppError) as raised:
        await TaskAppClient(f"{broken_app}/{mode}", retries=0).check()
    assert words in str(raised.value) and broken_app in str(raised.value)


async def test_a_rollout_answer_that_is_not_json_names_the_url(broken_app):
    with pytest.raises(RolloutFailed, match=f"POST {broken_app}/rollout: the answer is not JSON .HTTP 200.: '<html>oops"):
        await TaskAppClient(broken_app, retries=0).rollout(RolloutRequest(seed=0, policy=Policy(model="m")))
