"""A response cache that can't be used warns once, naming the file, and calls go on uncached."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from promptgym.lm.cache import ResponseCache, shared_cache
from promptgym.testing import ScriptedLanguageModel

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
MESSAGES = [{"role": "user", "content": "q"}]


def garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database" * 100)


def truncated(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    connection.executemany("INSERT INTO responses VALUES (?, ?)", [(str(i), "x" * 500) for i in range(200)])
    connection.commit()
    connection.close()
    path.write_bytes(path.read_bytes()[:5000])


def directory(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("breakage", [garbage, truncated, directory])
async def test_a_broken_cache_file_warns_once_and_calls_go_on(breakage, isolated_cache: Path, caplog):
    caplog.set_level(logging.WARNING, logger="promptgym")
    breakage(isolated_cache / "responses.sqlite")
    lm = ScriptedLanguageModel(responses=[{"answer": "a"}], cache=True)
    for _ in range(3):
        assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "a"}
    assert len(lm.requests) == 3  # uncached, not failed
    warned = [record.getMessage() for record in caplog.records if "response cache" in record.getMessage()]
    assert len(warned) == 1 and str(isolated_cache / "responses.sqlite") in warned[0]


async def test_a_cache_that_becomes_unwritable_warns_once(isolated_cache: Path, caplog):
    caplog.set_level(logging.WARNING, logger="promptgym")
    cache = shared_cache()
    cache.put("k", {"content": "x"})
    cache._connection = sqlite3.connect(f"file:{cache.path}?mode=ro", uri=True, check_same_thread=False)
    lm = ScriptedLanguageModel(responses=[{"answer": "a"}], cache=True)
    assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "a"}
    assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "a"}
    assert cache.broken and "readonly" in cache.broken
    assert len([r for r in caplog.records if "response cache" in r.getMessage()]) == 1


def test_a_cache_dir_that_cannot_be_created_is_a_warning(tmp_path: Path, caplog):
    caplog.set_level(logging.WARNING, logger="promptgym")
    (tmp_path / "a-file").write_text("x")
    cache = ResponseCache(tmp_path / "a-file" / "cache" / "responses.sqlite")
    assert cache.get("k") is None
    cache.put("k", {"content": "x"})
    assert cache.broken and "a-file" in caplog.text



async def test_a_call_commits_its_answer_off_the_event_loop_before_it_returns(isolated_cache: Path, monkeypatch):
    threads: list[bool] = []
    real_put = ResponseCache.put

    def put(self, key, value):
        threads.append(threading.current_thread() is threading.main_thread())  # the event loop's thread here
        real_put(self, key, value)

    monkeypatch.setattr(ResponseCache, "put", put)
    lm = ScriptedLanguageModel(responses=[{"answer": "a"}, {"answer": "b"}], cache=True)
    assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "a"}
    assert threads == [False] and len(stored_answers(isolated_cache)) == 1  # committed, in a worker thread
    assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "a"} and len(lm.requests) == 1


async def test_a_streamed_answer_is_written_behind_and_read_back_at_once(isolated_cache: Path, monkeypatch):
    release, threads = threading.Event(), []
    real_put = ResponseCache.put

    def slow_put(self, key, value):  # a slow disk: the commit is still waiting when the next call asks
        threads.append(threading.current_thread() is threading.main_thread())
        release.wait(5)
        real_put(self, key, value)

    monkeypatch.setattr(ResponseCache, "put", slow_put)
    lm = ScriptedLanguageModel(responses=["a b c"], cache=True)
    assert [c["content"] async for c in lm.stream(MESSAGES)] == ["a ", "b ", "c"]
    assert [c["content"] async for c in lm.stream(MESSAGES)] == ["a b c"]  # the pending write, read back
    assert len(lm.requests) == 1 and stored_answers(isolated_cache) == []
    release.set()
    for _ in range(100):
        if stored_answers(isolated_cache):
            break
        await asyncio.sleep(0.01)
    assert stored_answers(isolated_cache) == ["a b c"] and threads == [False]


def stored_answers(folder: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(folder / "responses.sqlite")) as connection:
        return [json.loads(value)["content"] for (value,) in connection.execute("SELECT value FROM responses")]
