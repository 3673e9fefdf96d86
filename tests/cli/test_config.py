"""Config validation: errors name the file, the key path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.cli.config import ConfigError, load_config, validate_config
from promptgym.cli.secrets import Masker, load_env_file
from promptgym.testing import qa_run_config

GOOD = {"program": {"generator": {}}, "data": {"dataset": "arithmetic"}}


def test_bad_value_names_key_path_and_expectation(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('[training]\nepochs = 0\n[job]\ntype = "dpo"\n[program.generator]\n[data]\ndataset = "arithmetic"\n')
    with pytest.raises(ConfigError) as error:
        load_config([config])
    message = str(error.value)
    assert f"{config}: training.epochs: Input should be greater than or equal to 1 (got 0)" in message
    assert "job.type: expected 'prompt_learning', 'sft' or 'rl' (got 'dpo')" in message


def test_unknown_key_and_missing_section() -> None:
    with pytest.raises(ConfigError, match=r"cfg: training\.epoch: unknown key"):
        validate_config({**GOOD, "training": {"epoch": 2}}, "cfg")
    with pytest.raises(ConfigError, match=r"needs the \[program\] section"):
        validate_config({"data": {"dataset": "arithmetic"}}, "cfg")
    with pytest.raises(ConfigError, match=r"data: set exactly one of dataset, train"):
        validate_config({"program": {"generator": {}}, "data": {"dataset": "x", "train": "a.jsonl"}}, "cfg")
    with pytest.raises(ConfigError, match=r"program: .*exactly one of path, factory"):
        validate_config({"program": {}, "data": {"dataset": "x"}}, "cfg")


def test_missing_file_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config([tmp_path / "nope.toml"])
    bad = tmp_path / "bad.toml"
    bad.write_text("[training\nepochs=1")
    with pytest.raises(ConfigError, match="bad.toml: invalid TOML"):
        load_config([bad])


def test_files_merge_overrides_win_and_paths_are_absolute(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('[program.generator]\n[data]\ntrain = "d/train.jsonl"\n[training]\nepochs = 3\n')
    extra = tmp_path / "extra.toml"
    extra.write_text("[training]\nepochs = 5\n")
    config = load_config([base, extra], {"model": "local/smollm2-135m-instruct", "examples": 4, "seed": 7})
    assert config.training.epochs == 5
    assert config.model.name == "local/smollm2-135m-instruct"
    assert config.data.examples == 4 and config.job.seed == 7
    assert config.data.train == str(tmp_path / "d" / "train.jsonl")
    switched = load_config([base], {"dataset": "arithmetic"})
    assert switched.data.dataset == "arithmetic" and switched.data.train is None


def test_sft_and_rl_validate() -> None:
    assert validate_config({"job": {"type": "sft"}, "sft": {"base_model": "m", "train_file": "t.jsonl"}}).job.type == "sft"
    with pytest.raises(ConfigError, match="rl job needs the \\[rl\\] section .* data.task_url .* data.task_app"):
        validate_config({"job": {"type": "rl"}, "rl": {"base_model": "m"}})
    with pytest.raises(ConfigError, match="rl.base_model: Field required"):
        validate_config({"job": {"type": "rl"}, "rl": {}, "data": {"task_url": "http://x"}})
    with pytest.raises(ConfigError, match=r"rl\.algorithm: expected 'grpo'"):
        validate_config({"job": {"type": "rl"}, "rl": {"base_model": "m", "algorithm": "ppo"}, "data": {"task_url": "http://x"}})
    with pytest.raises(ConfigError, match=r"rl\.group_size: Input should be greater than or equal to 2"):
        validate_config({"job": {"type": "rl"}, "rl": {"base_model": "m", "group_size": 1}, "data": {"task_app": "a.py"}})
    with pytest.raises(ConfigError, match=r"rl\.gradient_checkpointing: gradient_checkpointing is not available in RL"):
        validate_config({"job": {"type": "rl"}, "rl": {"base_model": "m", "gradient_checkpointing": True},
                         "data": {"task_app": "a.py"}})
    rl = validate_config({"job": {"type": "rl"}, "rl": {"base_model": "m"}, "data": {"task_app": "app.py"}})
    assert rl.rl.lora.dropout == 0.0 and rl.rl.group_size == 4 and rl.data.task_app == "app.py"
    for lora, dropout in (({"r": 8}, 0.0), ({"r": 8, "dropout": 0.1}, 0.1)):  # no SFT default through [rl.lora]
        section = validate_config({"job": {"type": "rl"}, "rl": {"base_model": "m", "lora": lora},
                                   "data": {"task_app": "app.py"}}).rl
        assert section.lora.dropout == dropout and section.lora.r == 8
    with pytest.raises(ConfigError, match="exactly one of dataset, train .*, task_url or task_app"):
        validate_config({"data": {"task_url": "http://x", "task_app": "a.py"}, "program": {"path": "p.json"}})


def test_env_file_values_are_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / ".env"
    env.write_text("MY_SERVICE_TOKEN=sk-very-secret-123\n")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "old")  # restored after the test
    masker = load_env_file(env, Masker())
    assert masker.mask("key sk-very-secret-123 used") == "key sk**** used"
    assert masker.mask_data({"a": ["sk-very-secret-123"]}) == {"a": ["sk****"]}
    with pytest.raises(FileNotFoundError, match="no such env file"):
        load_env_file(tmp_path / "missing.env")


async def test_call_estimate_is_capped_by_the_optimizer_budget() -> None:
    from promptgym.cli.build import build_run_plan
    from promptgym.cli.preview import estimate_lm_calls

    totals = []
    for params in ({}, {"max_metric_calls": 5}):
        config = validate_config({"program": {"generator": {}}, "optimizer": {"name": "randomfewshot", "params": params},
                                  "data": {"dataset": "arithmetic", "dataset_args": {"n_train": 20, "n_test": 10}}}, "cfg")
        estimate = estimate_lm_calls(await build_run_plan(config))
        totals.append(estimate["training runs"] + estimate["candidate scoring"])
    assert totals[0] > 5 and totals[1] == 5


def test_the_testing_config_loads_with_its_parts(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(qa_run_config(tmp_path / "train.jsonl", name="q", job="seed = 3",
                                  optimizer='name = "greedyoptimizer"', training="epochs = 4\nbatch_size = 2"))
    config = load_config([path])
    assert (config.job.name, config.job.seed, config.training.epochs, config.training.batch_size) == ("q", 3, 4, 2)
    assert config.data.train == str(tmp_path / "train.jsonl") and config.data.validation_split == 0.25
    assert config.program.generator.name == "answerer"
