"""`--executor` says where a run executes; `--backend`, its old name, still works (hidden) with one deprecation line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.execution import ExecutionError, executor_flag
from promptgym.cli.main import app
from tests.cli.helpers import write_config

runner = CliRunner()
DEPRECATED = "warning: --backend is deprecated, use --executor"


def dry_run(workdir: Path, *flags: str):
    return runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--dry-run", *flags], env={"COLUMNS": "200"})


def test_the_executor_flag_picks_where_the_run_executes(workdir: Path) -> None:
    here = dry_run(workdir)
    assert here.exit_code == 0, here.output
    assert "in this process (--executor local)" in here.output and DEPRECATED not in here.output
    ray = dry_run(workdir, "--executor", "ray", "--workers", "3")
    assert ray.exit_code == 0, ray.output
    assert "a local Ray instance on 127.0.0.1" in ray.output and "3 worker(s)" in ray.output
    assert DEPRECATED not in ray.output
    bad = dry_run(workdir, "--workers", "3")
    assert bad.exit_code == 2 and "--workers needs --executor ray or ray://HOST:PORT" in bad.output


def test_the_old_backend_flag_still_works_and_says_once_that_it_is_deprecated(workdir: Path) -> None:
    result = dry_run(workdir, "--backend", "ray", "--workers", "3")
    assert result.exit_code == 0, result.output
    assert "a local Ray instance on 127.0.0.1" in result.output and "3 worker(s)" in result.output
    assert result.output.count(DEPRECATED) == 1
    both = dry_run(workdir, "--executor", "ray", "--backend", "ray")
    assert both.exit_code == 2 and "--backend is the deprecated name of --executor: give only --executor" in both.output


def test_the_help_shows_executor_and_hides_backend() -> None:
    shown = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "--executor" in shown.output and "--backend" not in shown.output


def test_executor_flag_values() -> None:
    assert executor_flag(None, None) == "local"
    assert executor_flag("ray://10.0.0.5:10001", None) == "ray://10.0.0.5:10001"
    assert executor_flag(None, "ray") == "ray"
    with pytest.raises(ExecutionError, match="give only --executor"):
        executor_flag("local", "ray")
