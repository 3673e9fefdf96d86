"""What a FineTune stage says in ``history.comparisons``: what it trained, for how long, why it stopped, why kept.

Each SFT job's :func:`training_entry` (rows, epochs, steps, seconds, validation losses, the exported step,
the stop reason, the ``n_epochs="auto"`` plan) rides on the stage's comparison (:class:`TrainedComparison`),
with a one-line ``verdict``::

    comparison = history.comparisons[-1]
    comparison["training"][0]["steps"], comparison["training"][0]["stopped"]
    comparison["verdict"]     # 'kept: val 0.900 [...] vs start 0.800 [...]: +0.100 ...'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from promptgym.optimizers.selection import Comparison


@dataclass(frozen=True)
class TrainedComparison(Comparison):
    """A FineTune candidate's comparison, with what each SFT job behind it trained."""

    training: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "training": [dict(entry) for entry in self.training], "verdict": verdict(self)}


def with_training(comparison: Comparison, training: list[dict[str, Any]]) -> TrainedComparison:
    """``comparison`` (every field it has) with the SFT jobs' entries."""
    fields = {item.name: getattr(comparison, item.name) for item in dataclasses.fields(comparison)
              if item.name != "training"}
    return TrainedComparison(**fields, training=tuple(training))


def verdict(comparison: Comparison) -> str:
    """Why the candidate was kept or dropped, in one line."""
    if comparison.accepted:
        return f"kept: {comparison.brief()}"
    if getattr(comparison, "dropped_for_cost", False):
        return f"dropped: ahead on validation but costlier per call, without a significant win: {comparison.brief()}"
    difference = comparison.test.difference
    why = "behind another contender" if difference > 0 else "not ahead of the " + comparison.incumbent_label
    return f"dropped ({why}): {comparison.brief()}"


def training_entry(base_model: str, result: Any, rows: int, validation_rows: int, n_epochs: int | str) -> dict[str, Any]:
    """One SFT job's entry, from its result (:class:`promptgym.finetune.sft_finish.SFTResult`)."""
    return {"base_model": base_model, "model": result.model_id, "rows": rows, "validation_rows": validation_rows,
            "n_epochs": n_epochs,
            "epochs": result.epochs, "steps": result.steps, "seconds": result.elapsed_s,
            "validation_losses": result.eval_losses, "exported_step": result.exported_step,
            "best_validation_loss": result.best_eval_loss, "stopped": result.stop_reason, "plan": result.plan}
