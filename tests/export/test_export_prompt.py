"""export-prompt: the exported messages are what the Generator sends; every format carries them; --check agrees."""

from __future__ import annotations

import json

import jinja2
import pytest
from typer.testing import CliRunner

import promptgym as pg
from promptgym.cli.main import app as cli
from promptgym.core.local_server import LocalServer
from promptgym.export import INPUT_SLOT, check_export, export_prompts, render
from promptgym.export.check import http_caller
from promptgym.lm.http_client import HttpClient
from promptgym.serving import create_app
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.serving.programs import Answer, Question, qa_program


def shouting(request) -> dict:
    return {"answer": last_user_json(request)["question"].upper()}


async def trained_program(lm=None) -> pg.Program:
    lm = lm or ScriptedLanguageModel(respond=shouting)
    inputs = pg.Input(data_model=Question)
    generator = pg.Generator(data_model=Answer, language_model=lm, instructions="Shout {the} answer.",
                             examples=[({"question": "hi", "context": ""}, {"answer": "HI"})])
    return pg.Program(inputs=inputs, outputs=await generator(inputs), name="qa")


async def test_filled_messages_are_exactly_what_the_generator_sends() -> None:
    lm = ScriptedLanguageModel(respond=shouting)
    program = await trained_program(lm)
    [exported] = export_prompts(program)
    question = {"question": "naïve <b>&", "context": "c"}
    await program(Question(**question))
    sent = lm.requests[-1]
    assert exported.messages[-1] == {"role": "user", "content": INPUT_SLOT}
    assert exported.fill(question) == sent.messages
    assert exported.request(question)["response_format"]["json_schema"]["schema"] == sent.schema
    assert exported.request(question)["max_tokens"] == sent.max_tokens


async def test_openai_json_and_messages_formats_hold_the_same_messages() -> None:
    program = await trained_program()
    exports = export_prompts(program)
    body = json.loads(render(exports, "openai-json", "qa"))
    document = json.loads(render(exports, "messages", "qa"))
    assert body["messages"] == document["generators"][0]["messages"] == exports[0].messages
    assert body["model"] == "test" and body["response_format"]["type"] == "json_schema"
    assert document["input_slot"] == INPUT_SLOT


async def test_the_jinja_template_renders_the_same_conversation() -> None:
    program = await trained_program()
    [exported] = export_prompts(program)
    question = {"question": "what {{ is }} {% this %}?", "context": ""}
    text = jinja2.Template(render([exported], "jinja", "qa")).render(input_json=json.dumps(question, ensure_ascii=False))
    blocks = [block.split("<|im_end|>")[0] for block in text.split("<|im_start|>")[1:]]
    rendered = [dict(zip(("role", "content"), block.split("\n", 1))) for block in blocks[:-1]]
    assert rendered == exported.fill(question)
    assert blocks[-1].strip() == "assistant"  # the last block opens the answer
    assert "{the}" in rendered[0]["content"]


async def test_check_scores_the_exported_prompt_next_to_the_program() -> None:
    program = await trained_program()
    direct = ScriptedLanguageModel(respond=shouting, model="scripted/direct")
    x = [{"question": f"q{i}", "context": ""} for i in range(12)]
    y = [{"answer": f"Q{i}"} if i % 4 else {"answer": "wrong label"} for i in range(12)]
    client = HttpClient(timeout=30)
    async with LocalServer(create_app([], models=[direct])) as url:
        report = await check_export(program, x, y, http_caller(f"{url}/v1", client=client), model="scripted/direct")
    await client.close()
    assert report.program.mean == report.export.mean == pytest.approx(9 / 12)
    assert report.agrees and report.paired.wins == report.paired.losses == 0
    assert direct.requests[0].schema is not None  # the exported response_format reached the model


async def test_check_sees_a_broken_export(monkeypatch) -> None:
    program = await trained_program()
    x = [{"question": f"q{i}", "context": ""} for i in range(20)]
    y = [{"answer": f"Q{i}"} for i in range(20)]

    async def lowercase_server(body: dict) -> str:  # a stack that answers differently from the program's model
        return json.dumps({"answer": json.loads(body["messages"][-1]["content"])["question"]})

    report = await check_export(program, x, y, lowercase_server)
    assert report.program.mean == 1.0 and report.export.mean == 0.0 and not report.agrees


async def test_cli_writes_a_format_and_names_a_bad_check_file(tmp_path) -> None:
    program = await qa_program()
    program.save(str(tmp_path / "qa.json"))
    runner = CliRunner()
    result = runner.invoke(cli, ["export-prompt", str(tmp_path / "qa.json"), "--format", "openai-json",
                                 "-o", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out.json").read_text())["messages"][-1]["content"] == INPUT_SLOT
    (tmp_path / "data.jsonl").write_text('{"question": "a", "answer": "A"}\n{"question": "b"}\n')
    result = runner.invoke(cli, ["export-prompt", str(tmp_path / "qa.json"), "--check", str(tmp_path / "data.jsonl")])
    assert result.exit_code == 2 and "data.jsonl:2: missing field(s) answer" in result.output
    result = runner.invoke(cli, ["export-prompt", str(tmp_path / "qa.json"), "--format", "yaml"])
    assert result.exit_code == 2 and "messages, openai-json, jinja" in result.output
