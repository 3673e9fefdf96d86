"""Callbacks: code that runs at each stage of fit / evaluate / predict.

Hooks may be plain methods or coroutines; the trainer awaits coroutines.
``self.program`` is the program being trained::

    class PrintReward(Callback):
        async def on_epoch_end(self, epoch, logs=None):
            print(epoch, logs["reward"])
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from promptgym.core.events import Event

logger = logging.getLogger("promptgym")

HOOKS = tuple(
    [f"on_{stage}_{when}" for stage in ("train", "test", "predict") for when in ("begin", "end")]
    + [f"on_epoch_{when}" for when in ("begin", "end")]
    + [f"on_{stage}_batch_{when}" for stage in ("train", "test", "predict") for when in ("begin", "end")]
)


class Callback:
    """Base class: override any hook in :data:`HOOKS`."""

    def __init__(self) -> None:
        self.program: Any = None
        self.params: dict[str, Any] | None = None
        """What ``fit()`` was asked (``epochs``, ``steps``, ``batch_size``...), as in Keras and synalinks."""

    def set_program(self, program: Any) -> None:
        self.program = program

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> Any: ...
    def on_train_end(self, logs: dict[str, Any] | None = None) -> Any: ...
    def on_test_begin(self, logs: dict[str, Any] | None = None) -> Any: ...
    def on_test_end(self, logs: dict[str, Any] | None = None) -> Any: ...
    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> Any: ...
    def on_predict_end(self, logs: dict[str, Any] | None = None) -> Any: ...
    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> Any: ...
    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> Any: ...
    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> Any:
        return self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> Any:
        return self.on_batch_end(batch, logs)

    def on_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> Any:
        """Keras' name: what ``on_train_batch_begin`` calls unless overridden."""

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> Any:
        """Keras' name: what ``on_train_batch_end`` calls unless overridden."""
    def on_test_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> Any: ...
    def on_test_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> Any: ...
    def on_predict_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> Any: ...
    def on_predict_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> Any: ...

    def on_example_end(self, stage: str, logs: dict[str, Any] | None = None) -> Any:
        """After each example of evaluate / predict (``stage`` is "test" or "predict"); for progress."""

    def on_event(self, event: Event) -> Any:
        """Every trainer and optimizer event (``promptgym.core.events``; it also reads like a dict)."""


class CallbackList:
    """Calls a hook on every callback, awaiting the ones that are coroutines."""

    def __init__(self, callbacks: list[Callback] | None, program: Any) -> None:
        self.callbacks = list(callbacks or [])
        for callback in self.callbacks:
            if not isinstance(callback, Callback):
                raise TypeError(f"callbacks must be Callback instances, got {type(callback).__name__}")
            callback.set_program(program)

    def append(self, callback: Callback, program: Any) -> None:
        callback.set_program(program)
        self.callbacks.append(callback)

    def set_params(self, params: dict[str, Any]) -> None:
        for callback in self.callbacks:
            if hasattr(callback, "set_params"):
                callback.set_params(params)

    async def call(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            result = getattr(callback, hook)(*args)
            if inspect.isawaitable(result):
                await result

    async def emit(self, event: Event) -> None:
        await self.call("on_event", event)
