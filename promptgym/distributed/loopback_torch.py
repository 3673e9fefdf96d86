"""Ray Train's torch set-up for workers on one machine that must listen on loopback only.

    trainer = TorchTrainer(..., torch_config=LoopbackTorchConfig(store_file="/tmp/run/pg-store"))

Ray's ``TorchConfig`` meets the workers in a TCP store on the first worker, and torch binds that store
to every address of the machine (there is no option to bind it to 127.0.0.1). Here the workers meet
in a file instead (``file://``, torch's FileStore), and gloo's own connections use the loopback
interface; nothing listens beyond 127.0.0.1. Only for workers that share a filesystem and a host: a
local Ray instance, never a multi-node cluster (use Ray's own ``TorchConfig`` there).

Written against Ray 2.60's torch backend (``ray.train.torch.config``), the version pinned in pyproject.toml.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import ray
from ray.train.torch import TorchConfig
from ray.train.torch.config import _set_torch_distributed_env_vars, _setup_torch_process_group, _TorchBackend


def loopback_interface() -> str | None:
    """The name of the loopback network interface (``lo`` on Linux), if there is one."""
    names = [name for _, name in socket.if_nameindex()]
    return next((name for name in names if name in ("lo", "lo0")), None)


def _use_loopback_interface(name: str | None) -> None:
    if name:
        os.environ["GLOO_SOCKET_IFNAME"] = name


class _FileStoreTorchBackend(_TorchBackend):
    def on_start(self, worker_group: Any, backend_config: "LoopbackTorchConfig") -> None:
        worker_group.execute(_use_loopback_interface, name=loopback_interface())
        worker_group.execute(_set_torch_distributed_env_vars)
        ray.get([worker_group.execute_single_async(rank, _setup_torch_process_group, backend=backend_config.backend,
                                                   world_rank=rank,
                                                   world_size=len(worker_group),
                                                   init_method=f"file://{backend_config.store_file}",
                                                   timeout_s=backend_config.timeout_s)
                 for rank in range(len(worker_group))])


@dataclass
class LoopbackTorchConfig(TorchConfig):
    """``TorchConfig`` (gloo, or NCCL for GPU workers) whose workers meet in ``store_file`` (which must not exist yet)."""

    store_file: str = ""

    def __post_init__(self) -> None:
        if not self.store_file:
            raise ValueError("LoopbackTorchConfig needs a store_file path")
        self.backend = self.backend or "gloo"
        if self.backend not in ("gloo", "nccl"):
            raise ValueError(f"LoopbackTorchConfig: backend {self.backend!r}, expected 'gloo' or 'nccl'")

    @property
    def backend_cls(self) -> type:
        return _FileStoreTorchBackend
