"""Artifacts of a finished run: candidates.json, plots/, summary.md."""

from __future__ import annotations

import json
import logging
from typing import Any

from promptgym.cli.build import RunPlan
from promptgym.runs.folder import RunFolder
from promptgym.core.atomic import atomic_write_json
from promptgym.modules.retrieval import describe_retrieval
from promptgym.optimizers import Optimizer
from promptgym.programs.program import Program
from promptgym.stats import Evaluation, format_p
from promptgym.runs.history import history_columns
from promptgym.training.progress import HIDDEN_BY_DEFAULT
from promptgym.training.spend import format_usd
from promptgym.utils import (  # matplotlib loads when plotting
    cost_points,
    plot_cost_vs_score,
    plot_history,
    plot_metrics_comparison_with_mean_and_std,
)

logger = logging.getLogger("promptgym")
TOP_CANDIDATES = 5


def ranked_candidates(optimizer: Optimizer) -> list[dict[str, Any]]:
    """Candidates by mean validation score (then train), best first."""
    ranked = []
    for candidate in optimizer.candidates:
        split = "val" if candidate.scores.get("val") else "train"
        score = candidate.mean(split)
        ranked.append({"id": candidate.id, "origin": candidate.origin, "parent": candidate.parent,
                       "epoch": candidate.epoch, "split": split, "score": score,
                       "examples": len(candidate.scores.get(split, {})), "best": candidate.id == optimizer.best_id})
    return sorted(ranked, key=lambda item: (-(item["score"] if item["score"] is not None else -1), item["id"]))


def stored_evaluation(entry: dict[str, Any] | None) -> Evaluation | None:
    """The Evaluation a run status keeps for the baseline or the best program (None if it has no scores)."""
    if not entry or not (entry.get("statistics") or {}).get("scores"):
        return None
    means = {key: value for key, value in entry.items() if key not in ("split", "size", "statistics")}
    return Evaluation.from_statistics(means, entry["statistics"])


def paired_evaluations(status: dict[str, Any]) -> tuple[Evaluation, Evaluation] | None:
    """Baseline and best, when both were scored on the same examples (so a paired test applies)."""
    baseline, final = status.get("baseline") or {}, status.get("final") or {}
    before, after = stored_evaluation(baseline), stored_evaluation(final)
    if before is None or after is None or (baseline.get("split"), before.n) != (final.get("split"), after.n):
        return None
    return before, after


def plotted_history(columns: dict[str, list[float]]) -> dict[str, list[float]]:
    """The history columns the training plot draws: quality, calls, tokens and the run's total cost.

    Breakdowns and spend details (``lm_calls_<phase>``, ``cost_usd_<phase>``, ``saved_usd``, ``compute_s``,
    ``unpriced_calls``...) stay in history.csv and summary.md, as in the progress bar: a panel each made the
    figure 13 panels, most of them zeros, and drawing it most of a short run's time.

    >>> sorted(plotted_history({"reward": [1.0], "cost_usd": [0.1], "cost_usd_judge": [0.0], "lm_calls_inference": [3]}))
    ['cost_usd', 'reward']
    """
    return {key: values for key, values in columns.items()
            if not key.startswith(("lm_calls_", *HIDDEN_BY_DEFAULT)) and key not in ("failures", "unpriced_calls")}


def write_plots(run: RunFolder, status: dict[str, Any] | None = None) -> list[str]:
    history = plotted_history(history_columns(run.path / "history.csv"))
    pair = paired_evaluations(status or {})
    written = []
    try:
        if history:
            written.append(plot_history(history, to_folder=run.path / "plots", to_file="training_history.png",
                                        title=run.id))
        points = cost_points(run_comparisons(run))
        if len(points) > 1:
            written.append(plot_cost_vs_score(points, to_folder=run.path / "plots", title=f"{run.id}: cost vs score"))
        if pair is not None:
            written.append(plot_metrics_comparison_with_mean_and_std(
                {"baseline": [pair[0]], "best": [pair[1]]}, to_folder=run.path / "plots", to_file="before_after.png",
                title=f"{run.id}: baseline vs best on {pair[0].n} {status['final'].get('split')} examples"))
    except Exception as error:  # noqa: BLE001 - a missing plotting extra must not fail the run
        logger.warning("plots skipped: %s", error)
    return [str(path.relative_to(run.path)) for path in written]


def run_comparisons(run: RunFolder) -> list[dict[str, Any]]:
    """``history.comparisons`` as the run's events logged them."""
    return [event["comparison"] for event in run.events()
            if event["event"] in ("candidate_accepted", "candidate_rejected") and event.get("comparison")]


def cost_cells(entry: dict[str, Any]) -> str:
    """``| 212 | $0.000105 |``: tokens and dollars per call of an evaluation (``-`` when not measured)."""
    cost = (entry.get("statistics") or {}).get("cost") or {}
    tokens = cost.get("tokens_per_call")
    usd = cost.get("usd_per_call")
    return (f" {tokens:.0f} |" if tokens is not None else " - |") + \
        (f" {format_usd(usd)} |" if usd is not None else (" unknown |" if tokens is not None else " - |"))


def _score(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def prompt_section(program: Program) -> list[str]:
    lines = ["## Best prompt per Generator", ""]
    for name, value in program.get_variables().items():
        if not isinstance(value, dict) or "instructions" not in value:
            continue
        lines += [f"### `{name}`", "", "Instructions:", "", "```text", str(value["instructions"]), "```", ""]
        examples = value.get("examples", [])
        lines.append(f"Few-shot examples: {len(examples)}")
        if value.get("retrieval"):
            lines.append(f"Retrieved per input: {describe_retrieval(value['retrieval'])}")
        for example in examples[:5]:
            lines.append(f"- `{json.dumps(example.get('inputs'), ensure_ascii=False)[:160]}` -> "
                         f"`{json.dumps(example.get('outputs'), ensure_ascii=False)[:160]}`")
        lines.append("")
    return lines


def _interval(entry: dict[str, Any], reward: str) -> str:
    evaluation = stored_evaluation(entry)
    if evaluation is None or not evaluation.n:
        return "-"
    interval = evaluation.interval(reward)
    return f"[{interval.low:.3f}, {interval.high:.3f}]"


def improvement_lines(status: dict[str, Any], reward: str) -> list[str]:
    """The change from baseline to best, with the paired test when both ran on the same examples."""
    before, after = (status.get("baseline") or {}).get(reward), (status.get("final") or {}).get(reward)
    if before is None or after is None:
        return ["Improvement: **n/a**", ""]
    pair = paired_evaluations(status)
    if pair is None:
        return [f"Improvement: **{after - before:+.3f}** (no paired test: not scored on the same examples)", ""]
    test = pair[1].compare(pair[0], reward)
    return [f"Improvement: **{test.difference:+.3f}**, 95% CI [{test.low:+.3f}, {test.high:+.3f}], "
            f"{format_p(test.p_value)} ({test.method}) on the same {test.n} examples "
            f"({test.wins} better, {test.losses} worse): **{test.verdict()}**.", "",
            "The interval is where the true difference lies with 95% confidence; when it includes 0 (or p >= 0.05), "
            "the best program is not shown to be better than the baseline on examples like these.", ""]


def validation_lines(run: RunFolder) -> list[str]:
    """The last epoch's validation scores with their 95% intervals (from the run's epoch_end events)."""
    intervals = {}
    for event in run.events():
        if event["event"] == "epoch_end" and event.get("intervals"):
            intervals = event["intervals"]
    if not intervals:
        return []
    shown = "; ".join(f"`{key}` {item['mean']:.3f} [{item['low']:.3f}, {item['high']:.3f}] (n={item['n']})"
                      for key, item in intervals.items())
    return [f"Validation, last epoch (95% CI): {shown}", ""]


def stage_lines(run: RunFolder) -> list[str]:
    """A chain's stages: each one's validation score with its interval, and its check against its start."""
    ended = [event for event in run.events() if event["event"] == "stage_ended"]
    if not ended:
        return []
    lines = ["## Stages", "", "| stage | validation (95% CI) | vs its start | LM calls | seconds |", "|---|---|---|---|---|"]
    for event in ended:
        val, check = event.get("val"), event.get("comparison")
        score = f"{val['mean']:.3f} [{val['low']:.3f}, {val['high']:.3f}] (n={val['n']})" if val else "-"
        versus = "kept its start" if not check else (
            f"{'kept' if check['accepted'] else 'undone'}: {check['test']['difference']:+.3f}, "
            f"p={check['test']['p_value']:.3g}")
        lines.append(f"| {event['stage']} | {score} | {versus} | {event.get('lm_calls', 0)} | "
                     f"{event.get('seconds', 0):.0f} |")
    return [*lines, ""]


def summary_markdown(run: RunFolder, job: RunPlan, status: dict[str, Any], ranked: list[dict[str, Any]]) -> str:
    baseline, final = status.get("baseline") or {}, status.get("final") or {}
    reward = job.reward.name
    before, after = baseline.get(reward), final.get(reward)
    config = job.config
    lines = [
        f"# Run {run.id}", "",
        f"- Job: {config.job.type}, name `{config.job.name}`, seed {config.job.seed}",
        f"- Model: `{config.model.name}`",
        f"- Optimizer: `{config.optimizer.name}` {json.dumps(config.optimizer.params) if config.optimizer.params else ''}",
        "- Data: " + ", ".join(f"{k} {v}" for k, v in job.data.sizes().items()),
        f"- Epochs done: {status.get('epochs_done', 0)} of {config.training.epochs}",
        f"- LM calls: {status.get('lm_calls', 0)} (cache hits included), {status.get('lm_failures', 0)} failed",
        spend_line(status),
        f"- Failed examples: {failures_line(status)}",
        f"- Time: {status.get('elapsed_s', 0):.1f} s", "",
        "## Scores", "",
        f"| | {reward} | 95% CI | split | examples | tokens/call | $/call |", "|---|---|---|---|---|---|---|",
        f"| baseline | {_score(before)} | {_interval(baseline, reward)} | {baseline.get('split', '-')} | "
        f"{baseline.get('size', '-')} |{cost_cells(baseline)}",
        f"| best | {_score(after)} | {_interval(final, reward)} | {final.get('split', '-')} | {final.get('size', '-')} |"
        f"{cost_cells(final)}",
        "", *improvement_lines(status, reward), *validation_lines(run), *stage_lines(run),
    ]
    lines += prompt_section(job.program)
    lines += ["## Top candidates", "", "| id | origin | parent | score | split | examples | best |",
              "|---|---|---|---|---|---|---|"]
    for item in ranked[:TOP_CANDIDATES]:
        lines.append(f"| {item['id']} | {item['origin']} | {item['parent'] if item['parent'] is not None else '-'} | "
                     f"{_score(item['score'])} | {item['split']} | {item['examples']} | {'yes' if item['best'] else ''} |")
    lines += ["", f"{len(ranked)} candidates in total; all of them in `candidates.json`.", "",
              "Files: `best_program.json`, `history.csv`, `events.jsonl`, `checkpoints/`, `plots/`, `config.toml`.", ""]
    return "\n".join(lines)


def failure_counts(status: dict[str, Any]) -> dict[str, Any]:
    """Failed examples by phase: ``{"baseline": 0, "training": 2, "best": 0}`` (a phase that didn't run is None)."""
    def of(entry: Any) -> Any:
        return entry.get("failures") if isinstance(entry, dict) else None

    return {"baseline": of(status.get("baseline")), "training": status.get("training_failures", 0),
            "best": of(status.get("final"))}


def failures_line(status: dict[str, Any]) -> str:
    """``baseline 0 of 30, training 2, best 0 of 30``."""
    counts = failure_counts(status)
    parts = []
    for phase, entry in (("baseline", status.get("baseline")), ("training", None), ("best", status.get("final"))):
        if counts[phase] is None:
            continue
        size = f" of {entry['size']}" if isinstance(entry, dict) and "size" in entry else ""
        parts.append(f"{phase} {counts[phase]}{size}")
    return ", ".join(parts) or "none"


def spend_line(status: dict[str, Any]) -> str:
    """``- Spend: $0.0123 (cache saved $0.0040; cap $1.0000)``, marked unknown when calls had no price."""
    line = f"- Spend: {format_usd(float(status.get('cost_usd') or 0.0), int(status.get('unpriced_calls') or 0))}"
    notes = []
    if status.get("saved_usd"):
        notes.append(f"cache saved {format_usd(float(status['saved_usd']))}")
    if status.get("max_usd") is not None:
        notes.append(f"cap {format_usd(float(status['max_usd']))}" +
                     (", reached" if status.get("stopped_by") == "max_usd" else ""))
    return line + (f" ({'; '.join(notes)})" if notes else "")


def write_budget_summary(run: RunFolder, status: dict[str, Any]) -> None:
    """summary.md of a run that ``[budget] max_usd`` stopped: what it spent, and how to go on."""
    lines = [f"# Run {run.id}: stopped by max_usd", "", spend_line(status),
             f"- Epochs done: {status.get('epochs_done', 0)}",
             f"- LM calls: {status.get('lm_calls', 0)} (cache hits included), {status.get('lm_failures', 0)} failed",
             f"- Time: {status.get('elapsed_s', 0):.1f} s", "",
             "The run stopped before a model call would cross its cap; `best_program.json` is the best program "
             "so far. To go on, raise `[budget] max_usd` in the run folder's `config.toml`, then "
             f"`promptgym train --resume {run.id}`.", ""]
    run.write_text("summary.md", "\n".join(lines))


def write_failure_summary(run: RunFolder, status: dict[str, Any]) -> None:
    """summary.md of a run that failed: what went wrong, and the counts so far."""
    lines = [f"# Run {run.id}: failed", "", f"- Error: {status.get('error')}",
             f"- Epochs done: {status.get('epochs_done', 0)}",
             f"- LM calls: {status.get('lm_calls', 0)} (cache hits included), {status.get('lm_failures', 0)} failed",
             f"- Failed examples: {failures_line(status)}", f"- Time: {status.get('elapsed_s', 0):.1f} s", "",
             "Every event, failures included, is in `events.jsonl`; fix the cause, then "
             f"`promptgym train --resume {run.id}`.", ""]
    run.write_text("summary.md", "\n".join(lines))


def write_artifacts(run: RunFolder, job: RunPlan, status: dict[str, Any]) -> None:
    optimizer = job.program.training_setup.optimizer
    ranked = ranked_candidates(optimizer)
    atomic_write_json(run.path / "candidates.json", {"best_id": optimizer.best_id, "ranked": ranked,
                                                     "candidates": optimizer.export_candidates()})
    plots = write_plots(run, status)
    run.update_status(plots=plots)
    run.write_text("summary.md", summary_markdown(run, job, status, ranked))
