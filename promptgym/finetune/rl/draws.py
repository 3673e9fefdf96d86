"""Each sampled completion's own random stream, keyed by where it sits in the run, not by when it arrived.

    generator = completion_generator(7, 3, 12, 0, 0)   # run seed 7, iteration 3, rollout 12, attempt 0, request 0
    torch.multinomial(probabilities, 1, generator=generator)

A task app sends a group's requests concurrently, so the policy server sees them in an order that changes
from run to run. Drawing every token from one shared generator hands its draws to whichever request came
first: the same seed then gives other completions, other rewards and other weights. With one generator per
completion, seeded from its key (run seed, iteration, rollout index, attempt, request index), the tokens a
rollout draws depend on its place in the run alone.

    >>> completion_seed(7, 3, 12, 0, 0) == completion_seed(7, 3, 12, 0, 0)
    True
    >>> completion_seed(7, 3, 12, 0, 0) == completion_seed(7, 3, 13, 0, 0)
    False
"""

from __future__ import annotations

import hashlib
from typing import Any


def completion_seed(*key: int) -> int:
    """A 63-bit seed from a tuple of integers (a hash, so that nearby keys give unrelated streams)."""
    digest = hashlib.blake2b(",".join(str(int(part)) for part in key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def completion_generator(*key: int, device: Any = "cpu") -> Any:
    """A ``torch.Generator`` on ``device`` seeded from ``key`` (torch is imported here: it is heavy and optional).

    On a GPU the generator lives there, so that a draw needs no copy of the probabilities to the host; the
    stream then differs from the CPU's for the same key, and is as reproducible.
    """
    import torch  # deferred: heavy, loaded when a job runs

    return torch.Generator(device=device).manual_seed(completion_seed(*key))
