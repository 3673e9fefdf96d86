"""Pure functions behind GEPA's candidate pool (arXiv 2507.19457, Algorithm 2 and merge).

A score table maps candidate id -> {example key -> score}. For each example,
the *front* is the set of candidates with the highest score on it (ties all
count). Candidates dominated by the others (every example they are best on
has another surviving candidate that is also best there) are dropped, and a
parent is drawn with probability proportional to how many examples it is
best on::

    table = {0: {"0": 1.0, "1": 0.0}, 1: {"0": 0.0, "1": 1.0}, 2: {"0": 0.0, "1": 0.0}}
    frequencies(table)            # {0: 1, 1: 1}: candidate 2 is never best
    select_parent(table, rng)     # 0 or 1, each with probability 1/2
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

ScoreTable = Mapping[int, Mapping[str, float]]


def _example_order(keys: Iterable[str]) -> list[str]:
    return sorted(set(keys), key=lambda key: (0, int(key), "") if str(key).lstrip("-").isdigit() else (1, 0, str(key)))


def best_sets(table: ScoreTable, examples: Iterable[str] | None = None) -> dict[str, set[int]]:
    """For each example, the candidates with the highest score on it.

    Candidates without a score on an example don't compete there.
    """
    keys = _example_order(examples if examples is not None else (key for row in table.values() for key in row))
    front: dict[str, set[int]] = {}
    for key in keys:
        scored = {cid: row[key] for cid, row in table.items() if key in row}
        if not scored:
            continue
        top = max(scored.values())
        front[key] = {cid for cid, value in scored.items() if value == top}
    return front


def aggregate(table: ScoreTable) -> dict[int, float]:
    """Mean score of each candidate over the examples it was scored on (0 when none)."""
    return {cid: float(np.mean(list(row.values()))) if row else 0.0 for cid, row in table.items()}


def nondominated(front: Mapping[str, set[int]], table: ScoreTable) -> set[int]:
    """Candidates on the front that no combination of the others dominates.

    As in GEPA, the weakest (lowest mean) candidates are examined first, and
    removed one at a time while every example they are best on is also won
    by some surviving candidate.
    """
    remaining = set().union(*front.values()) if front else set()
    means = aggregate({cid: table.get(cid, {}) for cid in remaining})
    changed = True
    while changed and len(remaining) > 1:
        changed = False
        for cid in sorted(remaining, key=lambda c: (means[c], -c)):
            others = remaining - {cid}
            won = [best for best in front.values() if cid in best]
            if won and all(best & others for best in won):
                remaining.discard(cid)
                changed = True
                break
    return remaining


def frequencies(table: ScoreTable, examples: Iterable[str] | None = None) -> dict[int, int]:
    """How many examples each non-dominated candidate is best on."""
    front = best_sets(table, examples)
    keep = nondominated(front, table)
    counts = {cid: 0 for cid in sorted(keep)}
    for best in front.values():
        for cid in best & keep:
            counts[cid] += 1
    return {cid: count for cid, count in counts.items() if count}


def select_parent(table: ScoreTable, rng: np.random.Generator, examples: Iterable[str] | None = None) -> int:
    """A candidate drawn with probability proportional to the examples it is best on."""
    counts = frequencies(table, examples)
    if not counts:
        if not table:
            raise ValueError("select_parent needs at least one scored candidate")
        means = aggregate(table)
        return max(sorted(means), key=lambda cid: means[cid])
    ids = sorted(counts)
    weights = np.array([counts[cid] for cid in ids], dtype=float)
    return int(ids[int(rng.choice(len(ids), p=weights / weights.sum()))])


def select_best(table: ScoreTable) -> int:
    """The candidate with the highest mean (the earliest one on ties)."""
    means = aggregate(table)
    return max(sorted(means), key=lambda cid: means[cid])


def is_improvement(child: Iterable[float], parent: Iterable[float]) -> bool:
    """GEPA's acceptance rule: the child's total on the same minibatch is strictly higher."""
    return float(sum(child)) > float(sum(parent))


def ancestors(parents: Mapping[int, int | None], cid: int) -> list[int]:
    """``cid``'s ancestors, nearest first (``cid`` itself excluded)."""
    found: list[int] = []
    current = parents.get(cid)
    while current is not None and current not in found:
        found.append(current)
        current = parents.get(current)
    return found


def common_ancestor(parents: Mapping[int, int | None], a: int, b: int) -> int | None:
    """The nearest shared ancestor of ``a`` and ``b`` when neither descends from the other."""
    line_a, line_b = ancestors(parents, a), ancestors(parents, b)
    if a in line_b or b in line_a or a == b:
        return None
    shared = [cid for cid in line_a if cid in set(line_b)]
    return shared[0] if shared else None


def merge_components(ancestor: Mapping[str, Any], a: Mapping[str, Any], b: Mapping[str, Any],
                     a_score: float, b_score: float) -> dict[str, Any] | None:
    """Per component, keep the side that changed it since ``ancestor`` (the better side when both did).

    Components are the keys of the mappings (for example ``"qa/state:instructions"``).
    Returns None when the merge would equal ``a`` or ``b`` (nothing to combine).
    """
    merged: dict[str, Any] = {}
    for key in a:
        va, vb, v0 = a[key], b.get(key), ancestor.get(key)
        if va == vb or vb == v0:
            merged[key] = va
        elif va == v0:
            merged[key] = vb
        else:
            merged[key] = va if a_score >= b_score else vb
    if merged == dict(a) or merged == dict(b):
        return None
    return merged
