"""Stop a real `promptgym train` process with SIGTERM in the middle of its run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from promptgym.runs.folder import RunFolder, list_runs


def sigterm_mid_run(config: Path, workdir: Path, event: str, timeout_s: float = 120) -> tuple[RunFolder, str]:
    """Run ``promptgym train -c config --yes`` in a child process, send it SIGTERM once its run folder logged an
    ``event`` event (e.g. ``"sft_step"``), check that it stopped as an interrupted run should (exit 130, no
    traceback, the resume command printed), and return that run and the output."""
    process = subprocess.Popen([sys.executable, "-m", "promptgym.cli.main", "train", "-c", str(config), "--yes"],
                               cwd=workdir, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        deadline = time.time() + timeout_s
        while f'"{event}"' not in "".join(p.read_text() for p in (workdir / "runs").glob("*/events.jsonl")):
            if process.poll() is not None:
                raise AssertionError(f"the run ended before any {event} event:\n{process.stdout.read()}")
            assert time.time() < deadline, f"no {event} event within {timeout_s:.0f} s"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output
    assert "Traceback" not in output and "promptgym train --resume" in output
    return RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"]), output
