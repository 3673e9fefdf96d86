"""`promptgym runs stop` signals the run's own process only, never whatever now holds its pid (issue 27, item 1)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from promptgym.cli.commands.runs import effective_status
from promptgym.cli.main import app
from promptgym.runs.process_identity import is_same_process, process_identity
from promptgym.runs.folder import RunFolder

runner = CliRunner()


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen]:
    """Some other program of the user's, which got the pid a killed run left in its run.json."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def running_run(workdir: Path, **status: Any) -> RunFolder:
    run = RunFolder.create(workdir / "runs", "stale")
    run.update_status(status="running", job_type="sft", **status)
    return run


def test_a_reused_pid_is_left_alone_and_the_run_is_marked(workdir: Path, bystander: subprocess.Popen) -> None:
    identity = process_identity(bystander.pid)
    assert identity is not None and is_same_process(identity)
    stale = {**identity, "started": "ticks:1"}  # the run's worker started at another moment: another process
    run = running_run(workdir, pid=bystander.pid, process=stale)
    result = runner.invoke(app, ["runs", "stop", run.id])
    assert result.exit_code == 1
    assert "is gone" in result.output and f"pid {bystander.pid}" in result.output and "--resume" in result.output
    time.sleep(0.2)
    assert bystander.poll() is None, "runs stop killed an unrelated process"
    assert run.status()["status"] == "interrupted" and run.status()["pid"] is None
    listed = runner.invoke(app, ["runs", "list"])
    assert "interrupted" in listed.output


def test_a_pid_recorded_without_its_identity_is_not_signalled(workdir: Path, bystander: subprocess.Popen) -> None:
    run = running_run(workdir, pid=bystander.pid)
    result = runner.invoke(app, ["runs", "stop", run.id])
    assert result.exit_code == 1 and "not signalled" in result.output and f"kill {bystander.pid}" in result.output
    time.sleep(0.2)
    assert bystander.poll() is None


def test_the_run_s_own_process_gets_sigterm(workdir: Path, bystander: subprocess.Popen) -> None:
    run = running_run(workdir, pid=bystander.pid, process=process_identity(bystander.pid))
    result = runner.invoke(app, ["runs", "stop", run.id])
    assert result.exit_code == 0 and "sent SIGTERM" in result.output
    assert bystander.wait(timeout=10) == -15


def test_a_run_that_ends_between_reading_its_status_and_looking_for_its_process_is_not_called_killed(
        workdir: Path, bystander: subprocess.Popen) -> None:
    identity = process_identity(bystander.pid)
    run = running_run(workdir, pid=bystander.pid, process=identity)
    read_while_running = run.status()
    run.update_status(status="completed", pid=None)  # the worker finishes ...
    bystander.kill()
    bystander.wait()                                  # ... and exits before `runs watch` looks for it
    assert effective_status(read_while_running, run) == "completed"
    assert effective_status(read_while_running) == "stopped (killed?)"  # without the folder: the old answer
    run.update_status(status="running", pid=identity["pid"])
    assert effective_status(run.status(), run) == "stopped (killed?)"  # gone while run.json says running
