"""promptgym.utils plotting: files written, numbers that went into them, errors."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from promptgym import utils
from promptgym.utils import (
    graph_layers,
    history_panels,
    metrics_comparison_mean_and_std,
    metrics_mean_and_std,
)
from promptgym.utils._plot_data import is_usage_key, schema_lines
from promptgym.utils._plot_program import node_lines, route

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

HISTORY = {
    "reward": [0.4, 0.5, 0.6, 0.7],
    "f1_score": [0.3, 0.45, 0.5, 0.65],
    "val_reward": [None, 0.45, None, 0.6],
    "val_f1_score": [None, 0.4, math.nan, 0.55],
    "lm_calls": [16, 16, 16, 16],
    "prompt_tokens": [1000, 1100, 1200, 1300],
    "completion_tokens": [200, 210, 220, 230],
}

GRAPH = {
    "nodes": [
        {"id": "in", "label": "Question", "class_name": "Input",
         "schema": {"type": "object", "properties": {"question": {"type": "string"}}}},
        {"id": "cot", "label": "cot", "class_name": "ChainOfThought", "schema": None},
        {"id": "gen", "label": "gen", "class_name": "Generator",
         "schema": {"properties": {"answer": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}},
        {"id": "pick", "label": "pick", "class_name": "Generator", "schema": None},
    ],
    "edges": [["in", "cot"], ["in", "gen"], ["cot", "pick"], ["gen", "pick"], ["in", "pick"]],
}


def assert_png(path: Path) -> None:
    assert path.is_file()
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 2000
    leftovers = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


# -- pure helpers -----------------------------------------------------------------------


def test_history_panels_groups_train_val_and_usage():
    data = history_panels(SimpleNamespace(history=HISTORY, epoch=[0, 1, 2, 3]))
    assert data["epochs"] == [1, 2, 3, 4]
    panels = data["panels"]
    assert list(panels) == ["reward", "f1_score", "Tokens", "LM usage"]
    assert list(panels["reward"]) == ["reward", "val_reward"]
    assert panels["reward"]["reward"] == [0.4, 0.5, 0.6, 0.7]
    val = panels["f1_score"]["val_f1_score"]
    assert math.isnan(val[0]) and val[1] == 0.4 and math.isnan(val[2]) and val[3] == 0.55
    assert set(panels["Tokens"]) == {"prompt_tokens", "completion_tokens"}
    assert set(panels["LM usage"]) == {"lm_calls"}


def test_history_panels_plain_dict_pads_short_series_and_orders_reward_first():
    data = history_panels({"accuracy": [0.1, 0.2, 0.3], "reward": [1, 2, 3], "val_reward": [0.5]})
    assert data["epochs"] == [1, 2, 3]
    assert list(data["panels"]) == ["reward", "accuracy"]
    padded = data["panels"]["reward"]["val_reward"]
    assert padded[0] == 0.5 and math.isnan(padded[1]) and math.isnan(padded[2])


def test_is_usage_key():
    assert is_usage_key("lm_calls") and is_usage_key("val_prompt_tokens") and is_usage_key("reasoning_tokens")
    assert not is_usage_key("reward") and not is_usage_key("val_f1_score")


@pytest.mark.parametrize("bad, error, match", [
    (42, TypeError, "History"),
    (SimpleNamespace(foo=1), TypeError, "History"),
    ({}, ValueError, "empty"),
    ({"reward": 0.5}, TypeError, "reward"),
    ({"reward": [0.5, "x"]}, TypeError, r"history\['reward'\]\[1\]"),
])
def test_history_errors(bad, error, match):
    with pytest.raises(error, match=match):
        history_panels(bad)


def test_metrics_mean_and_std_numbers_and_usage_skipped():
    results = [{"reward": 0.5, "f1_score": 0.6, "prompt_tokens": 900},
               {"reward": 0.7, "f1_score": 0.6, "prompt_tokens": 1100}]
    stats = metrics_mean_and_std(results)
    assert list(stats) == ["reward", "f1_score"]
    assert stats["reward"] == pytest.approx((0.6, 0.1))
    assert stats["f1_score"] == pytest.approx((0.6, 0.0))
    assert metrics_mean_and_std(results, include_usage=True)["prompt_tokens"] == pytest.approx((1000, 100))
    assert metrics_mean_and_std([{"reward": 0.3}]) == {"reward": (0.3, 0.0)}


def test_metrics_mean_and_std_errors():
    with pytest.raises(ValueError, match="empty"):
        metrics_mean_and_std([])
    with pytest.raises(ValueError, match=r"'f1_score' is missing from result\(s\) \[1\]"):
        metrics_mean_and_std([{"reward": 1, "f1_score": 1}, {"reward": 1}])
    with pytest.raises(TypeError, match="single dict"):
        metrics_mean_and_std({"reward": 1.0})
    with pytest.raises(TypeError, match=r"results\[0\]\['reward'\]"):
        metrics_mean_and_std([{"reward": "high"}])
    with pytest.raises(ValueError, match="None/NaN"):
        metrics_mean_and_std([{"reward": None}])


def test_metrics_comparison_numbers_and_errors():
    stats = metrics_comparison_mean_and_std({
        "before_training": [{"reward": 0.2}, {"reward": 0.4}],
        "after_training": [{"reward": 0.8}, {"reward": 0.8}, {"reward": 0.8}],
    })
    assert list(stats) == ["before_training", "after_training"]
    assert stats["before_training"]["reward"] == pytest.approx((0.3, 0.1))
    assert stats["after_training"]["reward"] == pytest.approx((0.8, 0.0))
    with pytest.raises(ValueError, match="empty"):
        metrics_comparison_mean_and_std({})
    with pytest.raises(ValueError, match="'after'.*empty"):
        metrics_comparison_mean_and_std({"before": [{"reward": 1}], "after": []})
    with pytest.raises(ValueError, match=r"condition 'before' has no results for metric\(s\) \['f1'\]"):
        metrics_comparison_mean_and_std({"before": [{"reward": 1}], "after": [{"reward": 1, "f1": 1}]})
    with pytest.raises(TypeError, match="dict"):
        metrics_comparison_mean_and_std([{"reward": 1}])


def test_graph_layers_and_routing():
    assert graph_layers(GRAPH) == [["in"], ["cot", "gen"], ["pick"]]
    layers, hops = route(GRAPH)
    assert hops[("in", "pick")] == ["in", "~in~pick~0", "pick"]
    assert layers[1] == ["cot", "gen", "~in~pick~0"]
    assert hops[("cot", "pick")] == ["cot", "pick"]


@pytest.mark.parametrize("graph, match", [
    ({"nodes": [], "edges": []}, "no nodes"),
    ({"nodes": [{"id": "a"}, {"id": "a"}], "edges": []}, "duplicate"),
    ({"nodes": [{"id": "a"}], "edges": [["a", "b"]]}, "unknown node 'b'"),
    ({"nodes": [{"id": "a"}, {"id": "b"}], "edges": [["a", "b"], ["b", "a"]]}, "cycle"),
])
def test_graph_errors(graph, match):
    with pytest.raises(ValueError, match=match):
        graph_layers(graph)


def test_schema_lines():
    schema = {"properties": {"answer": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                             "kind": {"enum": ["a", "b"]}, "ref": {"$ref": "#/$defs/Thing"},
                             "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    assert schema_lines(schema) == ["answer: string", "tags: array[string]", "kind: enum", "ref: Thing",
                                    "maybe: string|null"]
    assert schema_lines(None) == []
    many = {"properties": {f"f{i}": {"type": "string"} for i in range(12)}}
    assert schema_lines(many, limit=10)[-1] == "… (+2 more)"


# -- plot files -------------------------------------------------------------------------


def test_plot_history_writes_png(tmp_path):
    history = SimpleNamespace(history=HISTORY, epoch=[0, 1, 2, 3])
    path = utils.plot_history(history, to_folder=tmp_path / "new" / "out")
    assert path == tmp_path / "new" / "out" / "training_history.png"
    assert_png(path)
    assert_png(utils.plot_history({"reward": [0.5]}, to_folder=tmp_path, to_file="one.png", title="One epoch"))


def test_plot_history_without_folder_uses_to_file(tmp_path):
    path = utils.plot_history(HISTORY, to_file=tmp_path / "h")
    assert path == tmp_path / "h.png"
    assert_png(path)


def test_plot_metrics_with_mean_and_std_writes_png(tmp_path):
    results = [{"reward": 0.5, "f1_score": 0.6}, {"reward": 0.7, "f1_score": 0.65}]
    path = utils.plot_metrics_with_mean_and_std(results, to_folder=tmp_path, title="Evaluation Results")
    assert path == tmp_path / "evaluation_metrics.png"
    assert_png(path)
    # outside [0, 1] and negative values still plot
    assert_png(utils.plot_metrics_with_mean_and_std([{"reward": -2.0, "score": 30.0}, {"reward": -1.0, "score": 42.0}],
                                                    to_folder=tmp_path, to_file="wide.png"))
    with pytest.raises(ValueError, match="'f1_score' is missing"):
        utils.plot_metrics_with_mean_and_std([{"reward": 1, "f1_score": 1}, {"reward": 1}], to_folder=tmp_path)


def test_plot_metrics_comparison_writes_png(tmp_path):
    path = utils.plot_metrics_comparison_with_mean_and_std(
        {"before_training": [{"reward": 0.3, "f1_score": 0.2}, {"reward": 0.35, "f1_score": 0.3}],
         "after_training": [{"reward": 0.7, "f1_score": 0.6}, {"reward": 0.75, "f1_score": 0.62}]},
        to_folder=tmp_path, title="Training Improvement")
    assert path == tmp_path / "metrics_comparison.png"
    assert_png(path)


def test_plot_program_with_fake_program(tmp_path):
    program = SimpleNamespace(name="ensemble", get_graph=lambda: GRAPH)
    path = utils.plot_program(program, to_folder=tmp_path)
    assert path == tmp_path / "program.png"
    assert_png(path)
    assert_png(utils.plot_program(program, to_file="schemas.png", to_folder=tmp_path, show_schemas=True))
    assert_png(utils.plot_program(GRAPH, to_file=tmp_path / "dict.png"))
    with pytest.raises(TypeError, match="get_graph"):
        utils.plot_program(object(), to_folder=tmp_path)


def test_node_lines_follow_synalinks_plot_options():
    gen = {**GRAPH["nodes"][2], "trainable": True, "schema": {**GRAPH["nodes"][2]["schema"], "$defs": {"Tag": {}}}}
    texts = lambda **options: [text for text, _ in node_lines(gen, **options)]  # noqa: E731
    assert texts() == ["gen", "Generator"]
    assert texts(show_module_names=False) == ["Generator"]
    assert texts(show_trainable=True) == ["gen", "Generator", "trainable"]
    assert texts(show_schemas=True, show_defs=True) == ["gen", "Generator", "answer: string", "tags: array[string]",
                                                        "$defs: Tag"]
    assert texts(show_schemas=True) == ["gen", "Generator", "answer: string", "tags: array[string]"]
    # an input box keeps its data model's name; it has no trainable line
    assert [t for t, _ in node_lines(GRAPH["nodes"][0], show_module_names=False, show_trainable=True)] == [
        "Question", "Input"]


def test_plot_program_takes_synalinks_arguments(tmp_path):
    path = utils.plot_program(GRAPH, to_file="s.png", to_folder=tmp_path, show_schemas=True, show_module_names=True,
                              show_defs=True, show_trainable=True, rankdir="TB", expand_nested=False, dpi=60)
    assert_png(path)
    with pytest.raises(ValueError, match="rankdir='LR' is not supported"):
        utils.plot_program(GRAPH, to_folder=tmp_path, rankdir="LR")
    with pytest.raises(ValueError, match="expand_nested"):
        utils.plot_program(GRAPH, to_folder=tmp_path, expand_nested=True)


async def test_program_graph_says_which_modules_are_trainable():
    from promptgym import Generator, Input, Lambda, Program
    from promptgym.testing import ScriptedLanguageModel
    from tests.support import Answer, Question

    inputs = Input(data_model=Question)
    answer = await Generator(data_model=Answer, language_model=ScriptedLanguageModel(responses=[{"answer": "x"}]),
                             name="answerer")(inputs)
    outputs = await Lambda(lambda value: value, data_model=Answer, name="same")(answer)
    graph = Program(inputs=inputs, outputs=outputs).get_graph()
    assert {node["label"]: node.get("trainable") for node in graph["nodes"] if node["class_name"] != "Input"} == {
        "answerer": True, "same": False}


def test_plot_overwrites_atomically(tmp_path):
    target = tmp_path / "training_history.png"
    target.write_bytes(b"old")
    utils.plot_history(HISTORY, to_folder=tmp_path)
    assert_png(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["training_history.png"]


def test_unsupported_extension(tmp_path):
    with pytest.raises(ValueError, match="unsupported image format"):
        utils.plot_history(HISTORY, to_folder=tmp_path, to_file="h.gif")


# -- optional dependency ----------------------------------------------------------------


def test_importing_utils_does_not_import_matplotlib():
    code = ("import sys, promptgym.utils as u, promptgym.utils.plotting; "
            "u.history_panels({'reward': [1.0]}); print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_matplotlib_gives_install_hint(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for call in (lambda: utils.plot_history(HISTORY, to_folder=tmp_path),
                 lambda: utils.plot_metrics_with_mean_and_std([{"reward": 1.0}], to_folder=tmp_path),
                 lambda: utils.plot_program(GRAPH, to_folder=tmp_path)):
        with pytest.raises(ImportError, match=r"pip install 'promptgym\[plots\]'"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_unknown_attribute():
    with pytest.raises(AttributeError):
        utils.plot_nothing  # noqa: B018


def test_comparison_bars_use_the_interval_of_a_single_evaluation():
    from promptgym.stats import Evaluation
    from promptgym.utils import comparison_error_bars, paired_comparison

    before = Evaluation({"reward": [0] * 20 + [1] * 10})
    after = Evaluation({"reward": [1] * 18 + [0] * 2 + [1] * 10})
    bars = comparison_error_bars({"before": [before], "after": [after]})
    mean, below, above, kind = bars["before"]["reward"]
    interval = before.interval()
    assert kind == "ci" and mean == pytest.approx(1 / 3)
    assert (mean - below, mean + above) == (pytest.approx(interval.low), pytest.approx(interval.high))
    plain = comparison_error_bars({"before": [dict(before), {"reward": 0.5}], "after": [dict(after)]})
    assert plain["before"]["reward"][3] == "std" and plain["after"]["reward"][1:3] == (0.0, 0.0)
    paired = paired_comparison({"before": [before], "after": [after]})
    assert (paired.wins, paired.losses, paired.method) == (18, 0, "mcnemar-exact")
    assert paired_comparison({"before": [dict(before)], "after": [after]}) is None
    assert paired_comparison({"a": [before], "b": [after], "c": [after]}) is None


def test_plot_comparison_with_intervals_writes_png(tmp_path):
    from promptgym.stats import Evaluation

    path = utils.plot_metrics_comparison_with_mean_and_std(
        {"before_training": [Evaluation({"reward": [0, 1, 0, 0]})],
         "after_training": [Evaluation({"reward": [1, 1, 1, 0]})]}, to_folder=tmp_path)
    assert path.read_bytes()[:8] == PNG_MAGIC
