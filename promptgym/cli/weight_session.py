"""One session of a weight-training run (SFT, RL) in its run folder: status, start/finish events, stop requests.

    session = WeightRunSession(run, masker, listeners, job_type="rl", resume=False)
    with session.training(lost="iterations") as stop:      # Ctrl-C / SIGTERM set stop.requested
        result = ... job.run(..., on_event=session.recorder.emit, stop=stop)
    return session.finish(status="completed", ...)

Leaving the block by an exception records how the session ended (``interrupted`` after a checkpoint,
``interrupted`` at once on a second Ctrl-C, ``failed`` with the masked error) and re-raises it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any, Iterator

from promptgym.cli.process_identity import process_identity
from promptgym.cli.recorder import Listener, RunRecorder
from promptgym.cli.runs import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.core.events import RunFinished, RunStarted


class WeightRunSession:
    def __init__(self, run: RunFolder, masker: Masker, listeners: list[Listener] | None, job_type: str,
                 resume: bool) -> None:
        self.run, self.masker = run, masker
        self.started, self.previous = time.time(), run.status()
        run.update_status(status="running", pid=os.getpid(), process=process_identity(os.getpid()), error=None,
                          job_type=job_type)
        self.recorder = RunRecorder(run, masker, listeners)
        self.recorder.emit(RunStarted(run_id=run.id, resume=resume))

    def finish(self, **changes: Any) -> dict[str, Any]:
        """Record how the session ended (its time added to the earlier sessions'), and say so in the events."""
        status = self.run.update_status(**changes, pid=None, process=None, finished=time.time(),
                                        elapsed_s=round(self.previous.get("elapsed_s", 0.0) + time.time() - self.started, 2))
        self.recorder.emit(RunFinished(status=status["status"], error=status.get("error"), elapsed_s=status["elapsed_s"]))
        return status

    @contextlib.contextmanager
    def training(self, lost: str) -> Iterator[Any]:
        """Signals become a stop request for the block; an exception leaving it is recorded, then re-raised."""
        from promptgym.finetune.loop import TrainingInterrupted, stop_on_signals

        try:
            with stop_on_signals() as stop:
                yield stop
        except TrainingInterrupted:
            self.finish(status="interrupted")
            raise
        except (KeyboardInterrupt, asyncio.CancelledError):
            self.finish(status="interrupted", error=f"stopped at once (second Ctrl-C): {lost} after the last "
                                                    "checkpoint are lost")
            raise KeyboardInterrupt from None
        except BaseException as error:
            self.finish(status="failed", error=self.masker.mask(f"{type(error).__name__}: {error}"))
            raise
