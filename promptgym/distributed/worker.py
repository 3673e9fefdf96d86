"""The Ray actor that runs rollouts: it builds each program from its JSON once and keeps its own models.

Each actor is its own process: an embedded model gets one llama.cpp context per actor (with
``PROMPTGYM_LOCAL_THREADS`` threads), a server model one HTTP session per actor. LM usage is
reported back with the outcomes: each call's first outcome carries what the actor's models spent
since the previous report, so the driver's totals are exact however calls interleave.
"""

from __future__ import annotations

import asyncio
from typing import Any

from promptgym.core.serialization import deserialize_object
from promptgym.distributed.wire import import_modules, outcome_to_wire, rollout_from_wire
from promptgym.lm.usage import LEDGER
from promptgym.rollouts.executor import run_rollout


class RolloutWorker:
    """Holds built programs by key; runs a chunk of rollouts per call, concurrently (an async actor)."""

    def __init__(self, imports: list[str]) -> None:
        import_modules(imports)
        self.programs: dict[str, Any] = {}
        self.reported = LEDGER.snapshot()

    async def program(self, key: str, box: list[Any]) -> Any:
        """The program ``key`` names, built from ``box``'s JSON the first time (the driver sends it until then)."""
        if key not in self.programs:
            if not box:
                raise RuntimeError(f"program {key} was never sent to this worker")
            self.programs[key] = deserialize_object(await box[0], expected="program class")
        return self.programs[key]

    async def run(self, key: str, box: list[Any], wires: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        """Outcomes of ``wires`` (in order); the first carries the LM usage spent since the last report."""
        program = await self.program(key, box)
        outcomes = await asyncio.gather(*(run_rollout(program, rollout_from_wire(wire, program), training)
                                          for wire in wires))
        usage, self.reported = LEDGER.since(self.reported), LEDGER.snapshot()
        return [outcome_to_wire(outcome, usage if number == 0 else {}) for number, outcome in enumerate(outcomes)]


def remote_worker_class() -> Any:
    """:class:`RolloutWorker` as a Ray actor class (Ray is imported only when an executor starts)."""
    import ray

    return ray.remote(RolloutWorker)
