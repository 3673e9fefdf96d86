"""A tool's output schema follows its return hint (synalinks' Tool._build_output_schema)."""

from __future__ import annotations

import typing

import promptgym as pg


class Sum(typing.TypedDict):
    result: int
    message: str


async def add(a: int, b: int) -> Sum:
    """Add.

    Args:
        a: a number.
        b: another.
    """
    return {"result": a + b, "message": "ok"}


async def lookup(key: str) -> dict[str, float]:
    """Look up.

    Args:
        key: what to find.
    """
    return {key: 1.0}


def test_output_schema_of_a_typed_dict_and_of_a_dict():
    typed = pg.Tool(add).get_output_schema()
    assert typed["properties"] == {"result": {"type": "integer"}, "message": {"type": "string"},
                                   "error": {"type": "string"}}
    assert typed["additionalProperties"] is False and typed["title"] == "add_output"
    assert pg.Tool(lookup)._build_output_schema()["additionalProperties"] == {"type": "number"}
