"""Live progress from the event stream: event lines (``cli``) or a terminal reward chart (``chart``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from promptgym.cli.sft_render import SFT_EVENTS, LossChartRenderer, describe_sft


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def describe(event: dict[str, Any]) -> str | None:
    """One human line per event (None for events not worth a line)."""
    kind = event.get("event")
    if kind in SFT_EVENTS and kind != "checkpoint_saved":
        return describe_sft(event)
    if kind == "run_started":
        return f"run {event['run_id']} started" + (" (resume)" if event.get("resume") else "")
    if kind == "resumed":
        return f"resuming from {event['checkpoint']} after {event['from_epoch']} epoch(s)"
    if kind == "train_begin":
        return (f"training: {event['epochs']} epoch(s), {event['steps']} step(s) per epoch, "
                f"{event['train_size']} train / {event['val_size']} validation examples")
    if kind == "candidate_scored":
        return (f"  candidate {event['candidate']} vs incumbent {event['incumbent']}: "
                f"lead {event['lead']:+g} on {event['where']}")
    if kind == "candidate_accepted":
        return f"  accepted candidate {event['candidate']} ({event.get('reason', '')})"
    if kind == "example_failed":
        return f"  ! {event['split']} example {event['index']} failed: {event['error']}"
    if kind == "epoch_end":
        logs = event.get("logs", {})
        shown = " ".join(f"{key}={_fmt(logs[key])}" for key in ("reward", "val_reward", "lm_calls", "failures")
                         if logs.get(key) is not None)
        return f"epoch {event['epoch'] + 1}: {shown} (best candidate {event.get('best_candidate')})"
    if kind == "checkpoint_saved":
        return f"  checkpoint {event['path']}"
    if kind == "evaluated":
        return f"{event['label']} on {event['size']} {event['split']} examples: reward={_fmt(event.get('reward'))}"
    if kind == "run_finished":
        tail = f": {event['error']}" if event.get("error") else ""
        calls = f", {event['lm_calls']} LM calls" if event.get("lm_calls") is not None else ""
        return f"run {event['status']} in {event['elapsed_s']:.1f} s{calls}{tail}"
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

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "train_begin":
            self.steps_per_epoch = max(1, int(event.get("steps", 1)))
        elif kind == "step" and event.get("reward") is not None:
            self.train.append((int(event["global_step"]), float(event["reward"])))
        elif kind == "epoch_end":
            logs = event.get("logs", {})
            if logs.get("val_reward") is not None:
                self.val.append(((event["epoch"] + 1) * self.steps_per_epoch, float(logs["val_reward"])))
            self.status = describe(event) or ""
        elif kind in ("run_finished", "evaluated"):
            self.status = describe(event) or ""
        else:
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


def make_renderer(stream_format: str, console: Console | None = None, job_type: str | None = None) -> Any:
    """``cli`` lines, or a chart: rewards for prompt learning, losses for weight training."""
    if stream_format != "chart":
        return CliRenderer(console)
    return LossChartRenderer(console) if job_type in ("sft", "rl") else ChartRenderer(console)
