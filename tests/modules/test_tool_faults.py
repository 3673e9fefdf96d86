"""The fault pass on tools (issue 44): hung sync tools, a ``training`` argument, non-JSON results, bad names."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from promptgym.modules import tool_threads
from promptgym.modules.tool import Tool, ToolDefinitionError

ROOT = Path(__file__).resolve().parents[2]


def sleepy(seconds: float) -> dict:
    """Sleep, then answer.

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return {"slept": seconds}


def test_a_script_whose_sync_tool_hangs_exits_at_the_timeout_not_when_the_thread_ends():
    script = textwrap.dedent("""
        import asyncio, json, time
        from promptgym.modules.tool import Tool

        def stuck(seconds: float) -> dict:
            '''Sleep.

            Args:
                seconds: How long.
            '''
            time.sleep(seconds)
            return {}

        async def main():
            return (await Tool(stuck, timeout=0.5)(seconds=30)).get_json()

        print(json.dumps(asyncio.run(main())))
    """)
    started = time.monotonic()
    # Before the fix asyncio.run joined the default executor's thread: 30 s, so the 20 s limit fails the test.
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"error": "stuck did not answer within 0.5 s"}
    assert time.monotonic() - started < 20


async def test_calls_past_their_timeout_hold_a_bounded_number_of_threads(monkeypatch):
    monkeypatch.setattr(tool_threads, "SLOTS", tool_threads.ToolThreads(limit=2))
    release = threading.Event()

    def blocked(tag: str) -> dict:
        """Block until released.

        Args:
            tag: A label.
        """
        release.wait(10)
        return {"tag": tag}

    tool = Tool(blocked, timeout=0.1)
    before = threading.active_count()
    first = await asyncio.gather(tool(tag="a"), tool(tag="b"))
    assert [result.get_json()["error"] for result in first] == ["blocked did not answer within 0.1 s"] * 2
    third = (await tool(tag="c")).get_json()["error"]
    assert "2 tool threads" in third and "past their timeout" in third and "blocked" in third
    assert threading.active_count() - before == 2  # no third thread was started
    release.set()
    for _ in range(100):
        if tool_threads.SLOTS.running == 0:
            break
        await asyncio.sleep(0.02)
    assert (await tool(tag="d")).get_json() == {"tag": "d"}  # the slots came back when the threads ended


async def test_more_concurrent_calls_than_threads_wait_for_a_slot_instead_of_failing(monkeypatch):
    monkeypatch.setattr(tool_threads, "SLOTS", tool_threads.ToolThreads(limit=2))
    tool = Tool(sleepy, timeout=5)
    results = await asyncio.gather(*(tool(seconds=0.05) for _ in range(6)))
    assert [result.get_json() for result in results] == [{"slept": 0.05}] * 6


def lookup(query: str, training: bool = False) -> dict:
    """Look something up.

    Args:
        query: What to look for.
        training: Whether to search the training index.
    """
    return {"query": query, "training": training}


async def test_a_parameter_named_training_is_the_tools_argument():
    tool = Tool(lookup)
    assert (await tool(query="x", training=True)).get_json() == {"query": "x", "training": True}
    assert (await tool({"query": "x", "training": True})).get_json() == {"query": "x", "training": True}
    assert (await tool.call(query="y", training=True)).get_json() == {"query": "y", "training": True}
    assert (await tool(query="z")).get_json() == {"query": "z", "training": False}


async def test_the_framework_training_flag_still_works_for_tools_without_that_parameter():
    tool = Tool(sleepy)
    assert (await tool(seconds=0, training=True)).get_json() == {"slept": 0}


def numbers() -> dict:
    """Odd floats.
    """
    return {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "ok": 1.5, "list": [float("nan")]}


async def test_nan_and_infinities_become_strings_the_model_can_read_and_the_result_is_strict_json():
    result = (await Tool(numbers)()).get_json()
    assert result == {"nan": "NaN", "inf": "Infinity", "ninf": "-Infinity", "ok": 1.5, "list": ["NaN"]}
    json.dumps(result, allow_nan=False)


def loop() -> dict:
    """A result that contains itself.
    """
    value: dict = {"a": 1}
    value["self"] = value
    return value


def deep() -> list:
    """A result nested past any sense.
    """
    value: list = []
    for _ in range(5000):
        value = [value]
    return value


async def test_a_result_that_contains_itself_is_a_tool_error_not_a_recursion_error():
    tool = Tool(loop)
    result = (await tool()).get_json()
    assert result == {"error": "loop returned a value that contains itself (at self); return plain JSON data"}
    assert tool.last_call_failed
    nested = (await Tool(deep)()).get_json()
    assert set(nested) == {"error"} and "nested deeper than" in nested["error"]


@pytest.mark.parametrize("name", ["my tool!", "", "a" * 65, "dots.in.name", "ünïcode"])
def test_a_name_servers_refuse_is_refused_at_definition(name):
    with pytest.raises(ToolDefinitionError) as raised:
        Tool(sleepy, name=name)
    message = str(raised.value)
    assert repr(name) in message and "^[A-Za-z0-9_-]{1,64}$" in message


def test_valid_names_are_taken():
    assert Tool(sleepy, name="a-b_C9" + "x" * 58).name == "a-b_C9" + "x" * 58


async def test_invoke_takes_the_models_arguments_as_one_dict():
    assert (await Tool(lookup).invoke({"query": "q", "training": True})).get_json() == {"query": "q", "training": True}
    problem = (await Tool(sleepy).invoke({"seconds": 0, "training": True})).get_json()["error"]
    assert "Additional properties are not allowed ('training' was unexpected)" in problem


def test_mcp_names_are_made_model_facing_and_a_given_name_is_checked():
    from promptgym.modules.mcp_tools import MCPTool, model_facing_name

    connection = {"transport": "stdio", "command": "python"}
    assert MCPTool(connection=connection, mcp_name="files.read", input_schema={}).name == "files_read"
    assert model_facing_name("x" * 80) == "x" * 64
    with pytest.raises(ToolDefinitionError, match="'my tool!'"):
        MCPTool(connection=connection, mcp_name="ok", input_schema={}, name="my tool!")


def exits() -> dict:
    """Call sys.exit, as a hostile or careless tool might.
    """
    raise SystemExit(3)


async def test_a_sync_tool_that_calls_sys_exit_is_a_tool_error_not_the_end_of_the_program():
    result = (await Tool(exits)()).get_json()
    assert result == {"error": "exits failed: RuntimeError: the tool raised SystemExit(3)"}


def huge(size: int) -> dict:
    """Answer a long text.

    Args:
        size: How many characters.
    """
    return {"text": "x" * size}


async def test_a_result_larger_than_max_result_chars_is_an_error_the_model_can_act_on():
    tool = Tool(huge, max_result_chars=1000)
    assert (await tool(size=10)).get_json() == {"text": "x" * 10}
    error = (await tool(size=5000)).get_json()["error"]
    assert error.startswith("huge returned 5,012 characters of JSON, more than its max_result_chars (1,000)")
    assert Tool(huge).max_result_chars == 100_000
    assert Tool(huge, max_result_chars=None).get_config()["max_result_chars"] is None
    with pytest.raises(ToolDefinitionError, match="max_result_chars"):
        Tool(huge, max_result_chars=0)


def undecodable() -> dict:
    """A file name read from disk with ``surrogateescape``, as os.listdir gives for bytes that are not UTF-8."""
    return {"name": b"report-\xff.txt".decode("utf-8", "surrogateescape"),
            b"key-\xfe".decode("utf-8", "surrogateescape"): 1}


async def test_text_that_is_not_unicode_reaches_the_model_as_the_replacement_character():
    result = (await Tool(undecodable)()).get_json()
    assert result == {"name": "report-\ufffd.txt", "key-\ufffd": 1}
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # what every request to a model needs
