"""The HTTP surface on the scripted model: predict, chat completions, models, health, metrics, limits, logs."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from fastapi.testclient import TestClient

from promptgym.serving import ServeSettings, create_app, load_programs
from promptgym.serving.metrics import sample_value
from promptgym.lm.engine import LMResponse
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.serving.conftest import client_for
from tests.serving.programs import qa_program, shouting_model


async def test_predict_answers_with_the_output_data_model(qa) -> None:
    response = client_for([qa]).post("/v1/programs/qa/predict", json={"question": "hi there"})
    assert response.status_code == 200
    assert response.json() == {"answer": "HI THERE"}
    assert response.headers["x-request-id"]


async def test_the_openapi_schema_comes_from_the_data_models(qa) -> None:
    schema = client_for([qa]).get("/openapi.json").json()
    operation = schema["paths"]["/v1/programs/qa/predict"]["post"]
    body_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    output_ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    components = schema["components"]["schemas"]
    assert components[body_ref.rsplit("/", 1)[-1]]["required"] == ["question"]
    assert set(components[output_ref.rsplit("/", 1)[-1]]["properties"]) == {"answer"}


async def test_chat_completions_call_the_program_named_by_model(qa) -> None:
    body = {"model": "qa", "messages": [{"role": "system", "content": "ignored"},
                                        {"role": "user", "content": json.dumps({"question": "why"})}]}
    answer = client_for([qa]).post("/v1/chat/completions", json=body).json()
    assert answer["object"] == "chat.completion" and answer["model"] == "qa"
    assert json.loads(answer["choices"][0]["message"]["content"]) == {"answer": "WHY"}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["total_tokens"] == answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"] > 0


async def test_chat_completions_stream_as_server_sent_events(qa) -> None:
    body = {"model": "qa", "stream": True, "messages": [{"role": "user", "content": '{"question": "s"}'}]}
    text = client_for([qa]).post("/v1/chat/completions", json=body).text
    events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[0])["choices"][0]["delta"]["role"] == "assistant"
    assert json.loads(events[1])["choices"][0]["delta"]["content"] == "S"  # the last output field, as written


async def test_the_openai_client_can_call_a_program(qa) -> None:
    openai = pytest.importorskip("openai")
    app = create_app([qa])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        client = openai.AsyncOpenAI(api_key="unused", base_url="http://test/v1", http_client=http)
        completion = await client.chat.completions.create(model="qa", messages=[
            {"role": "user", "content": json.dumps({"question": "via openai"})}])
    assert json.loads(completion.choices[0].message.content) == {"answer": "VIA OPENAI"}


async def test_a_model_given_directly_chats_without_a_program(qa) -> None:
    direct = ScriptedLanguageModel(responses=["plain text answer"], model="scripted/direct")
    client = TestClient(create_app([qa], models=[direct]))
    body = {"model": "scripted/direct", "messages": [{"role": "user", "content": "hello"}]}
    answer = client.post("/v1/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == "plain text answer"
    assert direct.requests[0].messages == [{"role": "user", "content": "hello"}]
    assert [model["id"] for model in client.get("/v1/models").json()["data"]] == ["qa", "scripted/direct"]


async def test_healthz_and_metrics_count_requests_calls_tokens_and_failures(qa) -> None:
    app = create_app([qa])
    client = TestClient(app)
    assert client.get("/healthz").json()["programs"] == ["qa"]
    client.post("/v1/programs/qa/predict", json={"question": "one"})
    client.post("/v1/programs/qa/predict", json={"question": "two"})
    client.post("/v1/programs/qa/predict", json={"question": 5})
    assert client.post("/v1/programs/qa/predict", json={"question": "fail"}).status_code == 502
    metrics = app.state.metrics
    assert sample_value(metrics, "promptgym_requests_total", program="qa", route="predict", status=200) == 2
    assert sample_value(metrics, "promptgym_requests_total", program="qa", route="predict", status=422) == 1
    assert sample_value(metrics, "promptgym_failures_total", program="qa", reason="invalid_input") == 1
    assert sample_value(metrics, "promptgym_failures_total", program="qa", reason="model_error") == 1
    assert sample_value(metrics, "promptgym_lm_calls_total", program="qa", route="predict") == 2
    assert sample_value(metrics, "promptgym_tokens_total", program="qa", route="predict", kind="completion") == 4
    text = client.get("/metrics").text
    assert 'promptgym_requests_total{program="qa",route="predict",status="200"} 2.0' in text
    assert "promptgym_request_seconds_bucket" in text


async def test_a_failing_model_is_a_502_naming_the_failure_without_a_traceback(qa, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="promptgym.serve"):
        response = client_for([qa]).post("/v1/programs/qa/predict", json={"question": "fail"})
    assert response.status_code == 502
    assert "scripted failure" in response.json()["error"]["message"]
    assert "Traceback" not in caplog.text and "scripted failure" in caplog.text


async def test_the_api_key_is_required_except_for_healthz_and_never_logged(qa, caplog) -> None:
    client = client_for([qa], api_key="s3cret-key")
    with caplog.at_level(logging.INFO, logger="promptgym.serve"):
        assert client.post("/v1/programs/qa/predict", json={"question": "q"}).status_code == 401
        assert client.get("/healthz").status_code == 200
        ok = client.post("/v1/programs/qa/predict", json={"question": "q"}, headers={"Authorization": "Bearer s3cret-key"})
        assert client.post("/v1/programs/qa/predict", json={"question": "q"},
                           headers={"X-API-Key": "s3cret-key"}).status_code == 200
    assert ok.status_code == 200
    assert "s3cret-key" not in caplog.text


async def test_logs_leave_inputs_out_unless_asked(qa, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="promptgym.serve"):
        client_for([qa]).post("/v1/programs/qa/predict", json={"question": "private words"})
    assert "POST /v1/programs/qa/predict 200" in caplog.text and "lm_calls=1" in caplog.text
    assert "private words" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="promptgym.serve"):
        client_for([qa], log_inputs=True).post("/v1/programs/qa/predict", json={"question": "private words"})
    assert "private words" in caplog.text


async def test_a_full_queue_answers_429_and_accepted_requests_all_finish() -> None:
    program = await qa_program(delay_s=0.3)
    app = create_app([program], settings=ServeSettings(concurrency=1, queue=1))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        responses = await asyncio.gather(*(client.post("/v1/programs/qa/predict", json={"question": f"q{i}"})
                                           for i in range(4)))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200, 200, 429, 429]
    busy = next(response for response in responses if response.status_code == 429)
    assert busy.headers["retry-after"] == "1" and "busy" in busy.json()["error"]["message"]
    answered = sorted(response.json()["answer"] for response in responses if response.status_code == 200)
    assert len(set(answered)) == 2 and all(answer.startswith("Q") for answer in answered)


async def test_programs_loaded_together_share_one_language_model(tmp_path) -> None:
    for name in ("first", "second"):
        program = await qa_program(name=name, language_model=ScriptedLanguageModel(responses=[{"answer": "a"}]))
        program.save(str(tmp_path / f"{name}.json"))
    served = load_programs([tmp_path / "first.json", tmp_path / "second.json"])
    models = {id(module.language_model) for entry in served.values() for module in entry.program.modules
              if hasattr(module, "language_model")}
    assert sorted(served) == ["first", "second"] and len(models) == 1


async def test_two_programs_with_one_name_are_refused_with_how_to_rename(tmp_path) -> None:
    program = await qa_program(name="same", language_model=shouting_model())
    program.save(str(tmp_path / "a.json"))
    program.save(str(tmp_path / "b.json"))
    with pytest.raises(ValueError, match="NAME=FILE"):
        load_programs([tmp_path / "a.json", tmp_path / "b.json"])
    assert sorted(load_programs([tmp_path / "a.json", tmp_path / "b.json"], names=[None, "other"])) == ["other", "same"]


async def test_an_answer_the_model_stopped_at_max_tokens_is_marked_truncated() -> None:
    def respond(request):
        question = last_user_json(request)["question"]
        return LMResponse(content=json.dumps({"answer": question.upper()}), prompt_tokens=5, completion_tokens=48,
                          finish_reason="length" if question == "long" else "stop")

    client = client_for([await qa_program(language_model=ScriptedLanguageModel(respond=respond))])
    cut = client.post("/v1/programs/qa/predict", json={"question": "long"})
    whole = client.post("/v1/programs/qa/predict", json={"question": "short"})
    assert cut.status_code == whole.status_code == 200
    assert cut.headers["x-promptgym-truncated"] == "1" and "x-promptgym-truncated" not in whole.headers
    chat = {"model": "qa", "messages": [{"role": "user", "content": json.dumps({"question": "long"})}]}
    assert client.post("/v1/chat/completions", json=chat).json()["choices"][0]["finish_reason"] == "length"
    streamed = client.post("/v1/chat/completions", json={**chat, "stream": True}).text
    events = [json.loads(line.removeprefix("data: ")) for line in streamed.splitlines()
              if line.startswith("data: {")]
    assert [event["choices"][0]["finish_reason"] for event in events if event["choices"]][-1] == "length"
