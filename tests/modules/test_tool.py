"""Tool: schema from signature and docstring, validation, timeouts and failures as answers, saving by name."""

from __future__ import annotations

import asyncio
import time
from typing import Literal, Optional

import pytest

from promptgym.core.serialization import deserialize_object, register_synalinks_serializable, serialize_object
from promptgym.modules.tool import Tool, ToolDefinitionError


@register_synalinks_serializable(package="tests")
async def add(a: int, b: int = 2, unit: Optional[Literal["m", "km"]] = None) -> dict:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
        unit: The unit of both.
    """
    return {"sum": a + b, "unit": unit}


def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: What to upper-case.
    """
    return text.upper()


async def test_schema_comes_from_signature_and_docstring():
    schema = Tool(add).get_tool_schema()
    assert schema["required"] == ["a"]
    assert schema["properties"]["a"] == {"type": "integer", "description": "The first number.", "title": "A"}
    assert schema["properties"]["b"]["default"] == 2
    assert schema["properties"]["unit"]["enum"] == ["m", "km"]
    assert Tool(add).description == "Add two numbers."


async def test_call_returns_the_functions_dict_and_wraps_other_values():
    assert (await Tool(add)(a=1, b=3)).get_json() == {"sum": 4, "unit": None}
    assert (await Tool(shout)(text="hi")).get_json() == {"result": "HI"}  # a plain def runs too


async def test_wrong_arguments_are_an_error_for_the_model_not_an_exception():
    tool = Tool(add)
    result = (await tool(a="one")).get_json()
    assert set(result) == {"error"} and "a: 'one' is not of type 'integer'" in result["error"]
    assert (await tool(b=1)).get_json()["error"].endswith("'a' is a required property")
    assert (await tool(a=1, c=2)).get_json()["error"].startswith("invalid arguments for add")
    assert tool.last_call_failed and tool.failed_calls == 3


async def test_an_exception_becomes_an_error_message():
    async def broken(x: int) -> dict:
        """Fail.

        Args:
            x: Anything.
        """
        raise RuntimeError("disk full")

    assert (await Tool(broken)(x=1)).get_json() == {"error": "broken failed: RuntimeError: disk full"}


async def test_a_hanging_tool_is_cut_at_its_timeout():
    async def hang(x: int) -> dict:
        """Never answer.

        Args:
            x: Anything.
        """
        await asyncio.sleep(60)
        return {}

    started = time.perf_counter()
    result = (await Tool(hang, timeout=0.05)(x=1)).get_json()
    assert result == {"error": "hang did not answer within 0.05 s"}
    assert time.perf_counter() - started < 30


def test_construction_errors_name_the_function_and_the_parameter():
    async def undocumented(x: int):
        return {}

    async def missing_arg_doc(x: int, y: int):
        """Do it.

        Args:
            x: The x.
        """

    async def odd_type(x: int, when: object):
        """Do it.

        Args:
            x: The x.
            when: The time.
        """

    with pytest.raises(ToolDefinitionError, match="'undocumented' has no docstring"):
        Tool(undocumented)
    with pytest.raises(ToolDefinitionError, match="'missing_arg_doc', parameter 'y' is not described"):
        Tool(missing_arg_doc)
    with pytest.raises(ToolDefinitionError, match="'odd_type', parameter 'when': type <class 'object'> has no JSON form"):
        Tool(odd_type)


async def test_a_tool_saves_by_registered_name_never_code():
    data = serialize_object(Tool(add, timeout=5))
    assert data["config"]["func"] == {"function": "tests>add"}
    restored = deserialize_object(data)
    assert restored.timeout == 5 and (await restored(a=2)).get_json()["sum"] == 4


def test_an_unregistered_function_does_not_load():
    data = serialize_object(Tool(shout))
    with pytest.raises(ValueError, match="not registered"):
        deserialize_object(data)
