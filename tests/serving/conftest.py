"""Fixtures: the ``qa`` program on a scripted model, and its app behind a TestClient."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptgym.serving import ServeSettings, create_app
from tests.serving.programs import qa_program


@pytest.fixture
async def qa() -> Any:
    return await qa_program()


def client_for(programs: list[Any], **settings: Any) -> TestClient:
    return TestClient(create_app(programs, settings=ServeSettings(**settings)))
