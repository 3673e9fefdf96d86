"""Issue 18's table: fixed vs retrieved demonstrations per task, with intervals and paired tests.

    .venv/bin/python bench/training/compare_rows.py            # reads results/training_{fixed,knn}.json

Per task: each row's test accuracy with its 95% interval (Wilson), training LM
calls (wire), embedding calls, seconds per test call; then the paired tests
(McNemar, same 200 test items) of promptgym KNNFewShot against the best fixed
set, and of the best promptgym row against the best peer row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from promptgym.stats import confidence_interval, paired_test

RESULTS = Path(__file__).resolve().parents[1] / "results"


def label(row: dict[str, Any]) -> str:
    return f"{row['framework']} {row['settings']['optimizer']['class']}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| task | framework, optimizer | test accuracy (95% CI) | train LM calls | embedding calls (train / test) "
             "| s per test call |", "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        hits = row["trained"]["hits"]
        interval = confidence_interval(hits)
        embedding = row.get("embedding_calls") or {}
        per_call = (row["wire"].get("trained_eval") or {}).get("seconds_per_call")
        lines.append(f"| {row['task']} | {label(row)} | {sum(hits)}/{len(hits)} = {interval.mean:.1%} "
                     f"[{interval.low:.1%}, {interval.high:.1%}] | {row['train_calls']} "
                     f"| {embedding.get('train', 0)} / {embedding.get('test', 0)} | {per_call} |")
        untrained = row.get("untrained")
        if untrained and untrained.get("hits"):
            zero = confidence_interval(untrained["hits"])
            lines.append(f"| {row['task']} | {row['framework']} zero-shot | {sum(untrained['hits'])}/{len(untrained['hits'])}"
                         f" = {zero.mean:.1%} [{zero.low:.1%}, {zero.high:.1%}] | 0 | 0 / 0 | "
                         f"{(row['wire'].get('untrained_eval') or {}).get('seconds_per_call')} |")
    return lines


def versus(name: str, after: dict[str, Any], before: dict[str, Any]) -> str:
    test = paired_test(before["trained"]["hits"], after["trained"]["hits"])
    return f"- {name}: {label(after)} vs {label(before)}: {test}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="training_fixed.json,training_knn.json")
    args = parser.parse_args()
    rows = [row for name in args.files.split(",") if (RESULTS / name).exists()
            for row in json.loads((RESULTS / name).read_text()) if "error" not in row and row["trained"].get("hits")]
    for task in sorted({row["task"] for row in rows}):
        mine = sorted((r for r in rows if r["task"] == task), key=lambda r: (r["framework"], label(r)))
        print(f"\n## {task}\n")
        print("\n".join(table(mine)))
        accuracy = lambda r: sum(r["trained"]["hits"])  # noqa: E731
        knn = [r for r in mine if r["framework"] == "promptgym" and "KNN" in label(r)]
        fixed = [r for r in mine if "KNN" not in label(r)]
        ours = [r for r in mine if r["framework"] == "promptgym"]
        peers = [r for r in mine if r["framework"] != "promptgym"]
        print()
        if knn and fixed:
            print(versus("retrieved vs the best fixed set", knn[0], max(fixed, key=accuracy)))
        if ours and peers:
            print(versus("best promptgym vs best peer", max(ours, key=accuracy), max(peers, key=accuracy)))


if __name__ == "__main__":
    main()
