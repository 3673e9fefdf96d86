"""The reasoning-gym bridge (skipped where the optional package is absent)."""

import importlib

import pytest

from promptgym.datasets import reasoning_gym as rg_bridge


def test_missing_package_error_names_the_pin(monkeypatch):
    real = importlib.import_module

    def fake(name, *args, **kwargs):
        if name == "reasoning_gym":
            raise ImportError("no")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(ImportError, match=r'pip install "reasoning-gym==0\.1\.25"'):
        rg_bridge.load_data("chain_sum")


def test_chain_sum_is_seeded_and_exact():
    rg = pytest.importorskip("reasoning_gym")
    (x_train, y_train), (x_test, y_test) = rg_bridge.load_data(
        "chain_sum", n_train=8, n_test=4, seed=0, min_terms=2, max_terms=3, min_digits=1, max_digits=1)
    assert (len(x_train), len(y_train), len(x_test), len(y_test)) == (8, 8, 4, 4)
    ds = rg.create_dataset("chain_sum", size=12, seed=0, min_terms=2, max_terms=3,
                           min_digits=1, max_digits=1)
    assert [x.question for x in [*x_train, *x_test]] == [ds[i]["question"] for i in range(12)]
    assert [y.answer for y in [*y_train, *y_test]] == [str(ds[i]["answer"]) for i in range(12)]
    for x, y in zip(x_train, y_train):
        expr = x.question.rsplit(":", 1)[-1].strip().rstrip("=").strip()
        assert int(y.answer) == eval(expr)
    again, _ = rg_bridge.load_data("chain_sum", n_train=8, n_test=4, seed=0, min_terms=2,
                                   max_terms=3, min_digits=1, max_digits=1)
    assert [x.question for x in again[0]] == [x.question for x in x_train]


def test_unknown_task_or_option_is_a_clear_error():
    pytest.importorskip("reasoning_gym")
    with pytest.raises(ValueError, match="reasoning-gym task 'no_such_task'"):
        rg_bridge.load_data("no_such_task")
    with pytest.raises(ValueError, match="reasoning-gym task 'chain_sum' with config"):
        rg_bridge.load_data("chain_sum", not_an_option=1)
