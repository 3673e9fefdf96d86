"""core.local_server: an app served on 127.0.0.1 beside other work, stopped without touching signal handlers."""

from __future__ import annotations

import asyncio
import signal

import pytest
from fastapi import FastAPI

from promptgym.core.local_server import LocalServer
from promptgym.lm.http_client import HttpClient, HttpError


def slow_app() -> FastAPI:
    app = FastAPI()

    @app.get("/slow")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(0.2)
        return {"done": "yes"}

    return app


async def test_it_answers_lets_a_request_in_flight_finish_and_then_stops_listening() -> None:
    handler = signal.getsignal(signal.SIGINT)
    client = HttpClient(timeout=5)
    server = LocalServer(slow_app())
    url = await server.start()
    assert url.startswith("http://127.0.0.1:")
    in_flight = asyncio.create_task(client.request("GET", f"{url}/slow"))
    await asyncio.sleep(0.05)
    await server.stop()
    assert (await in_flight).json() == {"done": "yes"}
    with pytest.raises(HttpError, match="cannot connect"):
        await HttpClient(timeout=5).request("GET", f"{url}/slow")
    await client.close()
    assert signal.getsignal(signal.SIGINT) is handler  # uvicorn's own serve() would have taken it
