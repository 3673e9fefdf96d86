"""Bad input and dead servers at the CLI: clear errors (exit 2, naming file, key or line), never a traceback."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.core.local_server import free_port
from promptgym.runs.folder import RunFolder
from tests.cli.helpers import WORDS, only_run, served_config, write_config
from tests.lm.fake_openai_server import FakeOpenAIServer

runner = CliRunner()


def train(*args: str, input: str | None = None):
    return runner.invoke(app, ["train", *args], input=input)


def assert_clear(result, *words: str, code: int = 2) -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    flat = " ".join(result.output.split())
    for word in words:
        assert word in flat, (word, result.output)


def test_env_file_masks_secrets_only_and_the_run_folder_stays_usable(workdir: Path, monkeypatch) -> None:
    secret = "sk-live-abcdef123456"
    (workdir / ".env").write_text(f"OPENAI_API_KEY={secret}\nDEBUG=true\nMODE=validation\nN=2\nREGION=test\n")
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder")  # restored after the test (the env file sets it)
    config = write_config(workdir)
    config.write_text(config.read_text().replace("[job]", '[model]\napi_key_env = "OPENAI_API_KEY"\n[job]'))
    result = train("-c", str(config), "--env-file", ".env", "--yes")
    assert result.exit_code == 0, result.output
    run = only_run(workdir)
    saved = tomllib.loads((run.path / "config.toml").read_text())  # still TOML: no key, no `true` masked
    assert saved["model"]["cache"] is True and saved["training"]["epochs"] == 2
    assert any(e.get("split") == "validation" for e in run.events() if e["event"] == "evaluated")
    for path in [*run.path.rglob("*")]:
        if path.is_file() and path.suffix in (".json", ".jsonl", ".toml", ".md", ".csv"):
            assert secret not in path.read_text(), path
    assert secret not in result.output
    run.update_status(status="interrupted")
    resumed = train("--resume", run.id, "--yes")
    assert resumed.exit_code == 0, resumed.output
    assert run.status()["status"] == "completed"



@pytest.mark.parametrize("fault", [(401, '{"error": "Incorrect API key"}'), (403, '{"error": "forbidden"}')])
def test_a_refused_key_stops_the_run_before_it_starts(workdir: Path, fault) -> None:
    with FakeOpenAIServer(lambda body: "{}", fault=lambda body, n: fault) as server:
        result = train("-c", str(served_config(workdir, server.url)), "--yes")
        assert server.requests == []  # nothing but the models check
    assert_clear(result, "model openai/fake", f"{server.url}/models answered HTTP {fault[0]}", "API key was refused")
    assert not (workdir / "runs").exists()


@pytest.mark.parametrize("api_base", ["http://127.0.0.1:{port}/v1", "http://no-such-host.invalid/v1"])
def test_a_server_that_cannot_be_reached_stops_the_run_before_it_starts(workdir: Path, api_base: str) -> None:
    url = api_base.format(port=free_port())
    result = train("-c", str(served_config(workdir, url)), "--yes")
    assert_clear(result, "model openai/fake", f"can't reach {url}")
    assert not (workdir / "runs").exists()


def test_a_run_where_every_call_fails_ends_failed_with_the_count(workdir: Path) -> None:
    with FakeOpenAIServer(lambda body: "{}", fault=lambda body, n: (200, "<html>proxy error</html>")) as server:
        result = train("-c", str(served_config(workdir, server.url)), "--yes")
    assert_clear(result, "failed", "every validation example failed in the baseline evaluation (3 of 3)",
                 "not JSON", code=1)
    run = only_run(workdir)
    status = run.status()
    assert status["status"] == "failed" and status["failures"]["baseline"] == 3
    summary = (run.path / "summary.md").read_text()
    assert "Failed examples: baseline 3 of 3" in summary and "3 failed" in summary


def test_the_summary_of_a_good_run_states_its_failures_too(workdir: Path) -> None:
    assert train("-c", str(write_config(workdir)), "--yes").exit_code == 0
    summary = (only_run(workdir).path / "summary.md").read_text()
    assert "- Failed examples: baseline 0 of 3, training 0, best 0 of 3" in summary


def config_with(workdir: Path, old: str, new: str) -> Path:
    config = write_config(workdir)
    assert old in config.read_text()
    config.write_text(config.read_text().replace(old, new))
    return config


def test_a_config_that_is_not_utf8_names_its_line(workdir: Path) -> None:
    config = write_config(workdir)
    config.write_bytes(config.read_bytes() + b"\n# caf\xe9\n")
    lines = config.read_bytes().count(b"\n")
    assert_clear(train("-c", str(config), "--dry-run"), f"run.toml: line {lines}: not UTF-8 text (byte 0xe9)")


@pytest.mark.parametrize(("old", "new", "words"), [
    ('factory = "tests.cli.helpers:build_program"', 'factory = "tests.cli.helpers:not_a_program"',
     ["program.factory: tests.cli.helpers:not_a_program returned int, expected a promptgym Program"]),
    ('factory = "tests.cli.helpers:build_program"', 'factory = "tests.cli.helpers:raising_factory"',
     ["program.factory: tests.cli.helpers:raising_factory() raised RuntimeError: no program today"]),
    ('factory = "tests.cli.helpers:build_program"', 'factory = "tests.cli.helpers:build_program"\nfactory_args = { colour = 1 }',
     ["program.factory: tests.cli.helpers:build_program(colour=1) raised TypeError", "colour"]),
    ("[job]", '[model]\nname = ""\n[job]', ["model.name: expected a model string"]),
    ("[job]", '[model]\napi_base = "ftp://127.0.0.1/v1"\n[job]', ["model.api_base: expected an http(s) URL"]),
    ("seed = 0", "seed = -1", ["job.seed: Input should be greater than or equal to 0"]),
])
def test_config_mistakes_are_clear_errors(workdir: Path, old: str, new: str, words: list[str]) -> None:
    assert_clear(train("-c", str(config_with(workdir, old, new)), "--dry-run"), *words)


def test_dataset_arguments_out_of_range_name_the_key(workdir: Path) -> None:
    config = workdir / "dates.toml"
    config.write_text('[program.generator]\n[data]\ndataset = "dates"\ndataset_args = { n_train = -5 }\n')
    assert_clear(train("-c", str(config), "--dry-run"), "data.dataset_args: n_train must be a non-negative int, got -5")


def write_rows(workdir: Path, name: str, content: bytes) -> Path:
    (workdir / name).write_bytes(content)
    return config_with(workdir, f'train = "{workdir / "train.jsonl"}"', f'train = "{workdir / name}"')


def jsonl(count: int = 12) -> bytes:
    return "".join(json.dumps({"prompt": w, "label": w.upper()}) + "\n" for w in WORDS[:count]).encode()


def test_data_files_with_a_byte_order_mark_are_read(workdir: Path) -> None:
    result = train("-c", str(write_rows(workdir, "bom.jsonl", b"\xef\xbb\xbf" + jsonl())), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "train 9, validation 3" in result.output
    csv_rows = "prompt,label\n" + "".join(f"{w},{w.upper()}\n" for w in WORDS[:8])
    result = train("-c", str(write_rows(workdir, "bom.csv", b"\xef\xbb\xbf" + csv_rows.encode())), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "train 6, validation 2" in result.output


@pytest.mark.parametrize(("name", "content", "words"), [
    ("latin1.jsonl", jsonl() + '{"prompt": "café", "label": "X"}\n'.encode("latin-1"),
     ["data.train:", "latin1.jsonl, line 13: not UTF-8 text (byte 0xe9)"]),
    ("empty.jsonl", b"", ["data.train:", "empty.jsonl: no examples in the file"]),
    ("broken.jsonl.gz", b"not gzip at all", ["data.train:", "broken.jsonl.gz: can't be read (BadGzipFile"]),
])
def test_unreadable_data_files_are_clear_errors(workdir: Path, name: str, content: bytes, words: list[str]) -> None:
    assert_clear(train("-c", str(write_rows(workdir, name, content)), "--dry-run"), *words)


def test_runs_show_and_watch_survive_a_corrupt_run_folder(workdir: Path) -> None:
    assert train("-c", str(write_config(workdir)), "--yes").exit_code == 0
    run = only_run(workdir)
    with run.events_path.open("a") as handle:
        handle.write("{broken\n")
    watched = runner.invoke(app, ["runs", "watch", run.id])
    lines = len(run.events_path.read_text().splitlines())
    assert_clear(watched, f"events.jsonl line {lines} is not a JSON event; skipped", f"run {run.id}: completed", code=0)
    (run.path / "run.json").write_text("{not json")
    assert_clear(runner.invoke(app, ["runs", "show", run.id]), "run.json: line 1, column 2: invalid JSON")


def test_help_and_runs_list_fit_a_terminal(workdir: Path) -> None:
    help_text = runner.invoke(app, ["train", "--help"]).output
    assert "--dry-run" in help_text and "<bool>" not in help_text
    long_name = "a-rather-long-run-name-for-this-test"
    assert train("-c", str(config_with(workdir, 'name = "test-run"', f'name = "{long_name}"')), "--yes").exit_code == 0
    run_id = only_run(workdir).id
    listed = runner.invoke(app, ["runs", "list"], terminal_width=80)
    assert run_id in listed.output and "completed" in listed.output
    assert RunFolder(workdir / "runs" / run_id).status()["status"] == "completed"


def test_a_broken_response_cache_is_one_warning_on_screen_not_failed_examples(workdir: Path, isolated_cache: Path) -> None:
    (isolated_cache / "responses.sqlite").write_bytes(b"this is not a database" * 100)
    with FakeOpenAIServer(lambda body: json.dumps({"answer": "x"})) as server:
        config = served_config(workdir, server.url)
        config.write_text(config.read_text().replace("cache = false", "cache = true"))
        result = train("-c", str(config), "--yes")
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert flat.count(f"warning: response cache {isolated_cache / 'responses.sqlite'} can't be used") == 1
    run = only_run(workdir)
    assert run.status()["status"] == "completed"
    assert not [event for event in run.events() if event["event"] == "example_failed"]
