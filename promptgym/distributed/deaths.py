"""How many times each Ray actor died, for the executors that retry its calls elsewhere.

Every call in flight on an actor fails when it dies; each call reads the actor's ``life`` before it
starts, so the first failure seen in that life counts the death and the others don't.

>>> deaths = WorkerDeaths(max_restarts=1)
>>> life = deaths.life(0)
>>> deaths.died(0, life), deaths.died(0, life)   # two calls in flight, one death
(True, False)
>>> deaths.is_dead(0), deaths.died(0, deaths.life(0)), deaths.is_dead(0)
(False, True, True)
"""

from __future__ import annotations


class WorkerDeaths:
    """Deaths per worker index; a worker is dead once it died more often than Ray restarts it."""

    def __init__(self, max_restarts: int) -> None:
        self.max_restarts = max_restarts
        self.counts: dict[int, int] = {}

    def life(self, worker: int) -> int:
        """The deaths so far: read it before a call, give it to :meth:`died` if the call fails."""
        return self.counts.get(worker, 0)

    def died(self, worker: int, life: int) -> bool:
        """Count the death a call started in ``life`` saw; False when another call already counted it."""
        if self.life(worker) != life:
            return False
        self.counts[worker] = life + 1
        return True

    def is_dead(self, worker: int) -> bool:
        return self.life(worker) > self.max_restarts

    def dead(self) -> set[int]:
        return {worker for worker in self.counts if self.is_dead(worker)}
