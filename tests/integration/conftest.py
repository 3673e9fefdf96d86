"""Integration tests run the real embedded engine; they share one lock so two never compete for the 2 cores."""

from __future__ import annotations

import fcntl
from typing import Iterator

import pytest

LOCK_PATH = "/tmp/promptgym-llm.lock"


@pytest.fixture(autouse=True)
def engine_lock() -> Iterator[None]:
    with open(LOCK_PATH, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
