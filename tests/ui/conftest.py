"""Fixtures for the review page: two trained runs (the CLI on the scripted LM) and a trace store."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import promptgym as pg
from promptgym.cli.commands.ui import FolderRuns
from promptgym.cli.main import app as cli_app
from promptgym.traces import TraceStore
from promptgym.ui import create_ui_app
from promptgym.stats import set_token_rule
from tests.cli.helpers import ROOT, write_config

KEY = "review-key-123"
LOCAL = "http://127.0.0.1:8765"


class Reply(pg.DataModel):
    answer: str = pg.Field(description="The answer")
    confidence: float = pg.Field(description="How sure, 0 to 1")


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two completed prompt-learning runs, ``alpha`` (2 epochs) and ``beta`` (3 epochs)."""
    folder = tmp_path_factory.mktemp("ui-runs")
    previous = Path.cwd()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the configs' program factory is tests.cli.helpers:build_program
    os.chdir(folder)
    set_token_rule(None)  # 3 validation examples: too few for the costlier-candidate rule (the runs learn demos)
    try:
        for name, epochs in (("alpha", 2), ("beta", 3)):
            config = write_config(folder, epochs=epochs, name=name, filename=f"{name}.toml")
            result = CliRunner().invoke(cli_app, ["train", "--config", str(config), "--yes",
                                                  "--runs-dir", str(folder / "runs")])
            assert result.exit_code == 0, result.output
    finally:
        set_token_rule()
        os.chdir(previous)
    return folder / "runs"


def fill_store(store: TraceStore) -> dict[str, str]:
    """Three traces of ``qa`` v1 (schema stored) and one of ``qa`` v2 (no schema); their ids by label."""
    store.describe_program("qa", "v1", input_schema={"type": "object"}, output_schema=Reply.model_json_schema())
    ids = {}
    for index, (label, question, answer) in enumerate((("wrong", "2+2?", "5"), ("right", "3+3?", "6"),
                                                       ("other", "capital of France?", "Paris"))):
        ids[label] = store.record(
            program="qa", version="v1", inputs={"question": question}, outputs={"answer": answer, "confidence": 0.5},
            modules=[{"module": "think", "inputs": {"question": question}, "outputs": {"thought": f"about {question}"}},
                     {"module": "answerer", "inputs": {"question": question}, "outputs": {"answer": answer}}],
            model="openai/fake", prompt_tokens=20, completion_tokens=4, latency_ms=12.5, created=1_800_000_000 + index)
    ids["v2"] = store.record(program="qa", version="v2", inputs={"question": "1+1?"}, outputs={"answer": "2"},
                             created=1_800_000_100)
    store.add_feedback(ids["right"], rating=1.0)
    return ids


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TraceStore]:
    with TraceStore(tmp_path / "traces" / "traces.db") as found:
        yield found


@pytest.fixture
def client(runs_dir: Path, store: TraceStore) -> TestClient:
    return TestClient(create_ui_app(FolderRuns(runs_dir), store, api_key=KEY), base_url=LOCAL,
                      headers={"Authorization": f"Bearer {KEY}"})
