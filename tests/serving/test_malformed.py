"""Every malformed request gets the right 4xx, an error naming the field, and no traceback anywhere."""

from __future__ import annotations

import logging

import pytest

from tests.serving.conftest import client_for
from tests.serving.malformed import CASES, KEY, PREDICT, Case, problems, request_headers


def test_there_are_at_least_30_cases() -> None:
    assert len(CASES) >= 30
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_malformed_request(case: Case, qa, caplog: pytest.LogCaptureFixture) -> None:
    client = client_for([qa], api_key=KEY)
    with caplog.at_level(logging.DEBUG):
        response = client.request(case.method, case.path, content=case.body, headers=request_headers(case))
    assert problems(case, response.status_code, response.content) == []
    assert "Traceback" not in caplog.text
    assert all(record.exc_info is None for record in caplog.records)
    assert KEY not in caplog.text


async def test_a_chunked_body_over_the_limit_is_refused_while_read(qa) -> None:
    client = client_for([qa], max_body_bytes=1000)

    def chunks():
        for _ in range(10):
            yield b" " * 500

    response = client.post(PREDICT, content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "1000 bytes" in response.json()["error"]["message"]
