"""``openai/`` against a real OpenAI-compatible server: llama.cpp's, on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Iterator

import httpx
import pytest

import promptgym as pg
from promptgym.core.local_server import free_port
from promptgym.lm.local_models import SMALLEST_LOCAL_MODEL, ensure_local_model
from tests.support import Answer, Question

pytestmark = pytest.mark.integration



@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    pytest.importorskip("llama_cpp.server.app", reason="needs promptgym[server]")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(ensure_local_model(SMALLEST_LOCAL_MODEL)),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--model_alias", "smollm2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("llama_cpp.server did not start within 120 s")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_structured_output_through_a_real_server(llama_server):
    lm = pg.LanguageModel(model="openai/smollm2", api_base=llama_server, cache=False, max_tokens=48)
    generator = pg.Generator(data_model=Answer, language_model=lm, max_string_length=60)
    answer = await generator(Question(question="What is the capital of France?"))
    assert isinstance(answer.answer, str) and 0 < len(answer.answer) <= 60
    # llama.cpp's server refuses json_schema (HTTP 422); the backend switched to json_object + schema
    assert lm.engine.structured_mode == "json_object"
    assert lm.usage.total().calls == 1 and lm.usage.total().prompt_tokens > 0
