"""Checkpoints of a weight flow: adapter, optimizer, LR schedule, RNG and progress; no pickle anywhere.

    save_checkpoint(folder / "checkpoints", TrainingParts(model, optimizer, scheduler), progress)
    progress = load_checkpoint(folder / "checkpoints", TrainingParts(model, optimizer, scheduler))

A checkpoint is a folder ``step_000050/``: the adapter as peft writes it (safetensors + JSON), the
optimizer's tensors in ``optimizer.safetensors`` and everything else in ``trainer_state.json``. It is
written under a temporary name and renamed, then ``last.json`` points at it, so a kill at any moment
leaves the previous checkpoint usable. Only the newest checkpoint keeps its optimizer state (the
older ones keep their adapter, about a third of the size).
"""

from __future__ import annotations

import random
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.finetune.lora import load_adapter_state

OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
RNG_FILE = "rng.safetensors"
ADAPTER_FILE = "adapter_model.safetensors"
POINTER = "last.json"


@dataclass
class TrainingParts:
    """The live objects a checkpoint captures (a run's state on disk is its checkpoint, not this)."""

    model: Any
    optimizer: Any
    scheduler: Any


@dataclass
class Progress:
    """Where training stands: optimizer steps done, and the position in the epoch they reached."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    loss: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _split_optimizer_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tensors for safetensors, the rest (param groups, plain numbers) for JSON."""
    import torch  # deferred: heavy, loaded when a job runs

    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for name, value in values.items():
            key = f"{index}.{name}"
            if isinstance(value, torch.Tensor):
                tensors[key] = value.detach().contiguous()
            else:
                scalars[key] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def _join_optimizer_state(tensors: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in [*tensors.items(), *meta["scalars"].items()]:
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    groups = [{**group, "betas": tuple(group["betas"])} if "betas" in group else group for group in meta["param_groups"]]
    return {"state": state, "param_groups": groups}


def _scheduler_state(scheduler: Any) -> dict[str, Any]:
    # LambdaLR keeps its lambdas (code) in the state; they are rebuilt from the settings, never saved
    return {key: value for key, value in scheduler.state_dict().items() if key != "lr_lambdas"}


def checkpoint_name(step: int) -> str:
    return f"step_{step:06d}"


def save_checkpoint(directory: Path, training: TrainingParts, progress: Progress) -> Path:
    """Write ``directory/step_NNNNNN`` and point ``last.json`` at it; returns the checkpoint folder."""
    import torch  # deferred: heavy, loaded when a job runs
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / checkpoint_name(progress.step)
    staging = directory / f".{target.name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)  # peft calls a transformers API renamed in v5
        training.model.save_pretrained(str(staging), safe_serialization=True)
    tensors, optimizer_meta = _split_optimizer_state(training.optimizer.state_dict())
    save_file(tensors, str(staging / OPTIMIZER_FILE))
    save_file({"torch": torch.get_rng_state()}, str(staging / RNG_FILE))
    atomic_write_json(staging / STATE_FILE, {
        "step": progress.step, "epoch": progress.epoch, "batch_in_epoch": progress.batch_in_epoch,
        "loss": progress.loss, "extra": progress.extra, "optimizer": optimizer_meta,
        "scheduler": _scheduler_state(training.scheduler), "python_rng": _python_rng_state(),
    })
    previous = last_checkpoint(directory)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    atomic_write_json(directory / POINTER, {"step": progress.step, "path": target.name})
    if previous is not None and previous != target:
        (previous / OPTIMIZER_FILE).unlink(missing_ok=True)
    return target


def _python_rng_state() -> list[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def _pointed(directory: Path) -> tuple[Path | None, str]:
    """The checkpoint ``last.json`` names, or None and what is wrong with the pointer."""
    pointer = directory / POINTER
    if not pointer.is_file():
        return None, "is missing"
    try:
        name = read_json(pointer)["path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, "can't be read"
    path = directory / str(name)
    return (path, "") if isinstance(name, str) and path.is_dir() else (None, f"names {name!r}, which is not there")


def complete_checkpoints(directory: Path) -> list[Path]:
    """The ``step_NNNNNN`` folders that hold everything a resume needs, newest (highest step) first.

    A kill mid-save leaves a hidden ``.step_NNNNNN.tmp`` (never listed); older checkpoints lose their
    optimizer state when a newer one is written, so they are not complete.
    """
    if not directory.is_dir():
        return []
    found = [path for path in directory.glob("step_*") if path.is_dir() and path.name[5:].isdigit()
             and all((path / name).is_file() for name in (STATE_FILE, ADAPTER_FILE, RNG_FILE, OPTIMIZER_FILE))]
    return sorted(found, key=lambda path: int(path.name[5:]), reverse=True)


def find_checkpoint(directory: Path) -> tuple[Path | None, str]:
    """The checkpoint to continue from, and a note saying which when it is not the one ``last.json`` names.

    ``last.json``'s checkpoint when it is there; else (the pointer was deleted, or a disk error broke it)
    the newest complete ``step_NNNNNN``; else None.
    """
    pointed, problem = _pointed(directory)
    if pointed is not None:
        return pointed, ""
    candidates = complete_checkpoints(directory)
    if not candidates:
        return None, ""
    return candidates[0], (f"checkpoints/{POINTER} {problem}; resuming from checkpoints/{candidates[0].name}, "
                           "the newest complete checkpoint")


def last_checkpoint(directory: Path) -> Path | None:
    """The newest usable checkpoint of ``directory`` (see :func:`find_checkpoint`), or None."""
    return find_checkpoint(directory)[0]


def read_adapter(checkpoint: Path) -> dict[str, Any]:
    from safetensors.torch import load_file  # deferred: heavy, loaded when a job runs

    return load_file(str(checkpoint / ADAPTER_FILE))


def load_checkpoint(directory: Path, training: TrainingParts) -> Progress:
    """Restore the newest checkpoint of ``directory`` into ``training``; returns where it stood."""
    import torch  # deferred: heavy, loaded when a job runs
    from safetensors.torch import load_file

    checkpoint = last_checkpoint(directory)
    if checkpoint is None:
        raise FileNotFoundError(f"{directory}: no checkpoint to resume from")
    if not (checkpoint / OPTIMIZER_FILE).is_file():
        raise FileNotFoundError(f"{checkpoint}: the optimizer state is missing, so training can't continue exactly")
    state = read_json(checkpoint / STATE_FILE)
    load_adapter_state(training.model, read_adapter(checkpoint))
    training.optimizer.load_state_dict(_join_optimizer_state(load_file(str(checkpoint / OPTIMIZER_FILE)), state["optimizer"]))
    scheduler_state = training.scheduler.state_dict()
    scheduler_state.update(state["scheduler"])
    training.scheduler.load_state_dict(scheduler_state)
    torch.set_rng_state(load_file(str(checkpoint / RNG_FILE))["torch"])
    version, internal, gauss = state["python_rng"]
    random.setstate((version, tuple(internal), gauss))
    return _progress(state)


def read_progress(checkpoint: Path) -> Progress:
    """Where training stood at ``checkpoint`` (a ``step_NNNNNN`` folder), without loading any tensor."""
    return _progress(read_json(checkpoint / STATE_FILE))


def _progress(state: dict[str, Any]) -> Progress:
    return Progress(step=state["step"], epoch=state["epoch"], batch_in_epoch=state["batch_in_epoch"],
                    loss=state.get("loss"), extra=state.get("extra", {}))

