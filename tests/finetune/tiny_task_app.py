"""A tiny task app for the RL tests: it asks the policy to talk, and rewards replies by how many of their
characters are letters a-m (partial credit, so the rollouts of a seed differ).

Faults are switched on by environment variables (the CLI's launched copy inherits them):
``TINY_FAIL_SEEDS`` (500 every time), ``TINY_SLOW_SEEDS`` (answers after 5 s), ``TINY_BAD_JSON_SEEDS``
(a 200 whose body is not JSON), ``TINY_CONSTANT=1`` (every reward 0.5: no signal anywhere),
``TINY_DELAY_S`` (every rollout waits that long: a run a test can signal mid-way), ``TINY_EXIT_SEEDS`` (the
app's process exits with code 3: an app that dies mid-run). Without a
``policy.inference_url`` (prompt learning) the reward is 1 when the instructions say "please".
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from promptgym.taskapp import PolicyModule, RolloutRequest, RolloutResponse, TaskInfo, TrajectoryStep, ask_policy, create_task_app

INFO = TaskInfo(name="tiny", description="say something with early letters",
                splits={"train": list(range(8)), "validation": [100, 101], "test": [200, 201, 202]},
                modules=[PolicyModule(name="policy", instructions="Say something.")])
SERVED: list[dict[str, Any]] = []
"""Every reply the policy gave this app (in-thread tests read it)."""


def seeds_in(name: str) -> set[int]:
    return {int(part) for part in os.environ.get(name, "").split(",") if part.strip()}


def score(text: str) -> float:
    return sum(1 for char in text if "a" <= char <= "m") / max(1, len(text))


async def rollout(request: RolloutRequest) -> RolloutResponse:
    if request.seed in seeds_in("TINY_FAIL_SEEDS"):
        raise RuntimeError("the environment crashed")
    if request.seed in seeds_in("TINY_EXIT_SEEDS"):
        os._exit(3)
    if request.seed in seeds_in("TINY_SLOW_SEEDS"):
        await asyncio.sleep(5)
    await asyncio.sleep(float(os.environ.get("TINY_DELAY_S") or 0))
    instructions = request.policy.variables.get("policy", {}).get("instructions", "")
    if request.policy.inference_url is None:
        reward = float("please" in instructions.lower())
        return RolloutResponse(seed=request.seed, reward=reward,
                               trajectory=[TrajectoryStep(inputs={"seed": request.seed}, outputs={"reward": reward})])
    messages = [{"role": "system", "content": instructions}, {"role": "user", "content": f"seed {request.seed}"}]
    text = await ask_policy(request.policy, messages, max_tokens=6)
    SERVED.append({"seed": request.seed, "url": request.policy.inference_url, "text": text})
    reward = 0.5 if os.environ.get("TINY_CONSTANT") == "1" else score(text)
    return RolloutResponse(seed=request.seed, reward=reward,
                           trajectory=[TrajectoryStep(inputs={"seed": request.seed}, outputs={"text": text})])


def with_bad_json(inner: Any) -> Any:
    """ASGI wrapper: a rollout of a seed in ``TINY_BAD_JSON_SEEDS`` gets a 200 whose body is not JSON."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/rollout":
            return await inner(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            seed = json.loads(body).get("seed")
        except ValueError:
            seed = None
        if seed in seeds_in("TINY_BAD_JSON_SEEDS"):
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
            await send({"type": "http.response.body", "body": b"<html>proxy error</html>"})
            return
        replayed = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def replay() -> dict[str, Any]:
            return next(replayed, None) or await receive()

        await inner(scope, replay, send)

    return app


def build_app(api_key: str | None = None) -> Any:
    """The app; its key is ``api_key``, else ``$TASK_APP_API_KEY`` as it is now."""
    return with_bad_json(create_task_app(INFO, rollout, api_key=api_key, api_key_env="TASK_APP_API_KEY"))


app = build_app()
