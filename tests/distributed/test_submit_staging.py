"""What goes into a submitted job's working directory (no Ray needed)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from promptgym.cli.config import load_config
from promptgym.cli.secrets import Masker
from promptgym.cli.commands.submit import LineMasker, SubmitError, entrypoint_command, job_secrets, stage_working_dir
from tests.cli.helpers import write_config


def masker_of(*values: str) -> Masker:
    masker = Masker()
    for value in values:
        masker.add(value)
    return masker


def test_staging_copies_the_data_and_points_the_config_at_it(tmp_path: Path) -> None:
    config = load_config([write_config(tmp_path)])
    staged = stage_working_dir(config, tmp_path / "job", secrets=masker_of("sk-never-seen"))
    raw = tomllib.loads((staged / "config.toml").read_text())
    assert raw["data"]["train"] == "files/train.jsonl"
    assert (staged / "files" / "train.jsonl").read_text() == (tmp_path / "train.jsonl").read_text()
    assert sorted(p.name for p in staged.rglob("*") if p.is_file()) == ["config.toml", "train.jsonl"]


def test_staging_refuses_a_secret_in_any_file_and_env_files(tmp_path: Path) -> None:
    config = load_config([write_config(tmp_path)])
    leaky = tmp_path / "settings.py"
    leaky.write_text("KEY = 'sk-live-123456'\n")
    with pytest.raises(SubmitError, match="settings.py contains a secret value"):
        stage_working_dir(config, tmp_path / "job1", include=[leaky], secrets=masker_of("sk-live-123456"))
    (tmp_path / ".env").write_text("KEY=x\n")
    with pytest.raises(SubmitError, match="env files never go into the job's files"):
        stage_working_dir(config, tmp_path / "job2", include=[tmp_path / ".env"])
    with pytest.raises(SubmitError, match="no such file"):
        stage_working_dir(config, tmp_path / "job3", include=[tmp_path / "missing.py"])


def test_job_secrets_are_the_env_file_and_the_named_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(tmp_path, extra="")
    path.write_text(path.read_text().replace("[job]", "[model]\nname = \"openai/x\"\napi_key_env = \"MY_API_KEY\"\n\n[job]"))
    monkeypatch.setenv("MY_API_KEY", "sk-from-shell-1")
    env = tmp_path / "job.env"
    env.write_text("OTHER=value-2\n")
    assert job_secrets(load_config([path]), str(env)) == {"OTHER": "value-2", "MY_API_KEY": "sk-from-shell-1"}


def test_entrypoint_runs_train_unattended_as_the_run_id() -> None:
    command = entrypoint_command("20260101-run-ab12", python="/opt/py/bin/python", runs_dir="/data/runs")
    assert command == ("/opt/py/bin/python -m promptgym.cli.main train --config config.toml --yes "
                       "--run-id 20260101-run-ab12 --runs-dir /data/runs")


def test_log_masking_catches_a_secret_split_across_chunks() -> None:
    lines = LineMasker(masker_of("secret-value-99"))
    out = lines.feed("key: secret-") + lines.feed("value-99 end\nnext secret-value") + lines.feed("-99") + lines.flush()
    assert out == "key: se**** end\nnext se****"
