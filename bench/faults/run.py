"""The fault bench: bad inputs, model and task-app faults, kills and resumes; prints the counts.

    .venv/bin/python bench/faults/run.py                       # everything (about 5 minutes on 2 cores)
    .venv/bin/python bench/faults/run.py --only config,data    # some categories
    .venv/bin/python bench/faults/run.py --only tools,mcp,serve,program_edit   # issue 44's surfaces
    .venv/bin/python bench/faults/run.py --only kb             # knowledge bases (issue 39)
    .venv/bin/python bench/faults/run.py --label after --json bench/results/faults_after.json

Outcomes (see common.py): ``clear`` (refused with a clear error), ``ok`` (accepted as it should
be), ``unclear`` (refused, but the message or exit code is off), ``traceback``, ``silent_wrong``
(accepted what it should refuse, or ran wrong), ``hang``, ``lost`` (a request that got no answer),
``leaked`` (a connection, thread or process held past its limit). Kills report survived / work lost.
Servers run on 127.0.0.1 in this process and stop at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cases_inputs  # noqa: E402
import cases_knowledge  # noqa: E402
import cases_lm  # noqa: E402
import cases_programs  # noqa: E402
import cases_stages  # noqa: E402
import cases_surfaces  # noqa: E402
import cases_taskapp  # noqa: E402
import cases_weights  # noqa: E402
import kills  # noqa: E402
from common import OUTCOMES, Verdict, run_case  # noqa: E402
from servers import start_broken_task_app, start_fault_server  # noqa: E402

CATEGORIES = ("config", "data", "cli", "program_file", "lm", "cache", "taskapp", "kill", "kb",
              *cases_surfaces.SURFACE_CATEGORIES)
WEIGHT_CATEGORIES = (*cases_weights.WEIGHT_CATEGORIES, "weight_kill", "stage_kill")
"""The weight flows' surfaces (issue 27): ``--only sft,rl,registry,runs,ray,export,weight_kill``; ``--only weights``
is all of them. They are not in the default set (they train a tiny model: about 5 more minutes).
``stage_kill`` (issue 44): FineTune and Sequence killed at each stage boundary, then fitted again."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(CATEGORIES), help="comma-separated categories")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--label", default="run")
    parser.add_argument("--json", help="write every verdict here")
    parser.add_argument("--verbose", action="store_true", help="print every case, not only the failing ones")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "weights" in only:
        only |= set(WEIGHT_CATEGORIES)
    started = time.time()
    server, broken_app = start_fault_server(), start_broken_task_app()
    model_folder = tempfile.TemporaryDirectory(prefix="pgfault-tiny-")
    try:
        tiny = cases_weights.build_tiny_model(Path(model_folder.name)) if only & set(WEIGHT_CATEGORIES) else None
        cases = [case for case in [*cases_inputs.cases(), *cases_programs.cli_cases(), *cases_lm.cases(server),
                                   *cases_taskapp.cases(broken_app), *cases_surfaces.cases(server),
                                   *cases_knowledge.cases()]
                 if case.category in only]
        if tiny is not None:
            cases += cases_weights.cases(tiny, server, only)
            cases += cases_stages.cases(tiny) if "stage_kill" in only else []
        verdicts: list[Verdict] = []
        with ThreadPoolExecutor(args.workers) as pool:
            for verdict in pool.map(run_case, cases):
                verdicts.append(verdict)
                print(f"  {verdict.outcome:12} {verdict.seconds:6.1f} s  {verdict.case.category}: {verdict.case.name}",
                      file=sys.stderr, flush=True)
        if "program_file" in only:
            verdicts += cases_programs.program_file_verdicts()
        kill_reports = kills.kill_reports(server) if "kill" in only else []
        weight_kills = cases_weights.kill_reports(tiny) if tiny is not None and "weight_kill" in only else []
    finally:
        server.stop()
        broken_app.stop()
        model_folder.cleanup()
    report(verdicts, kill_reports, args, time.time() - started, weight_kills)


def report(verdicts: list[Verdict], kill_reports: list, args: argparse.Namespace, seconds: float,
           weight_kills: list | None = None) -> None:
    for verdict in verdicts:
        if args.verbose or verdict.outcome not in ("clear", "ok"):
            print(f"[{verdict.outcome:12}] {verdict.case.category:12} {verdict.case.name}: {verdict.detail[:240]}")
    for kill in kill_reports:
        print(f"[{'survived' if kill.survived else 'LOST':12}] kill         {kill.name}: steps redone {kill.steps_redone}, "
              f"LM calls lost {kill.calls_lost}, uncounted {kill.calls_uncounted}"
              + (f"; {'; '.join(kill.notes)}" if kill.notes else ""))
    for kill in weight_kills or []:
        print(f"[{'survived' if kill.survived else 'LOST':12}] weight_kill  {kill.name}: {kill.steps_redone} step(s) "
              f"redone (save_steps {kill.save_steps}), {len(kill.corrupt_files)} file(s) corrupt"
              + (f" {kill.corrupt_files}" if kill.corrupt_files else "") + (f"; {'; '.join(kill.notes)}" if kill.notes else ""))
    by_category: dict[str, Counter] = {}
    for verdict in verdicts:
        by_category.setdefault(verdict.case.category, Counter())[verdict.outcome] += 1
    total = Counter(verdict.outcome for verdict in verdicts)
    print(f"\nfault bench '{args.label}': {len(verdicts)} inputs tried in {seconds:.0f} s")
    print(f"{'category':14}" + "".join(f"{name:>14}" for name in ("tried", *OUTCOMES)))
    for category, counts in [*sorted(by_category.items()), ("total", total)]:
        print(f"{category:14}{sum(counts.values()):>14}" + "".join(f"{counts.get(name, 0):>14}" for name in OUTCOMES))
    if kill_reports:
        survived = sum(kill.survived for kill in kill_reports)
        print(f"kills: {len(kill_reports)} tried, {survived} survived; work lost: "
              f"{sum(k.steps_redone for k in kill_reports)} training steps redone, "
              f"{sum(k.calls_lost for k in kill_reports)} LM calls beyond an uninterrupted run; "
              f"{sum(k.calls_uncounted for k in kill_reports)} calls in flight at a kill left out of run.json")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "label": args.label, "seconds": round(seconds, 1), "totals": dict(total),
            "by_category": {key: dict(value) for key, value in by_category.items()},
            "verdicts": [verdict.row() for verdict in verdicts], "kills": [kill.row() for kill in kill_reports],
            "weight_kills": [kill.row() for kill in weight_kills or []],
        }, indent=1) + "\n")


if __name__ == "__main__":
    main()
