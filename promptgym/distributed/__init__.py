"""Rollouts on Ray and runs submitted to a Ray cluster (``pip install 'promptgym[distributed]'``).

    from promptgym.distributed import RayExecutor
    await program.evaluate(x, y, executor=RayExecutor(num_workers=2))
    sft(settings, "runs/my-sft", executor=RayTrainExecutor(num_workers=2))   # SFT on Ray Train

See docs/scaling.md.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy (PEP 562), not for a circle: every CLI command reads promptgym.distributed.jobs, and importing this
    # package must not load the rollout executor and the SFT flow for it (about 50-90 ms on 2 cores).
    if name in ("RayExecutor", "RayExecutorError"):
        from promptgym.distributed import ray_executor

        return getattr(ray_executor, name)
    if name in ("RayTrainExecutor", "RayTrainError", "RayTrainBackend"):  # RayTrainBackend: deprecated, it warns
        from promptgym.distributed import sft_train

        return getattr(sft_train, name)
    if name == "LocalRayHead":
        from promptgym.distributed.local_head import LocalRayHead

        return LocalRayHead
    raise AttributeError(f"module 'promptgym.distributed' has no attribute {name!r}")


__all__ = ["LocalRayHead", "RayExecutor", "RayExecutorError", "RayTrainExecutor", "RayTrainError"]
