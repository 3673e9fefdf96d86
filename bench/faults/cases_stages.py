"""FineTune and Sequence killed at each stage boundary (issue 44): kill -9 before and after each stage's
checkpoint, then the same ``fit(run_dir=...)`` again, which must finish what the killed one started.

Each case (category ``stage_kill``) runs ``stage_fit.py`` twice in one folder: once killed right after an
event (``PGFAULT_KILL_AT``), once to completion. It is ``ok`` when the second run completed with each stage
once in history.csv, the tuned model in the program, every SFT step trained and none of them before the
SFT's last checkpoint trained again, and no file left unreadable; ``silent_wrong`` otherwise; a traceback in
either run or a hang counts as such. ``sft_steps_redone`` in the detail counts the SFT steps after the last
checkpoint that the kill lost (at most ``save_steps - 1``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from common import HERE, PYTHON, Case, Ran

STAGE_FIT = [PYTHON, str(HERE / "stage_fit.py")]
SFT_STEPS = 6
SAVE_STEPS = 2

KILL_POINTS: list[tuple[str, str, str]] = [
    # (kind, where, PGFAULT_KILL_AT)
    ("chain", "stage 1 mid-SFT, before the SFT's step-4 checkpoint", "sft_step:step=3"),
    ("chain", "stage 1 right after the SFT's end checkpoint, before export", "checkpoint_saved:reason=end"),
    ("chain", "stage 1 after the tuned model is registered, before its race", "model_registered"),
    ("chain", "stage 1 before its epoch checkpoint", "epoch_end#1"),
    ("chain", "stage 1 right after its epoch checkpoint", "checkpoint_saved:path=checkpoints/epoch_1.json#1"),
    ("chain", "the boundary: stage 1 ended, stage 2 not started", "stage_ended:index=0"),
    ("chain", "stage 2 started, before its first checkpoint", "stage_started:index=1"),
    ("chain", "stage 2 before its epoch checkpoint", "epoch_end#2"),
    ("chain", "stage 2 right after its epoch checkpoint", "checkpoint_saved:path=checkpoints/epoch_1.json#2"),
    ("chain", "stage 2 ended, before the best program is saved", "stage_ended:index=1"),
    ("finetune", "mid-SFT, before the SFT's step-4 checkpoint", "sft_step:step=3"),
    ("finetune", "right after the SFT's end checkpoint", "checkpoint_saved:reason=end"),
    ("finetune", "before the fit's epoch checkpoint", "epoch_end"),
    ("finetune", "right after the fit's epoch checkpoint", "checkpoint_saved:path=checkpoints/epoch_1.json"),
]


def events(run: Path) -> list[dict]:
    path = run / "events.jsonl"
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def unreadable(run: Path) -> list[str]:
    """JSON files of the run folder that don't parse (hidden staging folders of a save are ignored)."""
    bad = []
    for path in sorted(run.rglob("*.json")):
        if not any(part.startswith(".") for part in path.relative_to(run).parts):
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                bad.append(str(path.relative_to(run)))
    return bad


def audit(kind: str, run: Path, first: subprocess.CompletedProcess) -> str | None:
    """Why the resumed run is wrong, or None."""
    if first.returncode != -9:
        return f"the first run was not killed (exit {first.returncode}): {first.stdout[-200:]}"
    status = json.loads((run / "run.json").read_text())
    if status.get("status") != "completed":
        return f"status {status.get('status')}"
    rows = (run / "history.csv").read_text().splitlines()[1:]
    wanted = 2 if kind == "chain" else 1
    if len(rows) != wanted:
        return f"history.csv has {len(rows)} rows, expected {wanted} (each stage's epoch once)"
    stages = [event["stage"] for event in events(run) if event["event"] == "stage_ended"]
    if kind == "chain" and sorted(set(stages)) != ["1:FineTune", "2:RandomFewShot"]:
        return f"stages ended: {stages}"
    best = json.loads((run / "best_program.json").read_text())
    if "local/ft-" not in json.dumps(best["program"]):  # a Generator's model is in its config
        return "best_program.json does not run on the tuned model"
    steps = [event["step"] for event in events(run) if event["event"] == "sft_step"]
    if sorted(set(steps)) != list(range(1, SFT_STEPS + 1)):
        return f"SFT steps {steps}"
    if redone(run) > SAVE_STEPS - 1:
        return f"{redone(run)} SFT steps trained twice: more than the {SAVE_STEPS - 1} after a checkpoint"
    bad = unreadable(run)
    return f"unreadable: {bad}" if bad else None


def redone(run: Path) -> int:
    """SFT steps trained more than once."""
    steps = [event["step"] for event in events(run) if event["event"] == "sft_step"]
    return len(steps) - len(set(steps))


def kill_case(tiny: Path, kind: str, where: str, kill_at: str) -> Case:
    """The case: a Python snippet that runs both sessions and judges them (prints RESULT)."""
    code = f"""
import json, subprocess, sys
sys.path.insert(0, {str(HERE)!r})
from pathlib import Path
from cases_stages import STAGE_FIT, audit, redone
import os
env = dict(os.environ)
run = Path("run")
first = subprocess.run([*STAGE_FIT, {str(tiny)!r}, "run", {kind!r}], env={{**env, "PGFAULT_KILL_AT": {kill_at!r}}},
                       capture_output=True, text=True, timeout=400)
second = subprocess.run([*STAGE_FIT, {str(tiny)!r}, "run", {kind!r}], env=env, capture_output=True, text=True,
                        timeout=400)
print(first.stdout[-2000:]); print(second.stdout[-2000:]); print(second.stderr[-3000:])
problem = audit({kind!r}, run, first) if second.returncode == 0 else f"resume exit {{second.returncode}}"
print("RESULT " + json.dumps({{"problem": problem, "sft_steps_redone": redone(run)}}))
"""
    def check(ran: Ran) -> str | None:
        result = ran.result()
        return result.get("problem") or None

    return Case("stage_kill", f"{kind}: {where} ({kill_at})", [PYTHON, "-c", code], expect="ok", exit_code=0,
                check=check, timeout=900, env={"PROMPTGYM_MODELS_DIR": "{folder}/models"})


def cases(tiny: Path) -> list[Case]:
    return [kill_case(tiny, kind, where, kill_at) for kind, where, kill_at in KILL_POINTS]

