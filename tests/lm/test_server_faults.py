"""Model servers that misbehave: errors that name the URL, what counts as a refusal, preflight checks."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import warnings

import pytest

import promptgym as pg
from promptgym.core.local_server import free_port
from promptgym.lm.errors import LMConfigurationError, LMConnectionError, LMError
from tests.lm.fake_openai_server import FakeOpenAIServer

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
MESSAGES = [{"role": "user", "content": "q"}]
ANSWER = lambda body: json.dumps({"answer": "42"})  # noqa: E731
CONTEXT_400 = (400, json.dumps({"error": {"message": "This model's maximum context length is 4096 tokens."}}))


def formats(server: FakeOpenAIServer) -> list[str | None]:
    return [(request.get("response_format") or {}).get("type") for request in server.requests]


def served_lm(server: FakeOpenAIServer, **options) -> pg.LanguageModel:
    lm = pg.LanguageModel(model="openai/test", api_base=server.url, cache=False, **options)
    lm.engine.backoff_s = 0.01
    return lm



async def test_a_400_unrelated_to_response_format_leaves_json_schema_on():
    with FakeOpenAIServer(ANSWER, fault=lambda body, n: CONTEXT_400 if n == 0 else None) as server:
        lm = served_lm(server)
        with pytest.raises(LMError, match="HTTP 400.*maximum context length"):
            await lm(MESSAGES, schema=SCHEMA)
        assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "42"}
    assert formats(server) == ["json_schema", "json_schema"]


async def test_a_refused_response_format_is_remembered_per_server_and_logged_once(caplog):
    caplog.set_level(logging.WARNING, logger="promptgym")
    with FakeOpenAIServer(ANSWER, refuse_json_schema=True) as refusing, FakeOpenAIServer(ANSWER) as accepting:
        assert await served_lm(refusing)(MESSAGES, schema=SCHEMA) == {"answer": "42"}
        assert await served_lm(refusing)(MESSAGES, schema=SCHEMA) == {"answer": "42"}  # another model, same server
        assert await served_lm(accepting)(MESSAGES, schema=SCHEMA) == {"answer": "42"}
    assert formats(refusing) == ["json_schema", "json_object", "json_object"]
    assert formats(accepting) == ["json_schema"]
    downgrades = [record.getMessage() for record in caplog.records if "refused response_format" in record.getMessage()]
    assert len(downgrades) == 1 and refusing.url in downgrades[0] and "json_object" in downgrades[0]


@pytest.mark.parametrize("model", ["", "   "])
def test_an_empty_model_string_is_an_error_not_the_embedded_model(model):
    with pytest.raises(LMConfigurationError, match="model must name a model"):
        pg.LanguageModel(model=model, api_base="http://127.0.0.1:8080/v1")


@pytest.mark.parametrize("api_base", ["ftp://127.0.0.1/v1", "127.0.0.1:8080/v1", "http://"])
def test_an_api_base_that_is_not_an_http_url_is_refused_at_once(api_base):
    with pytest.raises(LMConfigurationError, match="is not an http"):
        pg.LanguageModel(model="openai/test", api_base=api_base)


@pytest.mark.parametrize(("fault", "error", "words"), [
    ((200, "<html>502 Bad Gateway</html>"), LMError, "answered HTTP 200 with a body that is not JSON: '<html>502"),
    ((200, json.dumps({"choices": []})), LMError, "answered without any choice"),
    ((200, json.dumps({"id": "x"})), LMError, "answered without any choice"),
    ((429, json.dumps({"error": "Rate limit reached"})), LMConnectionError, r"rate limited \(HTTP 429\) on all 2 attempts"),
    ((401, json.dumps({"error": "Incorrect API key"})), LMConfigurationError, "answered HTTP 401 .the API key was refused"),
])
async def test_server_errors_name_the_url_and_what_went_wrong(fault, error, words):
    with FakeOpenAIServer(ANSWER, fault=lambda body, n: fault) as server:
        with pytest.raises(error, match=words) as raised:
            await served_lm(server, retries=1)(MESSAGES, schema=SCHEMA)
    assert f"{server.url}/chat/completions" in str(raised.value)
    assert "unreachable" not in str(raised.value)


async def test_a_401_is_not_retried():
    with FakeOpenAIServer(ANSWER, fault=lambda body, n: (401, "{}")) as server:
        with pytest.raises(LMConfigurationError):
            await served_lm(server, retries=3)(MESSAGES, schema=SCHEMA)
    assert len(server.requests) == 1


async def test_check_passes_a_working_server_and_names_model_and_url_otherwise():
    with FakeOpenAIServer(ANSWER) as server:
        await served_lm(server).check()
        assert server.gets == ["/v1/models"] and server.requests == []  # no tokens spent
    with FakeOpenAIServer(ANSWER, fault=lambda body, n: (401, "{}")) as server:
        with pytest.raises(LMConfigurationError, match=f"model openai/test: {server.url}/models answered HTTP 401"):
            await served_lm(server).check()
    refused = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LMConnectionError, match=f"model openai/test: can't reach {refused}"):
        await pg.LanguageModel(model="openai/test", api_base=refused, cache=False).check()


async def test_check_asks_for_one_token_when_the_server_has_no_models_route():
    no_models = lambda body, n: (404, "{}") if n == -1 else None  # noqa: E731 - GETs are number -1
    with FakeOpenAIServer(lambda body: "OK", fault=no_models) as server:
        await served_lm(server).check()
    assert [request["max_tokens"] for request in server.requests] == [1]
    with FakeOpenAIServer(ANSWER, fault=lambda body, n: (404, "{}")) as server:
        with pytest.raises(LMConfigurationError, match="no chat completions there"):
            await served_lm(server).check()


async def test_a_request_waiting_to_retry_leaves_its_slot_to_others():
    first_fails = lambda body, n: (503, "{}") if n == 0 else None  # noqa: E731
    with FakeOpenAIServer(lambda body: json.dumps({"answer": body["messages"][-1]["content"]}), fault=first_fails) as server:
        lm = served_lm(server, concurrency=1)
        lm.engine.backoff_s = 0.3

        async def ask(text: str) -> dict:
            return await lm([{"role": "user", "content": text}], schema=SCHEMA)

        first = asyncio.create_task(ask("a"))
        await asyncio.sleep(0.05)  # "a" has failed once and is backing off
        assert await asyncio.gather(first, ask("b")) == [{"answer": "a"}, {"answer": "b"}]
    assert [request["messages"][-1]["content"] for request in server.requests] == ["a", "b", "a"]


def test_models_dropped_while_their_loop_runs_are_closed_with_it():
    with FakeOpenAIServer(ANSWER) as server:
        async def main() -> None:
            for _ in range(3):
                assert await served_lm(server)(MESSAGES, schema=SCHEMA) == {"answer": "42"}
            gc.collect()

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main())
            gc.collect()
    assert not [str(warning.message) for warning in caught if "Unclosed" in str(warning.message)]
