"""Cost beside score: the candidates' points, the Pareto front, the plot, evaluate()'s cost, the summary cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import promptgym as pg
from promptgym.cli.artifacts import cost_cells
from promptgym.testing import ScriptedLanguageModel, last_user_json
from promptgym.utils import CostPoint, cost_points, pareto_front, plot_cost_vs_score
from tests.support import functional_program, labelled


def entry(candidate, score, tokens, usd, start_score=0.5, start_tokens=100, start_usd=0.001, accepted=True,
          stage=None):
    return {"candidate": candidate, "incumbent": 0, "accepted": accepted, "stage": stage,
            "candidate_score": {"mean": score}, "incumbent_score": {"mean": start_score},
            "tokens_per_call": {"candidate": tokens, "start": start_tokens},
            "usd_per_call": {"candidate": usd, "start": start_usd}}


COMPARISONS = [
    entry(1, 0.70, 150, 0.0015),                   # on the front: better than the start for a bit more
    entry(2, 0.65, 300, 0.0030, accepted=False),   # dominated by 1 (costlier and worse)
    entry(3, 0.90, 400, 0.0040),                   # on the front: the best score
    entry(4, 0.90, 500, 0.0050),                   # same score as 3, dearer: dominated
    entry(1, 0.70, 150, 0.0015),                   # a second check of 1: one point
]


def test_the_pareto_front_of_the_candidates():
    points = cost_points(COMPARISONS)
    assert sorted(p.label for p in points) == ["candidate 1", "candidate 2", "candidate 3", "candidate 4", "start"]
    assert {p.unit for p in points} == {"$/call"}
    front = pareto_front(points)
    assert [(p.label, p.cost, p.score) for p in front] == [
        ("start", 0.001, 0.5), ("candidate 1", 0.0015, 0.7), ("candidate 3", 0.004, 0.9)]


def test_without_prices_the_cost_is_tokens_per_call():
    unpriced = [entry(1, 0.8, 300, None, start_usd=None), entry(2, 0.8, 200, None, start_usd=None)]
    points = cost_points(unpriced)
    assert {p.unit for p in points} == {"tokens/call"}
    assert [(p.label, p.cost) for p in pareto_front(points)] == [("start", 100.0), ("candidate 2", 200.0)]


def test_equal_points_count_once_on_the_front():
    points = [CostPoint("a", 1.0, 0.5, "$"), CostPoint("b", 1.0, 0.5, "$"), CostPoint("c", 2.0, 0.4, "$")]
    assert [p.label for p in pareto_front(points)] == ["a"]


def test_the_plot_is_written(tmp_path: Path):
    path = plot_cost_vs_score(COMPARISONS, to_folder=tmp_path)
    assert path == tmp_path / "cost_vs_score.png" and path.stat().st_size > 1000
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_cost_vs_score([], to_folder=tmp_path)


async def test_evaluate_reports_the_cost_beside_the_score():
    def answer(request):
        return {"answer": last_user_json(request)["question"].upper()}

    lm = ScriptedLanguageModel(respond=answer, price={"input_per_mtok": 1.0, "output_per_mtok": 4.0})
    program = await functional_program(lm)
    program.compile(reward=pg.rewards.ExactMatch())
    x, y = labelled("a", "b", "c")
    result = await program.evaluate(x, y, verbose=0)
    assert result["reward"] == 1.0 and "cost_usd" not in result  # the dict stays Keras' dict
    tokens = [sum(len(str(m["content"]).split()) for m in r.messages) + 2 for r in lm.requests]
    assert result.cost["tokens_per_call"] == pytest.approx(np.mean(tokens))
    by_hand = sum(((t - 2) * 1.0 + 2 * 4.0) / 1e6 for t in tokens)
    assert result.cost["cost_usd"] == pytest.approx(by_hand)
    assert result.cost["usd_per_call"] == pytest.approx(by_hand / 3)
    again = pg.stats.Evaluation.from_statistics(dict(result), result.statistics())
    assert again.cost == result.cost


def test_the_run_summary_shows_tokens_and_dollars_per_call():
    status = {"statistics": {"cost": {"tokens_per_call": 212.4, "usd_per_call": 0.000105}}}
    assert cost_cells(status) == " 212 | $0.000105 |"
    assert cost_cells({"statistics": {"cost": {"tokens_per_call": 80.0, "usd_per_call": None}}}) == " 80 | unknown |"
    assert cost_cells({}) == " - | - |"
