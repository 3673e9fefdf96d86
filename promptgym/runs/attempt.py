"""One attempt of a run, whatever its job type: the run folder's status, the start and finish events, the
signals, and how the attempt ended.

    attempt = RunAttempt(run, masker, listeners, job_type="sft", resume=False)
    with attempt.ending(lost="steps"), attempt.signals() as stop:   # Ctrl-C / SIGTERM set stop.requested
        result = run_sft(job, ..., on_event=attempt.events.emit, stop=stop)
    return attempt.finish(status="completed", ...)

One signal mechanism for every flow: SIGINT and SIGTERM become a stop request; a flow that runs as an
asyncio task passes it to :meth:`RunAttempt.signals`, and the request cancels the task (as ``asyncio.run``
does on Ctrl-C). A second Ctrl-C raises KeyboardInterrupt at once.

Leaving :meth:`RunAttempt.ending` by an exception records how the attempt ended (``interrupted`` after a
checkpoint, ``interrupted`` at once on a second Ctrl-C, ``failed`` with the masked error) and re-raises it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any, Callable, Iterator

from promptgym.core.events import RunFinished, RunStarted
from promptgym.runs import stop as signal_handling  # called through the module: tests stand in for a signal
from promptgym.runs.events import EventWriter, Listener, Masking, NoMasking
from promptgym.runs.folder import RunFolder
from promptgym.runs.process_identity import process_identity
from promptgym.runs.stop import CancellingStop, StopRequest, TrainingInterrupted

__all__ = ["CancellingStop", "RunAttempt"]


class RunAttempt:
    """One attempt of a run (a ``train`` or a ``--resume``, a library ``fit(run_dir=...)``): see the module doc."""

    def __init__(self, run: RunFolder, masker: Masking | None, listeners: list[Listener] | None, job_type: str,
                 resume: bool, runs_on: str | None = None,
                 accounting: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        """``accounting``: a flow's own counts for the final status, given the changes being recorded."""
        self.run, self.masker, self.accounting = run, masker or NoMasking(), accounting
        self.started = time.time()
        self.status = run.update_status(status="running", pid=os.getpid(), process=process_identity(os.getpid()),
                                        error=None, job_type=job_type, runs_on=runs_on)
        self.events = EventWriter(run, self.masker, listeners)
        """The run's one event writer: hand ``events.emit`` to a weight run, ``events`` to a RunRecorder."""
        self.events.emit(RunStarted(run_id=run.id, resume=resume))

    def elapsed_s(self) -> float:
        """This attempt's time plus the earlier attempts', read from the event log (so an attempt killed before
        it could record its own still counts)."""
        earlier = self.run.session_totals()[:-1]
        return round(sum(attempt["elapsed_s"] for attempt in earlier) + time.time() - self.started, 2)

    def finish(self, announce: bool = True, **changes: Any) -> dict[str, Any]:
        """Record how the attempt ended; ``announce`` says so in the events (the final status line)."""
        counts = self.accounting(changes) if self.accounting is not None else {}
        status = self.run.update_status(**changes, **counts, pid=None, process=None, finished=time.time(),
                                        elapsed_s=self.elapsed_s())
        if announce:
            self.announce(status)
        return status

    def announce(self, status: dict[str, Any]) -> None:
        self.events.emit(RunFinished(status=status["status"], error=status.get("error"),
                                       elapsed_s=status["elapsed_s"], lm_calls=status.get("lm_calls") or 0))

    @contextlib.contextmanager
    def signals(self, task: asyncio.Task[Any] | None = None) -> Iterator[StopRequest]:
        """SIGINT/SIGTERM become a stop request for the block (cancelling ``task`` when given)."""
        with signal_handling.stop_on_signals(CancellingStop(task) if task is not None else None) as stop:
            yield stop

    @contextlib.contextmanager
    def ending(self, lost: str | None = None, on_interrupt: Callable[[], None] | None = None,
               on_failure: Callable[[dict[str, Any]], None] | None = None) -> Iterator[None]:
        """Record how the block ends when an exception leaves it, then re-raise.

        ``lost``: what a second Ctrl-C loses (a weight flow's steps since the last checkpoint); None for a flow
        whose interrupt is a cancellation that checkpoints (``on_interrupt``).
        """
        try:
            yield
        except TrainingInterrupted:
            self.finish(status="interrupted")
            raise
        except (KeyboardInterrupt, asyncio.CancelledError):
            if on_interrupt is not None:
                on_interrupt()
            if lost is None:
                self.finish(status="interrupted")
                raise
            self.finish(status="interrupted", error=f"stopped at once (second Ctrl-C): {lost} after the last "
                                                    "checkpoint are lost")
            raise KeyboardInterrupt from None
        except BaseException as error:
            status = self.finish(status="failed", error=self.masker.mask(f"{type(error).__name__}: {error}"))
            if on_failure is not None:
                on_failure(status)
            raise
