"""Live progress from the event stream: event lines (``cli``) or a terminal chart (``chart``) of rewards
(prompt learning) or losses (weight training)."""

from __future__ import annotations

from typing import Any, Callable

from rich.console import Console

from promptgym.core.events import (
    CandidateAccepted,
    CandidateScored,
    CheckpointSaved,
    EpochEnd,
    Evaluated,
    ExampleFailed,
    ModelExported,
    ModelRegistered,
    Resumed,
    RLEvaluation,
    RLIteration,
    RLStarted,
    RolloutFailedEvent,
    RunFinished,
    RunStarted,
    SFTEval,
    SFTPlanned,
    SFTStarted,
    SFTStep,
    SpendCapHit,
    StepEnd,
    TrainBegin,
    from_record,
)
from promptgym.training.spend import format_usd

WHEN = {"before": "before training", "final": "after training", "after": "after training"}


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def describe(record: dict[str, Any]) -> str | None:
    """One human line per event record (None for events not worth a line)."""
    match from_record(record):
        case RunStarted(run_id=run_id, resume=resume):
            return f"run {run_id} started" + (" (resume)" if resume else "")
        case Resumed(from_epoch=epoch, checkpoint=checkpoint, from_step=step):
            return f"resuming from {checkpoint} at epoch {epoch + 1}, step {step + 1}"
        case TrainBegin() as event:
            return (f"training: {event.epochs} epoch(s), {event.steps} step(s) per epoch, "
                    f"{event.train_size} train / {event.val_size} validation examples")
        case CandidateScored() as event:
            return f"  candidate {event.candidate} vs incumbent {event.incumbent}: lead {event.lead:+g} on {event.where}"
        case CandidateAccepted(candidate=candidate, reason=reason):
            return f"  accepted candidate {candidate} ({reason})"
        case ExampleFailed(split=split, index=index, error=error):
            return f"  ! {split} example {index} failed: {error}"
        case EpochEnd(epoch=epoch, logs=logs, best_candidate=best):
            shown = " ".join(f"{key}={_fmt(logs[key])}" for key in ("reward", "val_reward", "lm_calls", "failures")
                             if logs.get(key) is not None)
            spend = f" cost={format_usd(logs['cost_usd'], int(logs.get('unpriced_calls') or 0))}" \
                if isinstance(logs.get("cost_usd"), (int, float)) else ""
            return f"epoch {epoch + 1}: {shown}{spend} (best candidate {best})"
        case SpendCapHit() as event:
            return (f"stopped by max_usd={format_usd(event.limit_usd)}: {format_usd(event.spent_usd)} spent; "
                    f"the best program so far is kept (resume goes on at epoch {event.epoch + 1}, step {event.step + 1})")
        case SFTStarted() as event:
            resumed = f", resuming after step {event.resume_from_step}" if event.resume_from_step else ""
            return (f"fine-tuning {event.base_model}: {event.train_rows} training / {event.validation_rows} validation "
                    f"rows, {event.epochs} epoch(s), {event.steps} steps, {event.trainable_parameters:,} trainable "
                    f"parameters{resumed}")
        case SFTStep() as event:
            speed = f"  {event.tokens_per_s:.0f} tokens/s" if event.tokens_per_s is not None else ""
            evaluated = f"  eval loss {event.eval_loss:.4f}" if event.eval_loss is not None else ""
            return f"step {event.step}/{event.total_steps}  loss {event.loss:.4f}  lr {event.lr:.2e}{speed}{evaluated}"
        case SFTPlanned() as event:
            capped = f" (capped: {event.capped})" if event.capped else ""
            return (f"n_epochs='auto': {event.steps} steps ({event.epochs:g} epochs) fill {event.budget_s:g} s at "
                    f"{event.step_s:.3g} s a step; evaluated every {event.eval_steps} steps{capped}")
        case SFTEval(label=label, eval_loss=loss, step=step) if label != "step":
            return f"eval loss {loss:.4f} ({WHEN.get(label, label)}, step {step})"
        case RLStarted() as event:
            resumed = f", resuming after iteration {event.resume_from_iteration}" if event.resume_from_iteration else ""
            return (f"RL (GRPO) on task {event.environment!r}: {event.base_model}, {event.iterations} iterations x "
                    f"{event.batch_size} seeds x {event.group_size} rollouts, {event.trainable_parameters:,} trainable "
                    f"parameters; policy served at {event.policy_url}{resumed}")
        case RLIteration() as event:
            return describe_iteration(event)
        case RLEvaluation() as event:
            where = (f"iteration {event.iteration}" if event.label == "during" else WHEN.get(event.label, event.label))
            failed = f", {event.failures} failed" if event.failures else ""
            return (f"eval reward {_fmt(event.reward)} ({where}; greedy on {event.size} {event.split} seeds{failed})")
        case RolloutFailedEvent() as event:
            return f"  ! rollout of seed {event.seed} ({event.split}, iteration {event.iteration}) failed: {event.error}"
        case ModelExported() as event:
            return f"exported {event.part} GGUF ({event.format}, {event.size}): {event.path}"
        case ModelRegistered(model_id=model_id):
            return f"model ready: {model_id}  (LanguageModel(model=\"{model_id}\"), or [model] name)"
        case CheckpointSaved(path=path, reason=reason):
            return f"  checkpoint {path}" + (f" ({reason})" if reason else "")
        case Evaluated() as event:
            low, high = event.logs.get("reward_interval") or (None, None)
            interval = f" (95% CI {_fmt(low)}-{_fmt(high)})" if low is not None else ""
            return f"{event.label} on {event.size} {event.split} examples: reward={_fmt(event.logs.get('reward'))}{interval}"
        case RunFinished() as event:
            tail = f": {event.error}" if event.error else ""
            calls = f", {event.lm_calls} LM calls" if event.lm_calls else ""
            return f"run {event.status} in {event.elapsed_s:.1f} s{calls}{tail}"
    return None


def describe_iteration(event: RLIteration) -> str:
    """``iteration 3/20  reward 0.412 +- 0.180  zero-signal 1/4 groups  412 tok/s  loss 0.0123  6.2 s``."""
    reward = "n/a" if event.mean_reward is None else f"{event.mean_reward:.3f} +- {event.reward_spread:.3f}"
    parts = [f"iteration {event.iteration}/{event.iterations}", f"reward {reward}",
             f"zero-signal {event.zero_signal_groups}/{event.groups} groups"]
    if event.failed_rollouts:
        parts.append(f"{event.failed_rollouts} rollouts failed")
    if event.tokens_per_s is not None:
        parts.append(f"{event.tokens_per_s:.0f} tok/s")
    parts.append(f"loss {event.loss:.4f}" if event.updated and event.loss is not None
                 else "no update (no group had signal)")
    parts.append(f"{event.seconds:.1f} s")
    return "  ".join(parts)


class CliRenderer:
    """Prints one line per interesting event."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    def __call__(self, event: dict[str, Any]) -> None:
        line = describe(event)
        if line is not None:
            self.console.print(line, markup=False, soft_wrap=True)

    def close(self) -> None: ...


REWARD_LEGEND = "* train reward per step   V validation reward per epoch"


def text_chart(train: list[tuple[int, float]], val: list[tuple[int, float]], width: int = 72, height: int = 14,
               title: str = "reward", y_range: tuple[float, float] | None = None, legend: str = REWARD_LEGEND,
               val_mark: str = "V", x_label: str = "step") -> str:
    """A plain-text chart per step: ``*`` train, ``val_mark`` validation; y in ``y_range`` (rewards: [0, 1])."""
    steps = [x for x, _ in train + val] or [1]
    low, high = min(steps), max(max(steps), min(steps) + 1)
    bottom, top = y_range or (0.0, 1.0)
    top = max(top, bottom + 1e-9)
    digits = 2 if y_range is None else 3
    margin = max(len(f"{value:.{digits}f}") for value in (bottom, top))
    grid = [[" "] * width for _ in range(height)]

    def put(x: int, y: float, mark: str) -> None:
        column = round((x - low) / (high - low) * (width - 1))
        row = height - 1 - round((max(bottom, min(top, y)) - bottom) / (top - bottom) * (height - 1))
        grid[row][column] = mark

    for x, y in train:
        put(x, y, "*")
    for x, y in val:
        put(x, y, val_mark)
    pad = " " * (margin + 2)
    lines = [title[: width + 6], pad + legend]
    for number, row in enumerate(grid):
        value = top - number * (top - bottom) / (height - 1)
        shown = f"{value:{margin}.{digits}f} |" if number % max(1, (height - 1) // 4) == 0 else " " * margin + " |"
        lines.append(shown + "".join(row))
    lines.append(" " * (margin + 1) + "+" + "-" * width)
    lines.append(f"{pad}{x_label} {low}".ljust(width) + f"{x_label} {high}")
    return "\n".join(lines)


class ChartRenderer:
    """Train reward per step and validation reward per epoch, as a live terminal chart (rich Live)."""

    def __init__(self, console: Console | None = None, width: int = 64, height: int = 13) -> None:
        self.console = console or Console(highlight=False)
        self.width, self.height = width, height
        self.train: list[tuple[int, float]] = []
        self.val: list[tuple[int, float]] = []
        self.steps_per_epoch = 1
        self.status = ""
        self._live: Any = None
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(console=self.console, auto_refresh=False, transient=False)
            self._live.start()

    def chart(self) -> str:
        return text_chart(self.train, self.val, self.width, self.height, self.status or "reward")

    def __call__(self, record: dict[str, Any]) -> None:
        match from_record(record):
            case TrainBegin(steps=steps):
                self.steps_per_epoch = max(1, steps)
            case StepEnd(global_step=step, reward=reward) if reward is not None:
                self.train.append((step, float(reward)))
            case EpochEnd(epoch=epoch, logs=logs):
                if logs.get("val_reward") is not None:
                    self.val.append(((epoch + 1) * self.steps_per_epoch, float(logs["val_reward"])))
                self.status = describe(record) or ""
            case RunFinished() | Evaluated():
                self.status = describe(record) or ""
            case _:
                return
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(self.chart()), refresh=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
        elif self.train or self.val:
            self.console.print(self.chart(), markup=False, highlight=False)
            self.console.print(self.status, markup=False)


class _WeightRunChartRenderer(ChartRenderer):
    """A weight-training run's chart: an event is a train point, an eval point, the run's end, or not charted."""

    def point(self, event: Any) -> tuple[list[tuple[int, float]], int, float] | None:
        """The series (``self.train`` or ``self.val``) ``event`` adds to, and its x and y; None when it adds none."""
        raise NotImplementedError

    def __call__(self, record: dict[str, Any]) -> None:
        event = from_record(record)
        if (point := self.point(event)) is not None:
            series, x, y = point
            series.append((x, y))
        elif not isinstance(event, (RunFinished, ModelRegistered)):
            return
        self.status = describe(record) or self.status
        self._refresh()


class LossChartRenderer(_WeightRunChartRenderer):
    """Training loss per step and evaluation loss, scaled to their range (weight training)."""

    def chart(self) -> str:
        values = [y for _, y in self.train + self.val]
        y_range = (min(values), max(values)) if values else (0.0, 1.0)
        return text_chart(self.train, self.val, self.width, self.height, self.status or "loss", y_range=y_range,
                          legend="* train loss per step   E eval loss", val_mark="E")

    def point(self, event: Any) -> tuple[list[tuple[int, float]], int, float] | None:
        match event:
            case SFTStep(step=step, loss=loss) if loss is not None:
                return self.train, step, float(loss)
            case SFTEval(step=step, eval_loss=loss):
                return self.val, step, float(loss)
        return None


class RewardChartRenderer(_WeightRunChartRenderer):
    """An RL run: mean training reward per iteration and greedy evaluation rewards."""

    def chart(self) -> str:
        values = [y for _, y in self.train + self.val]
        inside = all(0.0 <= value <= 1.0 for value in values)
        y_range = None if inside or not values else (min(values), max(values))
        return text_chart(self.train, self.val, self.width, self.height, self.status or "reward", y_range=y_range,
                          legend="* train reward per iteration   E eval reward (greedy)", val_mark="E",
                          x_label="iteration")

    def point(self, event: Any) -> tuple[list[tuple[int, float]], int, float] | None:
        match event:
            case RLIteration(iteration=iteration, mean_reward=reward) if reward is not None:
                return self.train, iteration, float(reward)
            case RLEvaluation(iteration=iteration, reward=reward) if reward is not None:
                return self.val, iteration, float(reward)
        return None


Renderer = CliRenderer | ChartRenderer
"""A live listener of a run's events that is closed when the run ends."""


def make_renderer(stream_format: str, console: Console | None = None,
                  chart: Callable[[Console | None], Renderer] = ChartRenderer) -> Renderer:
    """``cli`` lines, or the flow's chart (rewards for prompt learning and RL, losses for SFT)."""
    if stream_format != "chart":
        return CliRenderer(console)
    return chart(console)
