"""The client the trainer uses to talk to a task app.

Bounded concurrency, a timeout per request, retries with exponential backoff
on connection errors, 5xx and 429 (no slot held while waiting). An answer that
is not JSON, or not the protocol's shape, is an error naming the URL. A rollout that still fails raises
:class:`RolloutFailed`; the trainer turns that into a score of 0 and logs it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable, TypeVar

import pydantic

from promptgym.core.loop_scoped import LoopScoped, loop_semaphore
from promptgym.core.retry import RetriesExhausted, Retry, RetryPolicy, retrying
from promptgym.lm.http_client import HttpClient, HttpError, RawReply
from promptgym.taskapp.protocol import API_KEY_HEADER, Health, RolloutRequest, RolloutResponse, TaskInfo

T = TypeVar("T", bound=pydantic.BaseModel)

logger = logging.getLogger("promptgym.taskapp")


class TaskAppError(RuntimeError):
    """The task app can't be reached or answered with an error (``status``: its HTTP status, if it answered)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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
        self._slots = loop_semaphore(lambda: self.concurrency)
        # One connection pool per event loop, not a new client (and connection) per request.
        self._clients = LoopScoped(lambda: HttpClient(timeout=self.timeout), lambda client: client.close())

    def _headers(self) -> dict[str, str]:
        return {API_KEY_HEADER: self.api_key} if self.api_key else {}

    async def _request(self, method: str, path: str, payload: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
                       slot: asyncio.Semaphore | None = None) -> Any:
        """``payload`` may be a function: it is called for each attempt (a retry sends what it returns then)."""
        url = f"{self.base_url}{path}"

        async def attempt() -> RawReply:
            try:
                http = await self._clients.get()
                body = payload() if callable(payload) else payload
                response = await http.request(method, url, json=body, headers=self._headers())
            except asyncio.TimeoutError as error:
                raise Retry(f"{type(error).__name__}: no answer within {self.timeout:g} s (the client's timeout; "
                            "data.task_timeout in a config)") from None
            except HttpError as error:
                raise Retry.of(error) from None
            if response.status >= 500 or response.status == 429:
                raise Retry(f"HTTP {response.status}: {response.text[:200]}", rate_limited=response.status == 429)
            return response

        try:
            response = await retrying(attempt, RetryPolicy(retries=self.retries, backoff_s=self.backoff_s), slot=slot)
        except RetriesExhausted as exhausted:
            raise TaskAppError(f"{method} {url}: failed after {exhausted.attempts} attempts ({exhausted.last.reason})") from None
        if response.status >= 400:
            raise TaskAppError(f"{method} {url}: HTTP {response.status}: {response.text[:200]}", response.status)
        try:
            return response.json()
        except ValueError:
            raise TaskAppError(f"{method} {url}: the answer is not JSON (HTTP {response.status}): "
                               f"{response.text[:200]!r}") from None

    async def _validated(self, model: type[T], method: str, path: str,
                         payload: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
                         slot: asyncio.Semaphore | None = None) -> T:
        data = await self._request(method, path, payload, slot)
        try:
            return model.model_validate(data)
        except pydantic.ValidationError as error:
            problems = "; ".join(f"{'.'.join(str(p) for p in item['loc']) or '(top level)'}: {item['msg']}"
                                 for item in error.errors()[:5])
            raise TaskAppError(f"{method} {self.base_url}{path}: the answer is not a valid {model.__name__} "
                               f"({problems}): {json.dumps(data)[:200]}") from None

    async def health(self) -> Health:
        return await self._validated(Health, "GET", "/health")

    async def task_info(self) -> TaskInfo:
        return await self._validated(TaskInfo, "GET", "/task_info")

    async def check(self) -> TaskInfo:
        """Health then task info, with an error that says the app is down and where."""
        try:
            await self.health()
        except TaskAppError as error:
            raise TaskAppError(f"task app at {self.base_url} is not reachable; is it running? ({error})") from None
        try:
            return await self.task_info()
        except TaskAppError as error:
            if error.status in (401, 403):
                given = "no API key was sent" if not self.api_key else "the API key sent is not the app's"
                raise TaskAppError(f"task app at {self.base_url} refused the API key (HTTP {error.status}): {given}",
                                   error.status) from None
            raise

    async def rollout(self, request: RolloutRequest | Callable[[], RolloutRequest]) -> RolloutResponse:
        """One rollout; at most ``concurrency`` in flight, none of them held while waiting to retry.

        ``request`` may be a function called for each attempt, so that a retry can carry a fresh
        ``policy.inference_url`` (RL records each attempt's policy calls apart).
        """
        first = request() if callable(request) else request
        attempts = iter([first])

        def payload() -> dict[str, Any]:
            current = next(attempts, None) or (request() if callable(request) else first)
            return current.model_dump(mode="json")

        try:
            return await self._validated(RolloutResponse, "POST", "/rollout", payload, slot=await self._slots.get())
        except TaskAppError as error:
            logger.warning("rollout seed=%d failed: %s", first.seed, error)
            raise RolloutFailed(f"rollout seed={first.seed}: {error}") from None
