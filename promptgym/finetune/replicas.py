"""Copies of the model that train together (data parallel), as the SFT loop sees them.

    replicas = SingleProcess()                  # the default: this process trains on every row
    forward = replicas.loss_function(model, job.model_loss)
    mine = replicas.shard(indices)              # the rows of a micro-batch this copy trains on
    total, = replicas.sum([local_loss])         # summed over the copies

The loop is written once against this interface; :class:`SingleProcess` makes every call a no-op,
and ``promptgym.distributed.sft_train`` gives the one for Ray Train workers (DDP over gloo). Every
copy runs the same steps, evaluations and checkpoints in the same order (the collectives require
it); only the main copy writes files and emits events.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

LossFunction = Callable[[Any, Any, Any], Any]
"""``forward(input_ids, attention_mask, labels) -> sum of token losses`` (a scalar tensor)."""

ModelLoss = Callable[[Any, Any, Any, Any], tuple[Any, int]]
"""``model_loss(model, input_ids, attention_mask, labels) -> (sum of token losses, trained tokens)``."""


class SingleProcess:
    """One copy, in this process: what the loop does without a distributed backend.

    >>> replicas = SingleProcess()
    >>> replicas.shard([3, 1, 2]), replicas.sum([1.5]), replicas.any(False)
    ([3, 1, 2], [1.5], False)
    """

    rank = 0
    world_size = 1

    @property
    def is_main(self) -> bool:
        """Whether this copy writes the run folder (history, checkpoints) and emits events."""
        return self.rank == 0

    def loss_function(self, model: Any, model_loss: ModelLoss) -> LossFunction:
        """``forward`` for the loop: ``model_loss`` of this copy's model (here, the model itself)."""

        def forward(input_ids: Any, attention_mask: Any, labels: Any) -> Any:
            return model_loss(model, input_ids, attention_mask, labels)[0]

        return forward

    @contextlib.contextmanager
    def accumulating(self, forward: LossFunction, last: bool) -> Iterator[None]:
        """Around one micro-batch's backward pass; gradients are combined across copies only when ``last``."""
        yield

    def shard(self, indices: Sequence[int]) -> list[int]:
        """This copy's rows of a micro-batch (every row here)."""
        return list(indices)

    def sum(self, values: Sequence[float]) -> list[float]:
        """Each value summed over the copies."""
        return list(values)

    def any(self, flag: bool) -> bool:
        """True on every copy when it is true on one (a stop request reaches one copy only)."""
        return flag

    def seed_rng(self, seed: int, step: int, resumed: bool) -> None:
        """Seed torch's RNG (dropout) at the start; a resumed run keeps the checkpoint's RNG state."""
        if not resumed:
            import torch  # deferred: heavy, loaded when a job runs

            torch.manual_seed(seed)

    def report(self, checkpoint: Any, metrics: dict[str, Any]) -> None:
        """Hand a saved checkpoint (on the main copy; None on the others) to the backend."""
