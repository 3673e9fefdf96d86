"""``/metrics`` counts dollars per program: each call priced as the model's price says."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import promptgym as pg
from promptgym.serving import create_app
from promptgym.serving.metrics import sample_value
from tests.serving.programs import qa_program, shouting_model


async def test_metrics_count_dollars_per_program() -> None:
    model = shouting_model(price=pg.Price(input_per_mtok=2.0, output_per_mtok=10.0))
    priced = await qa_program("priced", language_model=model)
    app = create_app([priced])
    client = TestClient(app)
    for question in ("one", "two words"):
        assert client.post("/v1/programs/priced/predict", json={"question": question}).status_code == 200
    tokens = {kind: sample_value(app.state.metrics, "promptgym_tokens_total", program="priced", route="predict",
                                 kind=kind) for kind in ("prompt", "completion")}
    expected = (tokens["prompt"] * 2.0 + tokens["completion"] * 10.0) / 1_000_000
    assert expected > 0
    assert sample_value(app.state.metrics, "promptgym_cost_usd_total", program="priced", route="predict") == \
        pytest.approx(expected)
    assert sample_value(app.state.metrics, "promptgym_unpriced_calls_total", program="priced", route="predict") == 0
    assert "promptgym_cost_usd_total{" in client.get("/metrics").text
