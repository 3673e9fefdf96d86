"""Kills and resumes: SIGTERM / SIGINT / kill -9 in the middle of a run, then ``--resume`` until it completes.

The run talks to the fault server (slow mode, cache off), so the server's request count is the
true number of LM calls. Each kill reports whether the run survived (it completed; history has
each epoch once; run.json's LM calls equal the calls the server saw; its time covers every session)
and the work it lost (training steps run again, LM calls beyond an uninterrupted run's).
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import base_env, cli, write_files
from configs import GENERATOR_PROGRAM, config, files, served_model

EPOCHS = 4


@dataclass
class KillReport:
    name: str
    survived: bool
    steps_redone: int
    calls_lost: int
    notes: list[str] = field(default_factory=list)
    calls_uncounted: int = 0
    """LM calls the server answered that run.json doesn't count (in flight when a session stopped)."""

    def row(self) -> dict:
        return {"name": self.name, "survived": self.survived, "steps_redone": self.steps_redone,
                "calls_lost": self.calls_lost, "calls_uncounted": self.calls_uncounted,
                "notes": "; ".join(self.notes)[:400]}


@dataclass
class Reference:
    """The same run uninterrupted: the server's count, and how many of those the headroom check made."""

    calls: int
    headroom_calls: int


def kill_config(api_base: str) -> str:
    training = f"[optimizer]\nname = \"randomfewshot\"\n\n[training]\nepochs = {EPOCHS}\nbatch_size = 2\nminibatch_size = 2\n"
    return config(model=served_model(api_base, "cache = false\n"), program=GENERATOR_PROGRAM, training=training)


def start(folder: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(cli(*args), cwd=folder, env=base_env(folder), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def run_folder(folder: Path) -> Path | None:
    runs = list((folder / "runs").glob("*/run.json"))
    return runs[0].parent if runs else None


def events(run: Path) -> list[dict]:
    path = run / "events.jsonl"
    if not path.is_file():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def wait_for_steps(folder: Path, count: int, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        run = run_folder(folder)
        if run and sum(event.get("event") == "step" for event in events(run)) >= count:
            return
        time.sleep(0.02)
    raise TimeoutError(f"fewer than {count} steps after {timeout} s")


def steps_redone(run: Path) -> int:
    """Steps (epoch, step) run in a session after a session that had already finished them."""
    done: set[tuple[int, int]] = set()
    session: set[tuple[int, int]] = set()
    redone = 0
    for event in events(run):
        if event.get("event") == "run_started":
            done |= session
            session = set()
        elif event.get("event") == "step":
            key = (event.get("epoch"), event.get("step"))
            redone += key in done
            session.add(key)
    return redone


def resume(folder: Path, run: Path, timeout: float = 180) -> tuple[int | None, str]:
    process = start(folder, "train", "--resume", run.name, "--yes")
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return None, "resume hung"
    return process.returncode, output


def audit(name: str, run: Path, calls_seen: int, reference: "Reference", notes: list[str]) -> KillReport:
    """Did the run survive the kill: completed, each epoch once in history.csv, its totals counting every session."""
    status = json.loads((run / "run.json").read_text())
    rows = list(csv.DictReader(io.StringIO((run / "history.csv").read_text()))) if (run / "history.csv").is_file() else []
    epochs = [row.get("epoch") for row in rows]
    survived = status.get("status") == "completed"
    if status.get("status") != "completed":
        notes.append(f"ended {status.get('status')}")
    if epochs != [str(i) for i in range(EPOCHS)]:
        survived = False
        notes.append(f"history epochs {epochs}")
    # The server also sees the headroom check before the run starts (not the run's own calls), and calls in
    # flight when a session was stopped (sent, never answered to it): at most the model's concurrency (8).
    uncounted = calls_seen - reference.headroom_calls - int(status.get("lm_calls") or 0)
    if not 0 <= uncounted <= 8:
        survived = False
        notes.append(f"run.json lm_calls {status.get('lm_calls')} but the server saw {calls_seen} "
                     f"({reference.headroom_calls} of them the headroom check)")
    spans = session_spans(run)
    if status.get("elapsed_s", 0) < sum(spans) - 0.05:
        survived = False
        notes.append(f"run.json elapsed_s {status.get('elapsed_s')} < the sessions' {sum(spans):.2f} s in events.jsonl")
    summary = run / "summary.md"
    if summary.is_file() and f"LM calls: {status.get('lm_calls')} " not in summary.read_text():
        survived = False
        notes.append("summary.md LM calls differ from run.json's")
    return KillReport(name, survived, steps_redone(run), max(0, calls_seen - reference.calls), notes, max(0, uncounted))


def session_spans(run: Path) -> list[float]:
    """Each session's time in the event log: from its run_started to its last event (the last session to its
    final evaluation: writing artifacts comes after the time is recorded)."""
    spans, start, last = [], None, None
    for event in events(run):
        if event.get("event") == "run_started":
            if start is not None:
                spans.append(last - start)
            start = event["time"]
        if event.get("event") != "artifacts_written" and event.get("event") != "run_finished":
            last = event.get("time", last)
    if start is not None:
        spans.append(last - start)
    return spans


def kill_case(server, name: str, how: signal.Signals, at_step: int, reference: Reference, remove_last: bool = False,
              detached: bool = False, kill_resume_too: bool = False) -> KillReport:
    tag = name.replace(" ", "_")
    api_base = server.mode_url("slow", seconds="0.03", tag=tag)
    counter = f"slow#{tag}:chat/completions"
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pgkill-") as tmp:
        folder = Path(tmp)
        write_files(folder, files(kill_config(api_base)))
        process = start(folder, "train", "-c", "run.toml", "--yes", *(["--no-poll"] if detached else []))
        if detached:
            process.communicate(timeout=60)
        wait_for_steps(folder, at_step)
        run = run_folder(folder)
        assert run is not None
        pid = json.loads((run / "run.json").read_text()).get("pid") if detached else process.pid
        os.kill(pid, how)
        if not detached:
            output, _ = process.communicate(timeout=60)
            expected = 130 if how in (signal.SIGTERM, signal.SIGINT) else -9
            if process.returncode != expected:
                notes.append(f"exit {process.returncode}, expected {expected}")
            if "Traceback" in output:
                notes.append("a traceback on " + how.name)
        else:
            deadline = time.time() + 30
            while time.time() < deadline and json.loads((run / "run.json").read_text()).get("status") == "running":
                time.sleep(0.05)
        if how != signal.SIGKILL:
            state = json.loads((run / "run.json").read_text()).get("status")
            if state != "interrupted":
                notes.append(f"status after {how.name}: {state}")
        if remove_last:
            (run / "checkpoints" / "last.json").unlink(missing_ok=True)
            for extra in ("interrupted.json",):
                (run / "checkpoints" / extra).unlink(missing_ok=True)
        if kill_resume_too:
            process = start(folder, "train", "--resume", run.name, "--yes")
            before = sum(event.get("event") == "step" for event in events(run))
            wait_for_steps(folder, before + 2)
            os.kill(process.pid, signal.SIGKILL)
            process.communicate(timeout=60)
        code, output = resume(folder, run)
        if code != 0:
            notes.append(f"resume exit {code}: {output.strip()[-200:]}")
        if "Traceback" in output:
            notes.append("a traceback on resume")
        if remove_last and "epoch_" not in output:
            notes.append("resume did not say which checkpoint it fell back to")
        report = audit(name, run, server.stats().get(counter, 0), reference, notes)
        if notes and report.survived and any(n.startswith(("exit", "a traceback", "status", "resume")) for n in notes):
            report.survived = False
        return report


def reference_run(server) -> Reference:
    """The same run, uninterrupted."""
    tag = "reference"
    with tempfile.TemporaryDirectory(prefix="pgkill-") as tmp:
        folder = Path(tmp)
        write_files(folder, files(kill_config(server.mode_url("slow", seconds="0.03", tag=tag))))
        process = start(folder, "train", "-c", "run.toml", "--yes")
        output, _ = process.communicate(timeout=300)
        if process.returncode != 0:
            raise RuntimeError(f"the reference run failed: {output[-500:]}")
        counted = json.loads((run_folder(folder) / "run.json").read_text())["lm_calls"]
    calls = server.stats().get(f"slow#{tag}:chat/completions", 0)
    return Reference(calls=calls, headroom_calls=calls - counted)


def kill_reports(server) -> list[KillReport]:
    reference = reference_run(server)
    plans = [
        ("SIGINT foreground", signal.SIGINT, {}),
        ("SIGTERM foreground", signal.SIGTERM, {}),
        ("kill -9 foreground", signal.SIGKILL, {}),
        ("kill -9, last.json lost", signal.SIGKILL, {"remove_last": True, "at_step": 7}),
        ("SIGTERM detached worker", signal.SIGTERM, {"detached": True}),
        ("kill -9 twice (resume killed too)", signal.SIGKILL, {"kill_resume_too": True}),
    ]
    reports = []
    for name, how, options in plans:
        options = {"at_step": 5, **options}
        try:
            reports.append(kill_case(server, name, how, reference=reference, **options))
        except Exception as error:  # noqa: BLE001 - a kill case that breaks the harness is a failed kill
            reports.append(KillReport(name, False, 0, 0, [f"{type(error).__name__}: {error}"]))
    return reports
