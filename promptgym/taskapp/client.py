"""The client the trainer uses to talk to a task app.

Bounded concurrency, a timeout per request, retries with exponential backoff
on connection errors and 5xx. A rollout that still fails raises
:class:`RolloutFailed`; the trainer turns that into a score of 0 and logs it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from promptgym.core.loop_scoped import LoopScoped
from promptgym.taskapp.protocol import API_KEY_HEADER, Health, RolloutRequest, RolloutResponse, TaskInfo

logger = logging.getLogger("promptgym.taskapp")


class TaskAppError(RuntimeError):
    """The task app can't be reached or answered with an error."""


class RolloutFailed(TaskAppError):
    """One rollout failed after every retry."""


class TaskAppClient:
    """``await client.rollout(RolloutRequest(...))`` against ``base_url``."""

    def __init__(self, base_url: str, api_key: str | None = None, concurrency: int = 4, timeout: float = 60.0,
                 retries: int = 2, backoff_s: float = 0.5) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        # One connection pool per event loop, not a new client (and connection) per request.
        self._clients = LoopScoped(lambda: httpx.AsyncClient(timeout=self.timeout), lambda client: client.aclose())

    def _headers(self) -> dict[str, str]:
        return {API_KEY_HEADER: self.api_key} if self.api_key else {}

    def _semaphore(self) -> asyncio.Semaphore:
        key = id(asyncio.get_running_loop())
        if key not in self._semaphores:
            self._semaphores[key] = asyncio.Semaphore(self.concurrency)
        return self._semaphores[key]

    async def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                http = await self._clients.get()
                response = await http.request(method, url, json=payload, headers=self._headers())
            except httpx.HTTPError as error:
                last = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
                continue
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                raise TaskAppError(f"{method} {url}: HTTP {response.status_code}: {response.text[:200]}")
            return response.json()
        raise TaskAppError(f"{method} {url}: failed after {self.retries + 1} attempts ({last})")

    async def health(self) -> Health:
        return Health.model_validate(await self._request("GET", "/health"))

    async def task_info(self) -> TaskInfo:
        return TaskInfo.model_validate(await self._request("GET", "/task_info"))

    async def check(self) -> TaskInfo:
        """Health then task info, with an error that says the app is down and where."""
        try:
            await self.health()
        except TaskAppError as error:
            raise TaskAppError(f"task app at {self.base_url} is not reachable; is it running? ({error})") from None
        return await self.task_info()

    async def rollout(self, request: RolloutRequest) -> RolloutResponse:
        async with self._semaphore():
            try:
                data = await self._request("POST", "/rollout", request.model_dump(mode="json"))
                return RolloutResponse.model_validate(data)
            except (TaskAppError, ValueError) as error:
                logger.warning("rollout seed=%d failed: %s", request.seed, error)
                raise RolloutFailed(f"rollout seed={request.seed}: {error}") from None
