"""How much of synalinks' own test suite and documentation runs on promptgym.

    .venv/bin/python bench/compat/run.py --synalinks /path/to/synalinks-checkout

Fetches nothing: it reads a synalinks checkout (see bench/compat/README.md),
selects the unit tests that use only synalinks' public API and the
self-contained doc blocks, in the areas promptgym covers, runs them against
promptgym through an import shim (``synalinks`` -> ``promptgym``) with
synalinks' LM mocks bridged to promptgym's models, and prints pass counts by
area. ``--json FILE`` keeps every outcome with its error.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from doc_blocks import DocBlock, collect_blocks  # noqa: E402
from public_api import PublicApi  # noqa: E402
from scope import IN, classify, classify_names  # noqa: E402
from select_tests import TestSelection, select_tests  # noqa: E402


def _run_worker(args: list[str], results: Path, timeout: float) -> tuple[list[dict], str]:
    """Run a worker; its JSONL results, and a note if it was killed or crashed."""
    note = ""
    try:
        completed = subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   timeout=timeout, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        if completed.returncode not in (0, 1):
            note = f"worker exited with {completed.returncode}: {completed.stderr[-600:]}"
    except subprocess.TimeoutExpired:
        note = f"timed out after {timeout:.0f}s"
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return rows, note


def run_tests(checkout: Path, tests: list[TestSelection], jobs: int, timeout: float) -> tuple[dict[str, dict], list[str]]:
    """Each test's outcome, and the public names the test files imported that promptgym lacks."""
    by_file: dict[str, list[TestSelection]] = collections.defaultdict(list)
    for test in tests:
        by_file[str(test.file)].append(test)
    outcomes: dict[str, dict] = {}
    missing: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="compat-") as scratch:
        def one(item: tuple[int, tuple[str, list[TestSelection]]]) -> None:
            index, (test_file, selected) = item
            results = Path(scratch) / f"tests-{index}.jsonl"
            rows, note = _run_worker([str(HERE / "test_worker.py"), str(checkout), str(results), test_file,
                                      *(test.node_id for test in selected)], results, timeout)
            seen = {row["test"]: row for row in rows if "test" in row}
            for row in rows:
                missing.update(row.get("missing", []))
            for test in selected:
                row = seen.get(test.node_id, {"outcome": "failed", "detail": note or "not run (collection failed)"})
                outcomes[f"{test_file}::{test.node_id}"] = {"outcome": row["outcome"], "detail": row["detail"]}

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, enumerate(sorted(by_file.items()))))
    return outcomes, sorted(missing)


def run_blocks(checkout: Path, blocks: list[DocBlock], jobs: int, timeout: float) -> dict[str, dict]:
    by_page: dict[str, list[DocBlock]] = collections.defaultdict(list)
    for block in blocks:
        by_page[block.page].append(block)
    outcomes: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="compat-") as scratch:
        def one(item: tuple[int, tuple[str, list[DocBlock]]]) -> None:
            index, (_, page_blocks) = item
            blocks_file = Path(scratch) / f"blocks-{index}.json"
            blocks_file.write_text(json.dumps([{"id": block.block_id, "code": block.code} for block in page_blocks]))
            results = Path(scratch) / f"blocks-{index}.jsonl"
            rows, note = _run_worker([str(HERE / "block_worker.py"), str(checkout), str(blocks_file), str(results)],
                                     results, timeout)
            seen = {row["block"]: row for row in rows}
            for block in page_blocks:
                row = seen.get(block.block_id, {"outcome": "failed", "detail": note or "not run"})
                outcomes[block.block_id] = {"outcome": row["outcome"], "detail": row["detail"]}

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, enumerate(sorted(by_page.items()))))
    return outcomes


UNSCOPED_AREAS = ("metrics", "callbacks", "optimizers", "modules", "programs", "rewards", "trainers")
"""synalinks' areas whose unit tests a porting user meets (issue 44), measured whole with ``--unscoped``."""


UNSCOPED_APART = ("modules/agents", "modules/knowledge", "modules/retrievers", "modules/rerankers", "modules/synthesis")
"""Module families other issues measure on their own (knowledge bases: issue 39; SQL/Cypher/RAG agents, sandboxes)."""


def unscoped_area(test: TestSelection) -> str | None:
    """``modules/core``, ``metrics``, ... for a test file in :data:`UNSCOPED_AREAS`; None for the others."""
    parts = Path(test.file).parts[2:]  # synalinks/src/<area>/...
    if not parts or parts[0].removesuffix(".py") not in UNSCOPED_AREAS:
        return None
    area = "/".join(parts[:2]) if parts[0] == "modules" and len(parts) > 2 else parts[0].removesuffix(".py")
    return None if area in UNSCOPED_APART else area


def _table(title: str, rows: dict[str, list[int]]) -> str:
    lines = [f"{title:<44} {'pass':>5} / {'run':<5} {'%':>5}"]
    total = [0, 0]
    for name, (passed, run) in sorted(rows.items()):
        lines.append(f"  {name:<42} {passed:>5} / {run:<5} {100 * passed / run if run else 0:>5.1f}")
        total[0] += passed
        total[1] += run
    lines.append(f"  {'total':<42} {total[0]:>5} / {total[1]:<5} {100 * total[0] / total[1] if total[1] else 0:>5.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synalinks", required=True, type=Path, help="path of a synalinks checkout (its repository root)")
    parser.add_argument("--only", choices=("tests", "docs"), help="run only the tests or only the doc blocks")
    parser.add_argument("--match", default="", help="only tests/blocks whose id contains this text")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes at a time (default 2)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per test file or doc page (default 300)")
    parser.add_argument("--unscoped", action="store_true",
                        help="every test of the areas issue 44 names (UNSCOPED_AREAS), internals and all: no selection")
    parser.add_argument("--json", type=Path, help="write every outcome (with its error) to this file")
    parser.add_argument("--failures", action="store_true", help="print each failure with its error")
    args = parser.parse_args()
    checkout = args.synalinks.resolve()
    if not (checkout / "synalinks" / "api").is_dir():
        parser.error(f"{checkout}: not a synalinks checkout (no synalinks/api/); see bench/compat/README.md")

    api = PublicApi(checkout)
    report: dict = {"synalinks": str(checkout), "tests": {}, "blocks": {}}
    sections = []
    if args.only != "docs":
        all_tests = select_tests(checkout, api)
        measured, scope_counts = [], collections.Counter()
        for test in all_tests:
            if args.unscoped:
                area = unscoped_area(test)
                if area and args.match in f"{test.file}::{test.node_id}":
                    measured.append((test, area))
                elif not area:
                    scope_counts["outside the unscoped areas"] += 1
                continue
            kind, label = classify(str(test.file).removeprefix("synalinks/src/").removesuffix(".py"))
            if kind == IN and classify_names(test.public, api.by_public):
                kind, label = classify_names(test.public, api.by_public)
            if not test.public_only:
                scope_counts["uses internals or private attributes"] += 1
            elif kind != IN:
                scope_counts[f"out of scope: {label}"] += 1
            elif args.match in f"{test.file}::{test.node_id}":
                measured.append((test, label))
        outcomes, missing = run_tests(checkout, [test for test, _ in measured], args.jobs, args.timeout)
        report["missing_names"] = missing
        rows: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for test, area in measured:
            key = f"{test.file}::{test.node_id}"
            rows[area][1] += 1
            rows[area][0] += outcomes[key]["outcome"] == "passed"
            report["tests"][key] = {"area": area, **outcomes[key]}
        sections.append(_table(f"synalinks unit tests ({len(all_tests)} in all)", rows))
        sections.append("  not measured: " + "; ".join(f"{name} {count}" for name, count in sorted(scope_counts.items())))
        if missing:
            sections.append(f"  public names the test files import that promptgym lacks ({len(missing)}): " + ", ".join(missing))
    if args.only != "tests":
        blocks = collect_blocks(checkout, api)
        measured_blocks = [block for block in blocks if block.status == "measured" and args.match in block.block_id]
        outcomes = run_blocks(checkout, measured_blocks, args.jobs, args.timeout)
        rows = collections.defaultdict(lambda: [0, 0])
        for block in measured_blocks:
            rows[block.kind][1] += 1
            rows[block.kind][0] += outcomes[block.block_id]["outcome"] == "passed"
            report["blocks"][block.block_id] = {"kind": block.kind, **outcomes[block.block_id]}
        skipped = collections.Counter(
            block.status if block.status == "fragment" else f"out of scope: {block.reason.split(' (')[0]}"
            for block in blocks if block.status != "measured")
        sections.append(_table(f"synalinks doc blocks ({len(blocks)} in all)", rows))
        sections.append("  not measured: " + "; ".join(f"{name} {count}" for name, count in sorted(skipped.items())))
    print("\n\n".join(sections))
    if args.failures:
        for key, row in [*report["tests"].items(), *report["blocks"].items()]:
            if row["outcome"] != "passed":
                print(f"\nFAIL {key}\n    " + row["detail"].replace("\n", "\n    "))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
