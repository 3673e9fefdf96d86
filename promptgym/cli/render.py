"""Live progress from the event stream: event lines (``cli``) or a terminal reward chart (``chart``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from promptgym.core.events import (
    CandidateAccepted,
    CandidateScored,
    CheckpointSaved,
    EpochEnd,
    Evaluated,
    ExampleFailed,
    Resumed,
    RunFinished,
    RunStarted,
    StepEnd,
    TrainBegin,
    from_record,
)


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
            return f"epoch {epoch + 1}: {shown} (best candidate {best})"
        case CheckpointSaved(path=path):
            return f"  checkpoint {path}"
        case Evaluated() as event:
            return f"{event.label} on {event.size} {event.split} examples: reward={_fmt(event.logs.get('reward'))}"
        case RunFinished() as event:
            tail = f": {event.error}" if event.error else ""
            return f"run {event.status} in {event.elapsed_s:.1f} s, {event.lm_calls} LM calls{tail}"
    return None


class CliRenderer:
    """Prints one line per interesting event."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    def __call__(self, event: dict[str, Any]) -> None:
        line = describe(event)
        if line is not None:
            self.console.print(line, markup=False, soft_wrap=True)

    def close(self) -> None: ...


def text_chart(train: list[tuple[int, float]], val: list[tuple[int, float]], width: int = 72, height: int = 14,
               title: str = "reward") -> str:
    """A plain-text chart of rewards in [0, 1] per step: ``*`` train, ``V`` validation."""
    steps = [x for x, _ in train + val] or [1]
    low, high = min(steps), max(max(steps), min(steps) + 1)
    grid = [[" "] * width for _ in range(height)]

    def put(x: int, y: float, mark: str) -> None:
        column = round((x - low) / (high - low) * (width - 1))
        row = height - 1 - round(max(0.0, min(1.0, y)) * (height - 1))
        grid[row][column] = mark

    for x, y in train:
        put(x, y, "*")
    for x, y in val:
        put(x, y, "V")
    lines = [title[: width + 6], "      * train reward per step   V validation reward per epoch"]
    for number, row in enumerate(grid):
        label = f"{1 - number / (height - 1):4.2f} |" if number % max(1, (height - 1) // 4) == 0 else "     |"
        lines.append(label + "".join(row))
    lines.append("     +" + "-" * width)
    lines.append(f"      step {low}".ljust(width) + f"step {high}")
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
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(self.chart()), refresh=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
        elif self.train or self.val:
            self.console.print(self.chart(), markup=False, highlight=False)
            self.console.print(self.status, markup=False)


def make_renderer(stream_format: str, console: Console | None = None) -> CliRenderer | ChartRenderer:
    return ChartRenderer(console) if stream_format == "chart" else CliRenderer(console)
