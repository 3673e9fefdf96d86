"""A fake clock for ``n_epochs="auto"`` (each SFT step and evaluation "takes" set seconds) and scripted
validation losses: the plan and the early stop become exact, while the steps still train the tiny model."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from promptgym.finetune import SFTJob
from promptgym.finetune.sft_run import SFTRun


class FakeClock:
    """``auto_epochs.clock``: a step adds ``step_s``, an evaluation ``eval_s``; nothing else moves it."""

    def __init__(self, step_s: float, eval_s: float) -> None:
        self.now, self.step_s, self.eval_s = 0.0, step_s, eval_s

    def __call__(self) -> float:
        return self.now


def install_clock(monkeypatch: pytest.MonkeyPatch, step_s: float = 1.0, eval_s: float = 2.0) -> FakeClock:
    fake = FakeClock(step_s, eval_s)
    monkeypatch.setattr("promptgym.finetune.auto_epochs.clock", fake)
    real_step = SFTRun.optimizer_step

    def timed_step(self, groups, forward):
        measured = real_step(self, groups, forward)
        fake.now += fake.step_s
        return measured

    monkeypatch.setattr(SFTRun, "optimizer_step", timed_step)
    return fake


def scripted_losses(monkeypatch: pytest.MonkeyPatch, clock: FakeClock, losses: Iterable[float]) -> list[float]:
    """Each evaluation returns the next of ``losses`` (and costs ``clock.eval_s``); returns the ones given out."""
    given: list[float] = []
    values = iter(losses)

    def evaluate(self):
        clock.now += clock.eval_s
        given.append(next(values))
        return given[-1]

    monkeypatch.setattr(SFTJob, "evaluate", evaluate)
    return given
