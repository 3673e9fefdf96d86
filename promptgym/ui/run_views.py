"""What the review page shows of one run, from its folder: curves, prompts before and after, comparisons.

Pure functions of the files a run writes (``history.csv``, the events, the program files);
the folder and its events come from a :class:`promptgym.ui.sources.RunsSource`.

    series, x, bands, x_label = curves(run_path / "history.csv", events)
    states = program_states(run_path)       # {"before": {...}, "after": {...}, "source": "candidates.json"}
    variable_diff(states["before"], states["after"])
"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any

from promptgym.core.atomic import read_json
from promptgym.runs.history import read_history

X_COLUMNS = ("step", "iteration", "epoch")
"""The first of these a history has is its x axis (SFT, whose rows also carry a fractional epoch; RL;
prompt learning)."""
NOT_CURVES = ("lm_calls", "prompt_tokens", "completion_tokens", "failures", "lr", "grad_norm", "tokens_per_s",
              "seconds", "elapsed_s", "total_steps", "rollout_s", "update_s", "groups", "zero_signal_groups",
              "failed_rollouts", "cost_usd", "epoch_cost_usd", "saved_usd", "compute_s", "unpriced_calls")
"""Columns that count cost or time, not quality: left out of the chart (``lm_calls_inference``, ``cost_usd_reward``
too)."""


def _number(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def curves(history_path: Path, events: list[dict[str, Any]]) -> tuple[dict[str, list[float]], list[float],
                                                                       dict[str, list[tuple[float, float] | None]], str]:
    """(series by column, x values, 95% intervals by series, x label) of a run's history so far.

    Intervals come from the ``epoch_end`` events (``intervals``: validation scores with theirs).
    """
    rows, fields = read_history(history_path)
    x_label = next((name for name in X_COLUMNS if name in fields), "")
    xs = [_number(row.get(x_label)) if x_label else float(index) for index, row in enumerate(rows)]
    names = [name for name in fields if name not in X_COLUMNS and not name.startswith(NOT_CURVES)]
    series = {name: [_number(row.get(name)) for row in rows] for name in names}
    series = {name: values for name, values in series.items() if any(math.isfinite(v) for v in values)}
    by_epoch: dict[float, dict[str, Any]] = {}
    for event in events:
        if event.get("event") == "epoch_end" and isinstance(event.get("intervals"), dict):
            by_epoch[_number(event.get("epoch"))] = event["intervals"]
    bands: dict[str, list[tuple[float, float] | None]] = {}
    if x_label == "epoch" and by_epoch:
        for name in series:
            found = [by_epoch.get(x, {}).get(name) for x in xs]
            if any(found):
                bands[name] = [(item["low"], item["high"]) if isinstance(item, dict) and "low" in item else None
                               for item in found]
    return series, xs, bands, x_label or "row"


def comparisons(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history.comparisons`` as the run logged them: each check of a best candidate against its start
    (scores with intervals, the paired test, kept or not), from ``candidate_accepted``/``rejected``
    and ``stage_ended`` events, in order."""
    found = []
    for event in events:
        comparison = event.get("comparison")
        if event.get("event") in ("candidate_accepted", "candidate_rejected", "stage_ended") \
                and isinstance(comparison, dict):
            found.append({**comparison, "event": event["event"], "time": event.get("time")})
    return found


def _readable(path: Path) -> dict[str, Any] | None:
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _initial(candidates: Any) -> dict[str, Any] | None:
    if not isinstance(candidates, list):
        return None
    for candidate in candidates:
        if isinstance(candidate, dict) and candidate.get("origin") == "initial":
            return candidate.get("variables")
    first = candidates[0] if candidates else None
    return first.get("variables") if isinstance(first, dict) else None


def _best(state: dict[str, Any]) -> dict[str, Any] | None:
    for candidate in state.get("candidates") or []:
        if isinstance(candidate, dict) and candidate.get("id") == state.get("best_id"):
            return candidate.get("variables")
    return None


def program_states(run_path: Path) -> dict[str, Any]:
    """The trainable variables the run started from and the ones it ends with (or holds best so far).

    A finished run: the ``initial`` candidate of ``candidates.json`` and ``best_program.json``'s
    variables. A running one: its newest checkpoint's optimizer state (start and best so far).
    """
    candidates = _readable(run_path / "candidates.json")
    best = _readable(run_path / "best_program.json")
    if candidates is not None and best is not None:
        return {"before": _initial(candidates.get("candidates")), "after": best.get("variables"),
                "source": "candidates.json, best_program.json"}
    for name in ("best_program.json", "checkpoints/last.json"):
        program = _readable(run_path / name)
        if program is None:
            continue
        state = program.get("optimizer_state") or {}
        return {"before": _initial(state.get("candidates")), "after": _best(state) or program.get("variables"),
                "source": name}
    return {"before": None, "after": None, "source": None}


def _text_diff(before: str, after: str) -> list[dict[str, str]]:
    """Word-level changes: ``[{"op": "same"|"removed"|"added", "text": ...}]``."""
    old, new = before.split(" "), after.split(" ")
    ops: list[dict[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            ops.append({"op": "same", "text": " ".join(old[i1:i2])})
            continue
        if i2 > i1:
            ops.append({"op": "removed", "text": " ".join(old[i1:i2])})
        if j2 > j1:
            ops.append({"op": "added", "text": " ".join(new[j1:j2])})
    return ops


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def variable_diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per trainable variable: instructions as a word diff, demonstrations kept, added and removed,
    and any other field's value before and after when it changed."""
    before, after = before or {}, after or {}
    found = []
    for name in list(before) + [name for name in after if name not in before]:
        old, new = before.get(name), after.get(name)
        old = old if isinstance(old, dict) else {"value": old}
        new = new if isinstance(new, dict) else {"value": new}
        old_examples = old.get("examples") or []
        new_examples = new.get("examples") or []
        old_keys, new_keys = {_key(e) for e in old_examples}, {_key(e) for e in new_examples}
        entry: dict[str, Any] = {
            "name": name,
            "instructions": _text_diff(str(old.get("instructions") or ""), str(new.get("instructions") or "")),
            "examples": [{"op": "same" if _key(e) in old_keys else "added", "example": e} for e in new_examples]
            + [{"op": "removed", "example": e} for e in old_examples if _key(e) not in new_keys],
            "other": [{"field": key, "before": old.get(key), "after": new.get(key)}
                      for key in sorted(set(old) | set(new)) if key not in ("instructions", "examples")
                      and _key(old.get(key)) != _key(new.get(key))],
        }
        entry["changed"] = any(op["op"] != "same" for op in entry["instructions"] + entry["examples"]) \
            or bool(entry["other"])
        found.append(entry)
    return found


def run_summary(status: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``run.json`` the page shows: id, name, status, progress, baseline and final with intervals."""
    def scored(entry: Any) -> dict[str, Any] | None:
        if not isinstance(entry, dict):
            return None
        intervals = (entry.get("statistics") or {}).get("intervals") or {}
        return {"split": entry.get("split"), "size": entry.get("size"),
                "scores": {key: value for key, value in entry.items() if isinstance(value, (int, float))
                           and not isinstance(value, bool) and key not in ("size", "failures")},
                "intervals": {key: {"low": item.get("low"), "high": item.get("high"), "n": item.get("n")}
                              for key, item in intervals.items() if isinstance(item, dict)}}

    return {key: status.get(key) for key in ("id", "name", "status", "job_type", "created", "updated", "epochs_done",
                                              "lm_calls", "elapsed_s", "error")} \
        | {"baseline": scored(status.get("baseline")), "final": scored(status.get("final"))}
