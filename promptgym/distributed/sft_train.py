"""SFT training on Ray Train: ``TorchTrainer`` with CPU workers, DDP over gloo, checkpoints reported to Ray.

    from promptgym.distributed import RayTrainExecutor
    job = SFTJob.prepare(settings)
    result = run_sft(job, "runs/my-sft", executor=RayTrainExecutor(num_workers=2))

Each worker builds the model from the job's base model and the rows this process already checked
and encoded, and runs the same loop as a local run (:meth:`SFTRun.train`) on its share of every
micro-batch; DDP averages the gradients, so every copy takes the same optimiser step. The first
worker writes the run folder as a local run does (checkpoints, ``history.csv``) and also reports
each checkpoint to Ray (``ray.train.report``, kept under ``<run>/ray/``); its events and status
changes come back to this process through a small actor, so the CLI's renderer and ``events.jsonl``
see them live, and a stop request (Ctrl-C) goes the other way. Samples, export and the registry
entry are made here afterwards, from the last checkpoint.

The workers read and write the run folder at the same path: on a local instance (the default) or a
single-node cluster that is this machine's folder; a multi-node cluster needs it on shared storage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from promptgym.core.deprecation import renamed_names
from promptgym.distributed.local_head import LocalRayHead, use_loopback_ray
from promptgym.finetune.base_model import load_base_model, quiet_transformers
from promptgym.finetune.device import plan_device
from promptgym.finetune.loop import EventSink
from promptgym.runs.stop import StopRequest, TrainingInterrupted
from promptgym.finetune.lora import add_lora
from promptgym.finetune.replicas import SingleProcess
from promptgym.finetune.sft_run import SFTJob, SFTRun
from promptgym.finetune.weight_run import StatusSink

logger = logging.getLogger("promptgym")

RAY_STORAGE = "ray"
"""Sub-folder of the run where Ray Train keeps its copy of the reported checkpoints."""
STARTUP_SECONDS = 40.0
"""About what starting the trainer costs on a 2-core machine (controller, workers, process group)."""


class RayTrainError(RuntimeError):
    """Training on Ray failed; the message carries the worker's error."""


class Relay:
    """The actor between the workers and this process: events and status changes out, a stop request in."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Any]] = []
        self.stop: str | None = None

    def put(self, kind: str, payload: Any) -> None:
        self.messages.append((kind, payload))

    def drain(self) -> list[tuple[str, Any]]:
        messages, self.messages = self.messages, []
        return messages

    def request_stop(self, reason: str) -> None:
        self.stop = reason

    def stop_reason(self) -> str | None:
        return self.stop


class RelayedStop:
    """A StopRequest whose flag is the relay's (asked once per step, by the first worker only)."""

    def __init__(self, relay: Any) -> None:
        self.relay, self.reason = relay, ""

    @property
    def requested(self) -> bool:
        import ray

        self.reason = ray.get(self.relay.stop_reason.remote()) or ""
        return bool(self.reason)


class RayTrainReplicas(SingleProcess):
    """This Ray Train worker's copy: gradients combined by DDP, sums and flags by gloo all-reduces."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def loss_function(self, model: Any, model_loss: Any) -> Any:
        import torch
        from torch.nn.parallel import DistributedDataParallel

        class CausalLMLoss(torch.nn.Module):
            # DDP hooks the gradients of what its forward runs: the loss, not only the model, goes inside
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any, labels: Any) -> Any:
                return model_loss(self.model, input_ids, attention_mask, labels)[0]

        # the rotary tables are the only buffers and are the same everywhere: nothing to broadcast per step
        return DistributedDataParallel(CausalLMLoss(), broadcast_buffers=False)

    def accumulating(self, forward: Any, last: bool) -> Any:
        return contextlib.nullcontext() if last else forward.no_sync()

    def shard(self, indices: Sequence[int]) -> list[int]:
        return list(indices[self.rank::self.world_size])

    def sum(self, values: Sequence[float]) -> list[float]:
        import torch
        import torch.distributed as dist

        # NCCL (GPU workers) reduces CUDA tensors only
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        tensor = torch.tensor([float(value) for value in values], dtype=torch.float64, device=device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def any(self, flag: bool) -> bool:
        return self.sum([1.0 if flag else 0.0])[0] > 0

    def seed_rng(self, seed: int, step: int, resumed: bool) -> None:
        # the first copy draws exactly what one process would (1 worker = a local run); the others their own
        # dropout masks (after a resume too: the checkpoint holds the first copy's RNG state only)
        if self.rank == 0:
            super().seed_rng(seed, step, resumed)
        else:
            import torch

            torch.manual_seed(seed + 1_000_003 * self.rank + step)

    def report(self, checkpoint: Any, metrics: dict[str, Any]) -> None:
        import ray.train

        reported = ray.train.Checkpoint.from_directory(str(checkpoint)) if checkpoint is not None else None
        ray.train.report(metrics, checkpoint=reported)


def _train_worker(config: dict[str, Any]) -> None:
    """Ray Train's ``train_loop_per_worker``: one copy of the job, the shared loop, events through the relay."""
    import ray
    import torch

    torch.set_num_threads(config["threads"])
    quiet_transformers()
    replicas = RayTrainReplicas()
    relay, folder, main = config["relay"], Path(config["folder"]), replicas.rank == 0
    if not folder.is_dir():
        raise RayTrainError(f"the run folder {folder} is not visible on this worker's node: on a multi-node cluster, "
                            f"put the runs on storage every node mounts at the same path")
    spec = ray.get(config["job"])
    settings, source = spec["settings"], spec["source"]
    # a GPU worker trains on the GPU Ray Train gave it (one per worker), in the formats the job planned
    device = str(ray.train.torch.get_device()) if config["use_gpu"] else "cpu"
    plan = plan_device(device, spec["precision"])
    model, tokenizer = load_base_model(source, gradient_checkpointing=settings.gradient_checkpointing, plan=plan)
    job = SFTJob(settings, source, add_lora(model, settings.lora, spec["seed"]), tokenizer, spec["data"],
                 spec["seed"], spec["name"], plan)
    job.replicas = replicas

    def on_event(event: Any) -> None:
        relay.put.remote("event", event)

    def status(**changes: Any) -> None:
        relay.put.remote("status", changes)

    def ignore(*args: Any, **kwargs: Any) -> None:
        pass

    try:
        SFTRun(job, folder, on_event if main else ignore, status if main else ignore,
               RelayedStop(relay) if main else StopRequest(), config["started"], job.replicas).train(config["resume"])
    except TrainingInterrupted as stopped:
        if main:
            relay.put.remote("interrupted", {"step": stopped.step, "checkpoint": str(stopped.checkpoint)})
    if main:
        ray.get(relay.put.remote("done", None))  # the relay holds every message before the trainer returns


@dataclass
class RayTrainExecutor:
    """Where an SFT job trains: Ray Train's ``TorchTrainer`` with ``num_workers`` CPU workers.

    Args:
        address: None (a local Ray instance on 127.0.0.1, started for the run and stopped by process id),
            ``"auto"`` (the cluster this process runs in), ``"ray://host:port"`` or ``"host:port"``.
            When this process is already connected to Ray, that connection is used.
        num_workers: data-parallel copies of the model (``ScalingConfig(num_workers=...)``; with a job planned on
            CUDA, ``use_gpu=True`` and one GPU per worker).
        threads: torch threads per worker (default: this machine's cores shared out on a local instance, else 1).
        cpus_per_worker: the CPUs each worker reserves on the cluster.
        storage_path: where Ray Train keeps the reported checkpoints (default: ``<run folder>/ray``).

    >>> RayTrainExecutor(num_workers=2, threads=1).describe()
    'Ray Train: 2 CPU worker(s) x 1 thread(s), DDP over gloo, on a local Ray instance on 127.0.0.1 (started for the run)'
    """

    address: str | None = None
    num_workers: int = 2
    threads: int | None = None
    cpus_per_worker: float = 1.0
    storage_path: str | None = None

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")

    @property
    def worker_threads(self) -> int:
        if self.threads is not None:
            return self.threads
        return max(1, (os.cpu_count() or 1) // self.num_workers) if self.address is None else 1

    def describe(self, use_gpu: bool = False) -> str:
        where = {None: "a local Ray instance on 127.0.0.1 (started for the run)",
                 "auto": "the Ray cluster this job runs on"}.get(self.address, f"the Ray cluster at {self.address}")
        workers = "GPU worker(s) (1 GPU each), DDP over NCCL" if use_gpu else \
            f"CPU worker(s) x {self.worker_threads} thread(s), DDP over gloo"
        return f"Ray Train: {self.num_workers} {workers}, on {where}"

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """Ray, connected for the block (a local instance started and stopped around it when ``address`` is None)."""
        if self.on_this_machine:
            use_loopback_ray()
        import ray

        if ray.is_initialized():  # a connection the caller made stays theirs
            yield ray
            return
        cpus = max(1, round(self.num_workers * self.cpus_per_worker))
        head = LocalRayHead(num_cpus=cpus, dashboard=False).start() if self.address is None else None
        try:
            address = head.gcs_address if head else self.address
            # ray.init makes SIGTERM exit at once; the run's handler (checkpoint, then stop) must stay
            previous = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as error:  # noqa: BLE001 - connection errors come in many types; say where
                raise RayTrainError(f"can't connect to Ray at {address}: {type(error).__name__}: {error}") from None
            finally:
                if previous is not None:
                    signal.signal(signal.SIGTERM, previous)
            try:
                yield ray
            finally:
                ray.shutdown()
        finally:
            if head is not None:
                head.stop()

    @property
    def on_this_machine(self) -> bool:
        """Whether the workers run on this machine only (a local instance, or a head on 127.0.0.1)."""
        host = (self.address or "").removeprefix("ray://").split(":")[0]
        return self.address is None or host in ("127.0.0.1", "localhost")

    def trainer(self, folder: Path, config: dict[str, Any], store_file: Path | None, use_gpu: bool = False) -> Any:
        """The TorchTrainer; with a ``store_file`` its workers meet in that file (one host, loopback only).

        ``use_gpu``: one GPU per worker and DDP over NCCL (the job planned a CUDA device).
        """
        from ray.train import CheckpointConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer

        if store_file is not None:  # torch's TCP store would listen on every address; a file store listens nowhere
            from promptgym.distributed.loopback_torch import LoopbackTorchConfig  # heavy: imports ray and torch

            torch_config = LoopbackTorchConfig(store_file=str(store_file), backend="nccl" if use_gpu else "gloo")
        else:
            torch_config = TorchConfig(backend="nccl" if use_gpu else "gloo")
        return TorchTrainer(
            _train_worker, train_loop_config=config, torch_config=torch_config,
            scaling_config=ScalingConfig(num_workers=self.num_workers, use_gpu=use_gpu,
                                         resources_per_worker={"CPU": self.cpus_per_worker,
                                                               **({"GPU": 1} if use_gpu else {})}),
            # Ray keeps the newest reported checkpoint; the run folder keeps them all, as a local run does
            run_config=RunConfig(name="sft", storage_path=self.storage_path or str(folder / RAY_STORAGE),
                                 checkpoint_config=CheckpointConfig(num_to_keep=1)))

    def train(self, job: SFTJob, folder: Path, on_event: EventSink, status: StatusSink, resume: bool,
              stop: StopRequest, started: float) -> Any:
        """Run ``job``'s training loop on the workers; returns Ray Train's Result (its ``checkpoint`` is the last one).

        Raises TrainingInterrupted after the workers checkpointed on a stop request, RayTrainError on a failure.
        """
        folder = folder.resolve()
        with self.connection() as ray:
            relay = ray.remote(Relay).options(num_cpus=0).remote()
            spec = {"settings": job.settings, "source": job.source, "data": job.data, "seed": job.seed, "name": job.name,
                    "precision": job.plan.compute}
            config = {"job": ray.put(spec), "relay": relay, "folder": str(folder), "resume": resume,
                      "started": started, "threads": self.worker_threads, "use_gpu": job.plan.is_cuda}
            outcome: dict[str, Any] = {}

            # a local instance, or a cluster whose every node is on 127.0.0.1 (a submitted job's `auto` on a test head)
            loopback = self.on_this_machine or cluster_on_loopback(ray)
            store = folder / RAY_STORAGE / f".process-group-{uuid.uuid4().hex[:8]}" if loopback else None
            if store is not None:
                store.parent.mkdir(parents=True, exist_ok=True)

            def fit() -> None:
                try:
                    outcome["result"] = self.trainer(folder, config, store, use_gpu=job.plan.is_cuda).fit()
                except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                    outcome["error"] = error
                finally:
                    if store is not None:
                        store.unlink(missing_ok=True)

            thread = threading.Thread(target=fit, name="ray-train-fit", daemon=True)
            thread.start()
            asked, interrupted = False, None
            while True:
                alive = thread.is_alive()
                for kind, payload in ray.get(relay.drain.remote()):
                    if kind == "event":
                        on_event(payload)
                    elif kind == "status":
                        status(**payload)
                    elif kind == "interrupted":
                        interrupted = payload
                if not alive:
                    break
                if stop.requested and not asked:
                    relay.request_stop.remote(stop.reason or "requested")
                    asked = True
                thread.join(0.25)
        if "error" in outcome:
            raise RayTrainError(f"training on Ray failed: {_worker_error(outcome['error'])}") from outcome["error"]
        if interrupted is not None:
            raise TrainingInterrupted(interrupted["step"], Path(interrupted["checkpoint"]))
        return outcome["result"]


def cluster_on_loopback(ray: Any) -> bool:
    """Whether every live node of the connected cluster has the address 127.0.0.1 (so: this machine, one host)."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    return bool(nodes) and all(node.get("NodeManagerAddress") in ("127.0.0.1", "localhost") for node in nodes)


def _worker_error(error: BaseException) -> str:
    """The workers' own error when Ray wrapped it, else the error itself."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) < 4000 else text[:4000] + " ..."


__getattr__ = renamed_names(__name__, {"RayTrainBackend": "RayTrainExecutor"}, globals())
