"""What a fault case is, how it runs, and how its outcome is judged.

A case runs one command (the CLI or a Python snippet) in a fresh folder and is
judged against what it should do:

- ``expect="error"``: refused. ``clear`` when it exits non-zero with the expected
  exit code, no traceback, and a message naming what ``mention`` lists;
  ``unclear`` when refused but the message or exit code is off; ``silent_wrong``
  when it was not refused.
- ``expect="ok"``: accepted (and ``check`` passes). ``ok`` when so, ``silent_wrong``
  when it ran but the check failed, ``unclear`` when it was refused cleanly.
- Either way, a Python traceback in the output is ``traceback``, and a command
  still running after its timeout is ``hang``.
- A check may answer ``"leaked: ..."`` or ``"lost: ..."``: a resource held past its limit, or a
  request that got no answer, counts as that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
OUTCOMES = ("clear", "ok", "unclear", "traceback", "silent_wrong", "hang", "lost", "leaked")
RESOURCE_OUTCOMES = ("lost", "leaked")
"""A check whose answer starts with ``"leaked: "`` (a connection, thread or process held past its limit) or
``"lost: "`` (a request that got no answer) counts as that, whatever else the case did."""


def resource_outcome(problem: str | None) -> str | None:
    return next((name for name in RESOURCE_OUTCOMES if problem and problem.startswith(f"{name}: ")), None)


@dataclass
class Ran:
    """What a command did."""

    code: int | None
    output: str
    seconds: float
    folder: Path

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.output

    def result(self) -> dict:
        """The JSON a Python snippet printed on its ``RESULT`` line ({} when none)."""
        for line in reversed(self.output.splitlines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        return {}


Check = Callable[[Ran], str | None]
"""Returns why the outcome is wrong, or None when it is right."""


@dataclass
class Case:
    category: str
    name: str
    argv: list[str]
    expect: str = "error"
    mention: tuple[str, ...] = ()
    exit_code: int | None = 2
    files: dict[str, bytes | str] = field(default_factory=dict)
    check: Check | None = None
    prepare: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    ok_means: str = "ok"
    """What a passing ``expect="ok"`` case counts as ("clear" for a server that refused as it should)."""


@dataclass
class Verdict:
    case: Case
    outcome: str
    detail: str
    seconds: float

    def row(self) -> dict:
        return {"category": self.case.category, "name": self.case.name, "outcome": self.outcome,
                "detail": self.detail[:300], "seconds": round(self.seconds, 2)}


def base_env(folder: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PROMPTGYM_")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), PROMPTGYM_RUNS_DIR=str(folder / "runs"),
               PROMPTGYM_CACHE_DIR=str(folder / "cache"), COLUMNS="200", PYTHONWARNINGS="default", PYTHON=PYTHON)
    if "PROMPTGYM_MODELS_DIR" in os.environ:
        env["PROMPTGYM_MODELS_DIR"] = os.environ["PROMPTGYM_MODELS_DIR"]
    env.pop("OPENAI_API_KEY", None)
    return env


def cli(*args: str) -> list[str]:
    return [PYTHON, "-m", "promptgym.cli.main", *args]


def snippet(code: str) -> list[str]:
    return [PYTHON, "-c", code]


def run_command(argv: list[str], folder: Path, env: dict[str, str], timeout: float, stdin: str = "") -> Ran:
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(stdin, timeout=timeout)
        return Ran(process.returncode, output, time.perf_counter() - started, folder)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        try:
            output, _ = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a grandchild in its own session still holds the pipe
            process.stdout.close()
            output = "(output lost: a process the command started outlived it and held its output)"
        return Ran(None, output, time.perf_counter() - started, folder)


def write_files(folder: Path, files: dict[str, bytes | str]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def missing_mentions(case: Case, output: str) -> list[str]:
    lowered = output.lower()
    return [word for word in case.mention if word.lower() not in lowered]


RAW_EXCEPTIONS = {"KeyError", "TypeError", "AttributeError", "IndexError", "RecursionError", "UnboundLocalError",
                  "JSONDecodeError", "UnicodeDecodeError", "AssertionError", "NameError", "ZeroDivisionError",
                  "OperationalError", "DatabaseError", "CancelledError", "ClientConnectorError", "ValidationError"}
"""Exceptions that reach a user as a bare traceback: nothing of ours explained them."""


def judge_snippet(case: Case, ran: Ran, result: dict) -> Verdict:
    """A Python snippet reports the exception it caught on its RESULT line."""
    raised = result.get("raised")
    message = f"{raised}: {result.get('message', '')}" if raised else json.dumps(result)[:300]
    problem = case.check(ran) if case.check else None
    missing = missing_mentions(case, ran.output)
    if resource_outcome(problem):
        return Verdict(case, resource_outcome(problem), problem, ran.seconds)
    if raised in RAW_EXCEPTIONS:
        return Verdict(case, "traceback", message, ran.seconds)
    if case.expect == "ok":
        if raised:
            return Verdict(case, "unclear", f"refused: {message}", ran.seconds)
        if problem or missing:
            return Verdict(case, "silent_wrong", problem or f"output does not mention {missing}", ran.seconds)
        return Verdict(case, case.ok_means, "", ran.seconds)
    if not raised and not result.get("failed"):
        return Verdict(case, "silent_wrong", problem or f"accepted: {result}", ran.seconds)
    if missing or problem:
        return Verdict(case, "unclear", problem or f"message lacks {missing}: {message}", ran.seconds)
    return Verdict(case, "clear", message, ran.seconds)


def judge(case: Case, ran: Ran) -> Verdict:
    tail = ran.output.strip()[-300:]
    if ran.code is None:
        return Verdict(case, "hang", f"still running after {case.timeout:.0f} s: {tail}", ran.seconds)
    result = ran.result()
    if "raised" in result and not ran.traceback:
        return judge_snippet(case, ran, result)
    if ran.traceback:
        lines = [line for line in ran.output.splitlines() if line.strip()]
        return Verdict(case, "traceback", lines[-1] if lines else "", ran.seconds)
    problem = case.check(ran) if case.check else None
    if resource_outcome(problem):
        return Verdict(case, resource_outcome(problem), problem, ran.seconds)
    if case.expect == "ok":
        if ran.code != 0:
            return Verdict(case, "unclear", f"refused (exit {ran.code}): {tail}", ran.seconds)
        missing = missing_mentions(case, ran.output)
        if problem or missing:
            return Verdict(case, "silent_wrong", problem or f"output does not mention {missing}", ran.seconds)
        return Verdict(case, case.ok_means, "", ran.seconds)
    if ran.code == 0:
        return Verdict(case, "silent_wrong", problem or f"not refused: {tail}", ran.seconds)
    missing = missing_mentions(case, ran.output)
    if missing or problem or (case.exit_code is not None and ran.code != case.exit_code):
        why = problem or (f"message lacks {missing}" if missing else f"exit {ran.code}, expected {case.exit_code}")
        return Verdict(case, "unclear", f"{why}: {tail}", ran.seconds)
    return Verdict(case, "clear", tail.splitlines()[-1] if tail else "", ran.seconds)


def run_case(case: Case) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="pgfault-") as tmp:
        folder = Path(tmp)
        write_files(folder, case.files)
        if case.prepare:
            case.prepare(folder)
        env = {**base_env(folder), **{name: value.replace("{folder}", str(folder)) for name, value in case.env.items()}}
        ran = run_command(case.argv, folder, env, case.timeout)
        try:
            return judge(case, ran)
        except Exception as error:  # noqa: BLE001 - a broken check is reported, not fatal to the bench
            return Verdict(case, "unclear", f"check crashed: {type(error).__name__}: {error}", ran.seconds)
        finally:
            os.system(f"chattr -R -i {folder} 2>/dev/null")
