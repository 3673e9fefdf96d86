"""The page's pure parts: SVG charts, the start->best diff, which program files a run's states come from."""

from __future__ import annotations

import json
from pathlib import Path

from promptgym.ui.charts import line_chart
from promptgym.ui.run_views import comparisons, curves, program_states, variable_diff


def test_a_chart_draws_each_series_with_gaps_and_escapes_its_labels() -> None:
    svg = line_chart({"val_reward": [0.2, float("nan"), 0.6, 0.8], "<b>x</b>": [1.0, 2.0]}, x=[0, 1, 2, 3],
                     bands={"val_reward": [(0.1, 0.3), None, (0.4, 0.8), None]}, title="a & b")
    assert 'data-series="val_reward" data-points="3"' in svg and 'data-points="2"' in svg
    assert svg.count("<polyline") == 3  # the missing epoch splits val_reward's line in two
    assert svg.count('class="band"') == 2
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg and "a &amp; b" in svg
    unreadable_x = line_chart({"loss": [1.0, 0.5, 0.25]}, x=[1, float("nan"), 3])
    assert 'data-points="2"' in unreadable_x and "nan" not in unreadable_x.lower()  # a row without its step is skipped
    empty = line_chart({}, title="nothing")
    assert "no history yet" in empty and "<polyline" not in empty


def test_curves_of_a_weight_run_use_its_steps_and_leave_out_costs(tmp_path: Path) -> None:
    history = tmp_path / "history.csv"
    history.write_text("step,epoch,loss,lr,tokens_per_s,eval_loss\n1,0.5,2.0,0.001,50,\n2,1.0,1.5,0.001,52,1.7\n")
    series, xs, bands, x_label = curves(history, [])
    assert (x_label, xs, sorted(series)) == ("step", [1.0, 2.0], ["eval_loss", "loss"]) and bands == {}
    assert curves(tmp_path / "missing.csv", []) == ({}, [], {}, "row")


def test_the_diff_names_changed_words_and_demonstrations() -> None:
    before = {"g/state": {"instructions": "Answer the question.", "examples": [{"inputs": {"q": 1}, "outputs": {"a": 1}}]}}
    after = {"g/state": {"instructions": "Answer the question briefly.", "examples": [{"inputs": {"q": 2}, "outputs": {"a": 2}}],
                         "retrieval": {"k": 3}}}
    (entry,) = variable_diff(before, after)
    assert [(op["op"], op["text"]) for op in entry["instructions"]] == [
        ("same", "Answer the"), ("removed", "question."), ("added", "question briefly.")]
    assert [item["op"] for item in entry["examples"]] == ["added", "removed"]
    assert entry["other"] == [{"field": "retrieval", "before": None, "after": {"k": 3}}] and entry["changed"]
    assert variable_diff(before, before)[0]["changed"] is False


def test_a_running_run_s_states_come_from_its_newest_checkpoint(tmp_path: Path) -> None:
    assert program_states(tmp_path)["source"] is None
    state = {"best_id": 2, "candidates": [{"id": 0, "origin": "initial", "variables": {"g": {"instructions": "a"}}},
                                          {"id": 2, "origin": "mutation", "variables": {"g": {"instructions": "b"}}}]}
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.json").write_text(json.dumps({"variables": {}, "optimizer_state": state}))
    assert program_states(tmp_path) == {"before": {"g": {"instructions": "a"}}, "after": {"g": {"instructions": "b"}},
                                        "source": "checkpoints/last.json"}
    (tmp_path / "checkpoints" / "last.json").write_text("{torn")
    assert program_states(tmp_path)["source"] is None  # unreadable: nothing shown rather than a crash


def test_comparisons_keep_only_the_checks_with_a_comparison() -> None:
    events = [{"event": "candidate_accepted", "candidate": 1, "comparison": None},
              {"event": "candidate_rejected", "comparison": {"accepted": False, "candidate": 3}, "time": 5.0},
              {"event": "stage_ended", "comparison": {"accepted": True, "candidate": 4}},
              {"event": "epoch_end", "comparison": {"accepted": True}}]
    assert [(item["event"], item["candidate"]) for item in comparisons(events)] == [
        ("candidate_rejected", 3), ("stage_ended", 4)]
