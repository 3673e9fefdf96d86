"""The one retry loop the model backend and the task-app client share."""

from __future__ import annotations

import asyncio

import pytest

from promptgym.core.loop_scoped import loop_semaphore
from promptgym.core.retry import RetriesExhausted, Retry, RetryPolicy, retrying


async def test_retries_until_an_answer_and_gives_up_with_the_last_reason():
    tries: list[int] = []

    async def flaky() -> str:
        tries.append(len(tries))
        if len(tries) < 3:
            raise Retry(f"try {len(tries)} failed")
        return "answer"

    assert await retrying(flaky, RetryPolicy(retries=3, backoff_s=0.001)) == "answer"
    assert tries == [0, 1, 2]

    async def down() -> str:
        tries.append(len(tries))
        raise Retry(f"try {len(tries)} failed")

    with pytest.raises(RetriesExhausted) as raised:
        await retrying(down, RetryPolicy(retries=1, backoff_s=0.001))
    assert raised.value.attempts == 2 and raised.value.last.reason == "try 5 failed"


async def test_other_errors_stop_at_once():
    tries = []

    async def broken() -> None:
        tries.append(1)
        raise ValueError("not worth retrying")

    with pytest.raises(ValueError):
        await retrying(broken, RetryPolicy(retries=3, backoff_s=0.001))
    assert tries == [1]


async def test_the_slot_is_free_while_a_try_waits_to_retry():
    slot = await loop_semaphore(1).get()
    order: list[str] = []

    async def first() -> None:
        order.append("first")
        if order.count("first") == 1:
            raise Retry("busy")

    async def second() -> None:
        order.append("second")

    await asyncio.gather(retrying(first, RetryPolicy(retries=1, backoff_s=0.2), slot=slot),
                         retrying(second, RetryPolicy(), slot=slot))
    assert order == ["first", "second", "first"]


def test_a_server_hint_longer_than_the_backoff_wins_up_to_the_cap():
    policy = RetryPolicy(backoff_s=0.5, max_wait_s=10)
    assert [policy.wait_s(1), policy.wait_s(1, hint=3.0), policy.wait_s(5, hint=60.0)] == [0.5, 3.0, 10.0]


def test_a_transport_error_becomes_a_retry_naming_its_type_and_message():
    assert Retry.of(ConnectionResetError("peer closed")).reason == "ConnectionResetError: peer closed"
    assert Retry.of(asyncio.TimeoutError()).reason == "TimeoutError"  # no message: the type alone
    assert not Retry.of(OSError("x")).rate_limited
