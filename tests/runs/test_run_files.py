"""The run skeleton's files, one writer each: run.json (StatusFile), events.jsonl (EventLog / EventWriter),
and a run folder written by an older promptgym, which must still read and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptgym.core.events import RunStarted
from promptgym.runs.checkpoints import usable_checkpoint
from promptgym.runs.events import EventLog, EventWriter
from promptgym.runs.folder import RunFolder, list_runs
from promptgym.runs.status import StatusFile


class Secret:
    def mask(self, text: str) -> str:
        return text.replace("sk-live-123", "sk****")

    def mask_data(self, value):
        return json.loads(self.mask(json.dumps(value)))


def test_the_status_file_merges_changes_and_stamps_them(tmp_path: Path) -> None:
    status = StatusFile(tmp_path / "run.json")
    assert status.read() == {}
    status.update(status="running", steps_done=0)
    after = status(steps_done=3, path=tmp_path)  # what a weight run's status= sink calls
    assert after["status"] == "running" and after["steps_done"] == 3 and after["path"] == str(tmp_path)
    assert json.loads((tmp_path / "run.json").read_text()) == after and "updated" in after
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically: no staging file left


def test_the_event_writer_masks_cleans_and_feeds_listeners(tmp_path: Path) -> None:
    seen: list[dict] = []
    log = EventLog(tmp_path / "events.jsonl", stamp=lambda: {"session_lm_calls": 7})
    writer = EventWriter(log, Secret(), [seen.append])
    writer.emit(RunStarted(run_id="sk-live-123", resume=False))
    writer.write({"event": "step", "reward": float("nan")})
    events, next_line = log.read()
    assert [event["event"] for event in events] == ["run_started", "step"] and next_line == 2
    assert events[0]["run_id"] == "sk****" and events[1]["reward"] is None
    assert all(event["session_lm_calls"] == 7 for event in events)
    assert [record["event"] for record in seen] == ["run_started", "step"] and "sk-live" not in json.dumps(seen)


def test_a_half_written_line_is_never_glued_to_the_next_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "step", "step": 1}\n{"event": "st')  # a kill mid-write
    log = EventLog(path)
    log.append_event({"event": "run_started"})
    bad: list[int] = []
    events, _ = log.read(on_bad_line=lambda number, text: bad.append(number))
    assert [event["event"] for event in events] == ["step", "run_started"] and bad == [2]


def test_an_older_run_folder_still_lists_updates_and_resumes(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "20250101-000000-old-ab12"
    (folder / "checkpoints").mkdir(parents=True)
    # run.json as promptgym wrote it before job types and process identities
    (folder / "run.json").write_text(json.dumps({"id": folder.name, "name": "old", "status": "interrupted",
                                                 "created": 1.0, "epochs_done": 1}))
    (folder / "events.jsonl").write_text('{"time": 1.0, "event": "run_started", "run_id": "x"}\n')
    (folder / "checkpoints" / "epoch_1.json").write_text(json.dumps({"variables": {}, "compile": {}}))
    assert [status["id"] for status in list_runs(tmp_path / "runs")] == [folder.name]
    run = RunFolder.open(tmp_path / "runs", "old-ab12")
    run.update_status(status="running")
    assert run.status()["epochs_done"] == 1 and run.status()["status"] == "running"
    assert [event["event"] for event in run.events()] == ["run_started"]
    path, note = usable_checkpoint(folder / "checkpoints")
    assert path == folder / "checkpoints" / "epoch_1.json" and "last.json is missing" in note


def test_fit_refuses_a_run_dir_whose_run_completed(tmp_path: Path) -> None:
    from promptgym.training.fit_folder import open_run_folder

    run = RunFolder.at(tmp_path / "done", "done")
    assert run.status()["status"] == "created" and (tmp_path / "done" / "checkpoints").is_dir()
    assert open_run_folder(tmp_path / "done", "done")[1] is False  # no checkpoint yet: a fresh start
    run.update_status(status="completed")
    with pytest.raises(ValueError, match=r"run_dir=.*done.*completed.*give a new run_dir"):
        open_run_folder(tmp_path / "done", "done")
