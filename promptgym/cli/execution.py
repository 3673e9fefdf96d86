"""``--executor local | ray | ray://HOST:PORT`` and ``--workers N``: where a run executes (its rollouts, an
sft job's training). Inside the CLI this is the run's *execution*. ``--backend`` is the flag's old name, still
accepted (hidden) with a deprecation line: :func:`executor_flag`.

    spec = parse_execution("ray", workers=2)  # ExecutionSpec(kind="ray", address=None, workers=2)
    spec.describe()                            # for the preview
    executor = spec.executor()                 # None (in-process) or a RayExecutor owned by the run
    spec.train_executor()                      # for an sft job: None (this process) or a RayTrainExecutor
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from promptgym.distributed.ray_executor import RayExecutor  # ray itself loads on the first rollout
from promptgym.distributed.sft_train import RayTrainExecutor  # ray itself loads when training starts

DEFAULT_WORKERS = 2
# Set by Ray's job supervisor for a submitted job's entrypoint: `--executor ray` then joins that cluster.
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


class ExecutionError(ValueError):
    """A --executor / --workers value that can't be used."""


@dataclass(frozen=True)
class ExecutionSpec:
    kind: str  # "local" | "ray"
    address: str | None = None
    workers: int = DEFAULT_WORKERS

    def describe(self) -> str:
        if self.kind == "local":
            return "in this process (--executor local)"
        return f"{self.where()}, {self.workers} worker(s); the optimizer stays in this process"

    def where(self) -> str:
        """The Ray cluster a ``ray`` spec runs on, in words."""
        if self.address is None:
            return "a local Ray instance on 127.0.0.1, started and stopped by this run"
        if self.address == "auto":
            return "the Ray cluster this job runs on"
        return f"the Ray cluster at {self.address}"

    def arguments(self) -> list[str]:
        """The flags that give this spec again (for a detached worker process)."""
        if self.kind == "local":
            return []
        return ["--executor", "ray" if self.address in (None, "auto") else self.address, "--workers", str(self.workers)]

    def executor(self) -> RayExecutor | None:
        """The run's executor (None: in-process); a Ray one starts on its first rollout.

        A local instance shares this machine's cores among its workers (llama.cpp threads each).
        """
        if self.kind == "local":
            return None
        threads = max(1, (os.cpu_count() or 1) // self.workers) if self.address is None else 1
        return RayExecutor(address=self.address, num_workers=self.workers, threads=threads)

    def train_executor(self) -> RayTrainExecutor | None:
        """Where an sft job trains: None (this process) or Ray Train's CPU workers, one per ``--workers``."""
        if self.kind == "local":
            return None
        return RayTrainExecutor(address=self.address, num_workers=self.workers)


def executor_flag(executor: str | None, backend: str | None) -> str:
    """The ``--executor`` value (default ``local``), or the deprecated ``--backend``'s, saying so on stderr.

    >>> executor_flag("ray", None)
    'ray'
    """
    if backend is None:
        return executor or "local"
    if executor is not None:
        raise ExecutionError("--backend is the deprecated name of --executor: give only --executor")
    print("warning: --backend is deprecated, use --executor", file=sys.stderr)
    return backend


def parse_execution(value: str, workers: int | None = None) -> ExecutionSpec:
    """Check ``--executor`` and ``--workers`` together; the error says what is accepted."""
    if value == "local":
        if workers is not None:
            raise ExecutionError("--workers needs --executor ray or ray://HOST:PORT (local runs in this process)")
        return ExecutionSpec("local")
    if workers is not None and workers < 1:
        raise ExecutionError(f"--workers: expected a number >= 1, got {workers}")
    count = workers or DEFAULT_WORKERS
    if value == "ray":
        return ExecutionSpec("ray", "auto" if os.environ.get(RAY_JOB_ENV) else None, count)
    if value.startswith("ray://") and value.count(":") == 2 and value.rsplit(":", 1)[1].isdigit():
        return ExecutionSpec("ray", value, count)
    raise ExecutionError(f"--executor: expected 'local', 'ray' or 'ray://HOST:PORT', got {value!r}")

