"""One attempt of a run (RunAttempt, once RunSession): what it records; the old module path still imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.runs.attempt import RunAttempt
from promptgym.runs.folder import RunFolder


def test_an_attempt_records_its_start_and_how_it_ended(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path, "dates")
    attempt = RunAttempt(run, None, None, job_type="prompt_learning", resume=False)
    assert run.status()["status"] == "running" and run.status()["job_type"] == "prompt_learning"
    with pytest.raises(ValueError, match="boom"), attempt.ending():
        raise ValueError("boom")
    status = run.status()
    assert status["status"] == "failed" and status["error"] == "ValueError: boom" and status["pid"] is None
    assert [event["event"] for event in run.events()] == ["run_started", "run_finished"]


def test_the_old_module_and_class_name_are_deprecated_aliases() -> None:
    from promptgym.runs.stop import CancellingStop

    with pytest.warns(DeprecationWarning, match="runs.session.RunSession is deprecated: use RunAttempt from "
                                                "promptgym.runs.attempt"):
        from promptgym.runs.session import RunSession
    assert RunSession is RunAttempt
    with pytest.warns(DeprecationWarning, match="use CancellingStop from promptgym.runs.attempt"):
        from promptgym.runs.session import CancellingStop as old
    assert old is CancellingStop
