"""The weight flows' CLI under bad input and faults (issue 27 items 5-8, 10, 13, 14), on the tiny in-test model.

Each test failed before its fix (a traceback, a run that trained and then failed, a silent fresh start, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder, list_runs
from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.lm.errors import LMConfigurationError
from promptgym.lm.finetuned_models import FineTunedModel, register_finetuned_model
from promptgym.lm.language_model import LanguageModel
from tests.finetune import test_rl_cli
from tests.finetune.test_rl_cli import write_config as write_rl_config
from tests.finetune.test_sft_cli import write_config
from tests.finetune.tiny_model import capital_rows

runner = CliRunner()
workdir = test_rl_cli.workdir
"""The RL CLI tests' folder: its runs dir, the repository on PYTHONPATH for the launched app, no fault variables."""


def only_run(workdir: Path) -> RunFolder:
    return RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])


def test_sft_resume_without_last_json_continues_from_the_newest_complete_checkpoint(
        workdir: Path, tiny_model: Path, fake_export, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgym.runs import stop as loop

    @contextlib.contextmanager
    def ctrl_c_at_once(stop=None):
        stop = loop.StopRequest()
        stop.request("Ctrl-C")  # as if pressed during the first step: a checkpoint after step 1
        yield stop

    config = write_config(workdir, tiny_model, capital_rows(16))
    with monkeypatch.context() as patch:
        patch.setattr(loop, "stop_on_signals", ctrl_c_at_once)
        first = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert first.exit_code == 130, first.output
    run = only_run(workdir)
    done = run.status()["steps_done"]
    assert done == 1
    (run.path / "checkpoints" / "last.json").unlink()  # lost: a disk error, a hand clean-up
    resumed = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert resumed.exit_code == 0, resumed.output
    assert (f"after step {done} (checkpoints/last.json is missing; resuming from checkpoints/step_{done:06d}, "
            "the newest complete checkpoint)") in resumed.output
    steps = [event["step"] for event in run.events() if event["event"] == "sft_step"]
    assert steps == [1, 2, 3]  # step 1 once: nothing redone, nothing started over
    assert run.status()["status"] == "completed"


def test_a_taken_model_name_is_refused_before_the_model_loads(workdir: Path, tiny_model: Path) -> None:
    register_finetuned_model(FineTunedModel(name="taken", base="local/smollm2-135m-instruct", run="/elsewhere"))
    config = write_config(workdir, tiny_model, capital_rows(8), extra='model_name = "taken"')
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 2, result.output
    assert "sft.model_name: a fine-tuned model named 'taken' already exists" in result.output
    assert "preparing" not in result.output and list_runs(workdir / "runs") == []
    rl = write_rl_config(workdir, tiny_model, rl='eval_every = 0\nmodel_name = "taken"')
    result = runner.invoke(app, ["train", "-c", str(rl), "--yes"])
    assert result.exit_code == 2 and "rl.model_name: a fine-tuned model named 'taken'" in result.output
    assert "task app" not in result.output  # refused before the app started


@pytest.mark.parametrize("case", ["latin1", "directory", "fake_gguf", "no_model_type", "no_targets"])
def test_bad_weight_inputs_are_one_clear_line(workdir: Path, tiny_model: Path, case: str) -> None:
    rows, model, extra = capital_rows(8), str(tiny_model), ""
    config = write_config(workdir, tiny_model, rows)
    expected = ""
    if case == "latin1":
        with (workdir / "train.jsonl").open("ab") as handle:
            handle.write(b'{"prompt": "caf\xe9", "completion": "x"}\n')
        expected = "train.jsonl:9: not UTF-8 text (byte 0xe9 at column 16)"
    elif case == "directory":
        (workdir / "adir").mkdir()
        config.write_text(config.read_text().replace('train_file = "train.jsonl"', 'train_file = "adir"'))
        expected = "adir: is a directory; expected a chat JSONL file"
    elif case == "fake_gguf":
        (workdir / "model.gguf").write_text("not a model")
        model, expected = str(workdir / "model.gguf"), "not a GGUF file"
    elif case == "no_model_type":
        (workdir / "hf").mkdir()
        (workdir / "hf" / "config.json").write_text(json.dumps({"hidden_size": 8}))
        model, expected = str(workdir / "hf"), "names no model_type"
    else:
        extra, expected = "target_modules = []", "lora.target_modules: empty: no layer would be trained"
    text = config.read_text().replace(f'base_model = "{tiny_model}"', f'base_model = "{model}"')
    config.write_text(text.replace("[sft.lora]\n", f"[sft.lora]\n{extra}\n"))
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output
    assert list_runs(workdir / "runs") == []


def test_the_preview_promises_no_evaluation_without_validation_rows(workdir: Path, tiny_model: Path) -> None:
    config = write_config(workdir, tiny_model, capital_rows(8))
    config.write_text(config.read_text().replace("validation_split = 0.25", "validation_split = 0"))
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "no evaluation (0 validation rows" in result.output and "eval before and after" not in result.output


def test_malformed_env_file_lines_name_the_file_and_line(workdir: Path, tiny_model: Path) -> None:
    config = write_config(workdir, tiny_model, capital_rows(8))
    (workdir / "bad.env").write_text("GOOD=1\nJUSTAWORD\n=novalue-secret\n")
    result = runner.invoke(app, ["train", "-c", str(config), "--env-file", "bad.env", "--dry-run"])
    assert result.exit_code == 2
    assert "bad.env:2: JUSTAWORD has no value" in result.output and "bad.env:3: not a KEY=value line" in result.output
    assert "novalue-secret" not in result.output


def test_a_task_app_file_without_app_is_one_line_not_the_launcher_s_traceback(workdir: Path, tiny_model: Path) -> None:
    (workdir / "noapp.py").write_text("x = 1\n")
    config = write_rl_config(workdir, tiny_model, data=f'task_app = "{workdir / "noapp.py"}"')
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 2
    assert "defines no `app`" in result.output and "Traceback" not in result.output


def test_a_task_app_that_dies_mid_run_is_named_with_its_exit_code_and_log(workdir: Path, tiny_model: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_EXIT_SEEDS", "0,1,2,3,4,5,6,7,200,201,202")
    result = runner.invoke(app, ["train", "-c", str(write_rl_config(workdir, tiny_model)), "--yes"])
    assert result.exit_code == 1, result.output
    assert "task app tiny_task_app.py exited with code 3 during the run" in result.output
    assert "its log: " in result.output and ".task_apps" in result.output


def test_a_model_rebuilt_elsewhere_reads_its_key_from_the_variable_api_key_env_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "sk-in-this-process")
    model = LanguageModel(model="openai/gpt-x", api_base="http://127.0.0.1:9/v1", api_key="sk-in-this-process",
                          api_key_env="MY_SERVER_KEY")
    saved = serialize_object(model)
    assert "sk-in-this-process" not in json.dumps(saved) and saved["config"]["api_key_env"] == "MY_SERVER_KEY"
    monkeypatch.setenv("MY_SERVER_KEY", "sk-on-the-worker")  # a Ray worker's environment
    rebuilt = deserialize_object(saved, expected="language model")
    assert rebuilt.engine.api_key == "sk-on-the-worker"
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(LMConfigurationError, match=f"MY_SERVER_KEY .* is not set in this process \\(pid {os.getpid()}"):
        deserialize_object(saved, expected="language model").engine


def test_gguf_conversion_shows_promptgym_s_progress_not_transformers_bar(capsys: pytest.CaptureFixture) -> None:
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from promptgym.finetune.base_model import BaseModelSource, gguf_progress

    source = BaseModelSource(name="local/x", gguf=Path("/models/x.gguf"), hf_dir=Path("/models/hf/x"), fingerprint="")
    with gguf_progress(source):
        items = list(gguf_utils.tqdm([1, 2, 3], desc="Converting and de-quantizing GGUF tensors..."))
    assert items == [1, 2, 3]
    captured = capsys.readouterr()
    assert "Converting and de-quantizing" not in captured.out + captured.err
