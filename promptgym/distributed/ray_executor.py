"""Rollouts on Ray actors: each worker builds the program from its JSON once and holds its own model.

    executor = RayExecutor(num_workers=2)              # a local Ray instance owned by the executor
    await program.evaluate(x, y, executor=executor)    # or promptgym.set_default_executor(executor)
    await executor.close()                              # stops the instance, by process id

``address`` is None (start a local instance on 127.0.0.1, stopped by ``close()`` or at exit),
``"auto"`` (the cluster this process runs in: a Ray job, or ``RAY_ADDRESS``), ``"ray://host:port"``
(Ray Client) or a GCS address ``"host:port"``. The optimizer loop stays here, in one controller:
workers only run rollouts (data in, data out; see :mod:`promptgym.distributed.wire`).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import os
import signal
import threading
from typing import Any, Callable, Sequence

from promptgym.core.serialization import serialize_object
from promptgym.distributed.deaths import WorkerDeaths
from promptgym.distributed.local_head import LocalRayHead, use_loopback_ray
from promptgym.distributed.wire import outcome_from_wire, rollout_to_wire, user_modules
from promptgym.distributed.worker import remote_worker_class
from promptgym.lm.local_engine import LOCAL_THREADS_ENV
from promptgym.lm.usage import LEDGER
from promptgym.rollouts.executor import OnOutcome, OnStart, Outcome, Rollout

logger = logging.getLogger("promptgym")

DEFAULT_SERVER_CONCURRENCY = 8


class RayExecutorError(RuntimeError):
    """Ray could not run the rollouts (no worker left, or the cluster can't be reached)."""


def language_models(program: Any) -> list[Any]:
    """The language models of the program's modules."""
    found = {}
    for module in getattr(program, "modules", []) or []:
        model = getattr(module, "language_model", None)
        if model is not None:
            found[id(model)] = model
    return list(found.values())


def default_concurrency(program: Any) -> int:
    """Rollouts each worker runs at once: 1 for an embedded model (one context), a server model's ``concurrency``."""
    limits = []
    for model in language_models(program):
        provider = getattr(getattr(model, "model_string", None), "provider", "")
        limits.append(1 if provider == "local" else (model.concurrency or DEFAULT_SERVER_CONCURRENCY))
    return max(limits or [1])


class RayExecutor:
    """Runs rollouts on ``num_workers`` Ray actors, ``concurrency`` at a time each, in a sliding window.

    Args:
        address: None (a local instance owned by this executor), ``"auto"``, ``"ray://host:port"`` or ``"host:port"``.
        num_workers: actors to start.
        concurrency: rollouts in flight per actor (default: 1 for an embedded model, else the model's ``concurrency``).
        threads: llama.cpp threads per actor for ``local/...`` models.
        num_cpus: CPUs a local instance offers (default: ``num_workers``); each actor reserves ``cpus_per_worker``.
        max_restarts: how often Ray restarts a dead actor; its rollouts are retried on another one meanwhile.
        runtime_env: passed to Ray for the actors (``env_vars``, ``working_dir``, ...).

    >>> executor = RayExecutor(num_workers=2, threads=1)   # nothing starts before the first run
    >>> executor.num_workers
    2
    """

    def __init__(self, address: str | None = None, num_workers: int = 2, concurrency: int | None = None,
                 threads: int = 1, num_cpus: int | None = None, cpus_per_worker: float = 0.0,
                 max_restarts: int = 3, runtime_env: dict[str, Any] | None = None) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 or None, got {concurrency}")
        self.address = address
        self.num_workers = num_workers
        self.concurrency = concurrency
        self.threads = threads
        self.num_cpus = num_cpus or num_workers
        self.cpus_per_worker = cpus_per_worker
        self.max_restarts = max_restarts
        self.runtime_env = runtime_env or {}
        self.head: Any = None
        self.workers: list[Any] = []
        self.retries = 0
        """Rollouts run again because their worker died."""
        self._connected = self._owns_connection = False
        self._program_refs: dict[str, Any] = {}
        self._imports: tuple[str, ...] = ()
        self._deaths = WorkerDeaths(self.max_restarts)
        self._built: dict[int, set[str]] = {}
        self._embedders: dict[str, Any] = {}

    # -- connecting -------------------------------------------------------------------------

    def _connect(self) -> None:
        if self._connected:
            return
        host = (self.address or "").removeprefix("ray://").split(":")[0]
        if self.address is None or host in ("127.0.0.1", "localhost"):
            use_loopback_ray()
        import ray

        if self.address is None:
            self.head = LocalRayHead(num_cpus=self.num_cpus, dashboard=False).start()
            atexit.register(self._stop_head)
            address = self.head.gcs_address
        else:
            address = self.address
        self._owns_connection = not ray.is_initialized()  # a connection the caller made stays theirs
        # ray.init makes SIGTERM exit at once; the run's handler (cancel, checkpoint, record) must stay
        previous = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as error:  # noqa: BLE001 - connection errors come in many types; say where
            self._stop_head()
            raise RayExecutorError(f"can't connect to Ray at {address}: {type(error).__name__}: {error}") from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        self._connected = True

    def actor_options(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Ray options for one of this executor's actors: its CPUs, restarts, threads and environment."""
        env = {**self.runtime_env.get("env_vars", {}), LOCAL_THREADS_ENV: str(self.threads), **(env or {})}
        if "PYTHONPATH" not in env and os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return {"num_cpus": self.cpus_per_worker, "max_restarts": self.max_restarts, "max_task_retries": 0,
                "max_concurrency": 1000, "runtime_env": {**self.runtime_env, "env_vars": env}}

    def _start_workers(self, imports: tuple[str, ...]) -> None:
        options = self.actor_options()
        worker_class = remote_worker_class()
        self.workers = [worker_class.options(**options).remote(list(imports)) for _ in range(self.num_workers)]
        self._imports, self._deaths, self._built = imports, WorkerDeaths(self.max_restarts), {}

    def embedder(self, embedding_model: Any) -> Any:
        """A :class:`~promptgym.distributed.embed_workers.RayEmbedder`: ``embedding_model`` on ``num_workers`` actors
        (started on its first batch, kept for the next ingestion with that model, stopped by ``close()``)."""
        from promptgym.distributed.embed_workers import RayEmbedder  # function-level: that module imports this one

        key = json.dumps(serialize_object(embedding_model), sort_keys=True, default=str)
        if key not in self._embedders:
            self._embedders[key] = RayEmbedder(self, embedding_model)
        return self._embedders[key]

    def _program_ref(self, program: Any) -> tuple[str, Any]:
        """The program's architecture in Ray's object store, once per distinct architecture."""
        import ray

        config = serialize_object(program)
        key = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
        if key not in self._program_refs:
            self._program_refs[key] = ray.put(config)
        return key, self._program_refs[key]

    # -- running ----------------------------------------------------------------------------

    async def run(self, program: Any, rollouts: Sequence[Rollout], training: bool = False,
                  window: int | None = None, on_start: OnStart | None = None,
                  on_done: OnOutcome | None = None) -> list[Outcome]:
        """Run ``rollouts`` on the workers; one Outcome each, in the order given (the Executor protocol).

        Each worker runs up to ``concurrency`` rollouts at once, and at most ``window`` are in flight in
        all. A slot that frees is filled at once; the rollouts that can start at the same moment share
        one Ray call (a call costs about a millisecond of the driver's time, more than a rollout on a
        fast server), and come back together. Rollouts whose worker died go back to the front of the
        queue and run on another worker (or on the same one once Ray restarted it, if it is the last).
        """
        if not rollouts:
            return []
        self._connect()
        key, ref = self._program_ref(program)
        imports = tuple(user_modules(serialize_object(program), *(r.inputs for r in rollouts[:1])))
        if not self.workers or not set(imports) <= set(self._imports):
            self._start_workers(tuple(sorted(set(imports) | set(self._imports))))
        own = program.get_variables()
        queue = _Queue(rollouts, window or len(rollouts))
        per_worker = self.concurrency or default_concurrency(program)
        busy = [0] * len(self.workers)
        outcomes: dict[int, Outcome] = {}

        async def run_chunk(worker: int, chunk: list[tuple[int, Rollout]]) -> None:
            for _, rollout in chunk:
                if on_start is not None:
                    await on_start(rollout)
            wires = [rollout_to_wire(r, r.variables if r.variables is not None else own) for _, r in chunk]
            try:
                answers = await self._call(worker, key, ref, wires, training)
            except _WorkerDied:
                busy[worker] -= len(chunk)
                await queue.put_back(chunk, worker)
                return
            busy[worker] -= len(chunk)
            await queue.done(len(chunk))
            for (position, _), data in zip(chunk, answers):
                outcomes[position] = outcome = outcome_from_wire(data, program)
                for phase, usage in (outcome.usage or {}).items():  # the Outcome contract: recorded here
                    LEDGER.record(usage, phase)
                if on_done is not None:
                    await on_done(outcome)

        async def feed(worker: int) -> None:
            calls: set[asyncio.Task[None]] = set()
            try:
                while True:
                    chunk = await queue.take(worker, room=lambda: per_worker - busy[worker],
                                             alive=lambda: len(self.workers) - len(self._dead_workers()),
                                             stopped=lambda: worker in self._dead_workers())
                    if not chunk:
                        break
                    busy[worker] += len(chunk)
                    calls.add(asyncio.ensure_future(run_chunk(worker, chunk)))
                    calls = {call for call in calls if not call.done()}
                await asyncio.gather(*calls)
            except BaseException:
                for call in calls:
                    call.cancel()
                raise
            finally:
                await queue.wake()

        await asyncio.gather(*(feed(worker) for worker in range(len(self.workers))))
        if len(outcomes) < len(rollouts):
            raise RayExecutorError(f"every Ray worker died or became unreachable; {len(rollouts) - len(outcomes)} "
                                   "rollout(s) did not run")
        return [outcomes[position] for position in range(len(rollouts))]

    async def _call(self, worker: int, key: str, ref: Any, wires: list[dict[str, Any]],
                    training: bool) -> list[dict[str, Any]]:
        import ray

        # The program travels once per worker: passing an object reference costs Ray a borrow each call.
        box = [] if key in self._built.setdefault(worker, set()) else [ref]
        life = self._deaths.life(worker)
        call = self.workers[worker].run.remote(key, box, wires, training)
        try:
            answers = await call
            self._built[worker].add(key)
            return answers
        except ray.exceptions.RayActorError as error:
            self.retries += len(wires)
            if self._deaths.died(worker, life):
                self._built[worker] = set()  # a restarted actor starts empty
            logger.warning("Ray worker %d died while running example(s) %s (%s); running them again on another worker",
                           worker, ", ".join(str(wire["index"]) for wire in wires), type(error).__name__)
            raise _WorkerDied from error
        except asyncio.CancelledError:
            ray.cancel(call)
            raise

    def _dead_workers(self) -> set[int]:
        return self._deaths.dead()

    # -- closing ----------------------------------------------------------------------------

    def _stop_head(self) -> None:
        if self.head is not None:
            self.head.stop()
            self.head = None

    async def close(self) -> None:
        """Stop the workers; disconnect; stop the local instance this executor started (by process id)."""
        import ray

        for worker in self.workers + [actor for embedder in self._embedders.values() for actor in embedder.actors]:
            try:
                ray.kill(worker)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.workers, self._program_refs, self._built, self._embedders = [], {}, {}, {}
        if self._connected and self._owns_connection:
            ray.shutdown()
        self._connected = False
        self._stop_head()


class _WorkerDied(Exception):
    """A worker's call failed because its actor died (its rollouts run again)."""


class _Queue:
    """Rollouts waiting for a worker, at most ``window`` in flight; a died chunk returns to the front.

    A rollout that a worker died running is handed to another worker when one is alive.
    """

    def __init__(self, rollouts: Sequence[Rollout], window: int) -> None:
        self.pending: list[tuple[int, Rollout]] = list(enumerate(rollouts))
        self.avoid: dict[int, set[int]] = {}
        self.window, self.in_flight, self.unfinished = window, 0, len(rollouts)
        self.changed = asyncio.Condition()

    async def take(self, worker: int, room: Callable[[], int], alive: Callable[[], int],
                   stopped: Callable[[], bool]) -> list[tuple[int, Rollout]]:
        """Rollouts for ``worker``, as many as its ``room()`` and the window allow; empty when it is done.

        Waits while the worker is full, or while nothing is pending but rollouts are still in flight
        (a worker that dies puts its rollouts back).
        """
        async with self.changed:
            while True:
                if not self.unfinished or stopped():
                    return []
                space = min(room(), self.window - self.in_flight)
                if space > 0 and self.pending:
                    if not self.avoid:
                        chunk = self.pending[:space]
                        del self.pending[:space]
                    else:
                        chunk = [item for item in self.pending
                                 if worker not in self.avoid.get(item[0], ()) or len(self.avoid[item[0]]) >= alive()][:space]
                        taken = {position for position, _ in chunk}
                        self.pending = [item for item in self.pending if item[0] not in taken]
                    if chunk:
                        self.in_flight += len(chunk)
                        return chunk
                await self.changed.wait()

    async def put_back(self, chunk: list[tuple[int, Rollout]], worker: int) -> None:
        async with self.changed:
            for position, _ in chunk:
                self.avoid.setdefault(position, set()).add(worker)
            self.pending[:0] = chunk
            self.in_flight -= len(chunk)
            self.changed.notify_all()

    async def done(self, count: int) -> None:
        async with self.changed:
            self.in_flight -= count
            self.unfinished -= count
            self.changed.notify_all()

    async def wake(self) -> None:
        """Let waiting workers look again (a worker stopped for good: rollouts avoiding it may now go anywhere)."""
        async with self.changed:
            self.changed.notify_all()
