"""``promptgym export-sft-data``: distil a trained program's successful runs into chat JSONL for SFT.

    promptgym export-sft-data --run RUN_ID -o distilled.jsonl            # a finished prompt-learning run
    promptgym export-sft-data -c dates.toml --program best.json -o d.jsonl --min-reward 1.0
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

import typer

from promptgym.cli.common import EXIT_FAILED, console, fail, secret_masker
from promptgym.cli.config import ConfigError, load_config, read_toml, validate_config
from promptgym.cli.build import build_run_plan
from promptgym.cli.flows import flow_for
from promptgym.runs.folder import RunFolder, default_runs_dir
from promptgym.core.atomic import read_json
from promptgym.training.sft_export import check_min_reward

SPLITS = ("train", "validation", "test")


def export_sft_data_command(
    output: Path = typer.Option(..., "--output", "-o", help="The JSONL file to write."),
    run_id: Optional[str] = typer.Option(None, "--run", help="A finished prompt-learning run: its config and best program."),
    config: list[str] = typer.Option(None, "--config", "-c", metavar="FILE", help="A prompt_learning TOML config."),
    program_file: Optional[Path] = typer.Option(None, "--program", help="A saved program whose learned variables "
                                                "(instructions, demonstrations) to use (default: the run's best_program.json)."),
    min_reward: float = typer.Option(1.0, "--min-reward", help="Keep the runs that earn at least this reward."),
    split: str = typer.Option("train", "--split", help="Which examples to run: train, validation or test."),
    with_demonstrations: bool = typer.Option(False, "--with-demonstrations",
                                             help="Keep the few-shot demonstrations in the messages."),
    env_file: Optional[str] = typer.Option(None, "--env-file", help=".env file with secrets (never printed)."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where run folders are (default ./runs)."),
) -> None:
    """Write SFT rows made of the messages a program's Generators send and the answers that earned the reward."""
    if split not in SPLITS:
        fail(f"--split: expected one of {', '.join(SPLITS)}, got {split!r}")
    try:
        check_min_reward(min_reward)
    except ValueError as error:
        fail(f"--min-reward: {str(error).split(': ', 1)[1]}")
    if output.is_dir():
        fail(f"--output: {output} is a directory; give the JSONL file to write (e.g. {output / 'distilled.jsonl'})")
    if program_file is not None and not program_file.is_file():
        fail(f"--program: no such file: {program_file}")
    if (run_id is None) == (not config):
        fail("give either --run RUN_ID or --config FILE")
    masker = secret_masker(env_file)
    try:
        if run_id is not None:
            run = RunFolder.open(runs_dir or default_runs_dir(), run_id)
            job_config = validate_config(read_toml(run.path / "config.toml"), str(run.path / "config.toml"))
            program_file = program_file or run.path / "best_program.json"
        else:
            job_config = load_config(config)
        if not flow_for(job_config.job.type).exports_sft_data:
            raise ConfigError(f"job.type {job_config.job.type!r}: export-sft-data distils a prompt_learning program")
        job = asyncio.run(build_run_plan(job_config))
    except (ConfigError, FileNotFoundError) as error:
        fail(masker.mask(str(error)))
    program = job.program  # the config's program and models, with the learned variables of the saved one
    if program_file is not None:
        try:
            saved = read_json(program_file)
            variables = saved.get("variables") if isinstance(saved, dict) else None
            if not isinstance(variables, dict):
                raise ValueError(f"expected a saved program: a JSON object whose 'variables' is an object, got "
                                 f"{type(variables).__name__ if isinstance(saved, dict) else type(saved).__name__}")
            program.set_variables(variables, source=str(program_file))
        except (OSError, KeyError, TypeError, ValueError) as error:
            fail(f"--program: {program_file}: {error}")
    program.compile(reward=job.reward)
    data = job.data
    x, y = {"train": (data.x_train, data.y_train), "validation": (data.x_val, data.y_val),
            "test": (data.x_test, data.y_test)}[split]
    if x is None or not len(x):
        fail(f"--split {split}: the config has no {split} examples")
    report = asyncio.run(program.export_sft_data(x, y, str(output), min_reward=min_reward,
                                                 with_demonstrations=with_demonstrations))
    console.print(masker.mask(str(report)), markup=False, soft_wrap=True)
    console.print(f"mean reward {report.mean_reward:.3f}; rows per Generator: {report.rows_per_module}", markup=False)
    if report.rows == 0:
        fail(f"no run earned --min-reward {min_reward:g}: {output} has no rows to fine-tune on (lower --min-reward, "
             "or export a program that scores better)", EXIT_FAILED)
    console.print(f"fine-tune on it: [sft] train_file = \"{output}\"", markup=False)
