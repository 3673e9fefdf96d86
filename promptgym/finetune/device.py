"""Where a weight flow trains and in which number formats: the device plan.

    plan = plan_device("auto", "auto")       # CUDA when torch sees a GPU, else the CPU
    plan.describe()                           # 'cuda:0 (NVIDIA H200, 139.7 GiB free), bf16 base + fp32 LoRA'
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=plan.weight_dtype).to(plan.device)
    with plan.autocast():
        loss = ...

On a GPU the frozen base is kept in bf16 (fp16 where the GPU has no bf16), the LoRA weights and their
optimiser state in fp32 (peft keeps adapters in fp32 over a half-precision base), matrix products run
under autocast and TF32 is allowed. On a CPU ``precision = "auto"`` does the same in bf16 where the
processor computes bf16 natively (AVX512-BF16 or AMX), else everything stays fp32.

Every question asked of CUDA goes through :class:`Accelerator`, the one seam tests replace to plan for a
GPU on a machine without one. Importing this module imports no torch.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

Precision = Literal["auto", "fp32", "bf16", "fp16"]

DEVICE_PATTERN = r"^(auto|cpu|cuda|cuda:\d+)$"
"""What ``device`` accepts: ``auto``, ``cpu``, ``cuda`` (the first GPU) or ``cuda:N``."""

GIB = 1024 ** 3


class DeviceError(ValueError):
    """A device the machine doesn't have, or a precision it can't compute; the message says what it has."""


@dataclass(frozen=True)
class GPU:
    """One CUDA device as torch sees it."""

    index: int
    name: str
    total_bytes: int
    free_bytes: int
    bf16: bool


class Accelerator(Protocol):
    """What the plan needs to know about CUDA (torch's answers by default; a fake one in tests)."""

    def torch_build(self) -> str: ...

    def gpus(self) -> list[GPU]: ...


class TorchCuda:
    """The real answers, from ``torch.cuda``."""

    def torch_build(self) -> str:
        import torch  # deferred: a heavy import only the weight flows need

        cuda = torch.version.cuda
        return f"torch {torch.__version__}" + (f" (CUDA {cuda})" if cuda else " (CPU build)")

    def gpus(self) -> list[GPU]:
        import torch  # deferred: a heavy import only the weight flows need

        if not torch.cuda.is_available():
            return []
        found = []
        for index in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(index)
            found.append(GPU(index=index, name=torch.cuda.get_device_name(index), total_bytes=int(total),
                             free_bytes=int(free), bf16=bool(torch.cuda.is_bf16_supported(including_emulation=False))))
        return found


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the processor computes bf16 natively (AVX512-BF16 or AMX-BF16): bf16 then pays on the CPU."""
    try:
        flags = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


@dataclass(frozen=True)
class DevicePlan:
    """The device and number formats one weight run uses."""

    device: str
    """``"cpu"`` or ``"cuda:N"``."""
    compute: Literal["fp32", "bf16", "fp16"]
    """The format of the frozen base's weights and of autocast's matrix products (fp32: no autocast)."""
    gpu: GPU | None = None

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def weight_dtype(self) -> Any:
        """The torch dtype the base model is loaded in."""
        import torch  # deferred: a heavy import only the weight flows need

        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.compute]

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Mixed precision around a forward pass; nothing in fp32."""
        if self.compute == "fp32":
            return contextlib.nullcontext()
        import torch  # deferred: a heavy import only the weight flows need

        return torch.autocast(device_type="cuda" if self.is_cuda else "cpu", dtype=self.weight_dtype)

    def prepare_torch(self) -> None:
        """Process-wide settings the plan needs: TF32 matmuls on a GPU, the GPU as the current device."""
        if not self.is_cuda:
            return
        import torch  # deferred: a heavy import only the weight flows need

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.cuda.set_device(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def describe(self) -> str:
        """One line for previews and summaries."""
        formats = "fp32" if self.compute == "fp32" else f"{self.compute} base + fp32 LoRA"
        if self.gpu is None:
            return f"cpu, {formats}"
        return f"{self.device} ({self.gpu.name}, {self.gpu.free_bytes / GIB:.1f} GiB free), {formats}"

    def record(self) -> dict[str, Any]:
        """What run.json and summary.md keep about the device."""
        data: dict[str, Any] = {"device": self.device, "precision": self.compute}
        if self.gpu is not None:
            data.update(gpu_name=self.gpu.name, gpu_total_gib=round(self.gpu.total_bytes / GIB, 1))
        return data


def plan_device(device: str = "auto", precision: Precision = "auto", accelerator: Accelerator | None = None,
                cpu_bf16: bool | None = None) -> DevicePlan:
    """The plan for ``device`` (``auto``/``cpu``/``cuda``/``cuda:N``) and ``precision``, checked before any loading.

    >>> plan_device("cpu", "fp32").describe()
    'cpu, fp32'
    """
    if not re.match(DEVICE_PATTERN, device):
        raise DeviceError(f"device {device!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if device == "cpu":
        return _cpu_plan(precision, cpu_bf16)
    accelerator = accelerator or TorchCuda()
    gpus = accelerator.gpus()
    if device == "auto" and not gpus:
        return _cpu_plan(precision, cpu_bf16)
    if not gpus:
        raise DeviceError(f"device {device!r}: torch sees no CUDA GPU ({accelerator.torch_build()}); use device = "
                          f"'cpu' or 'auto', or install torch's CUDA build (see docs/sft.md, 'Training on a GPU')")
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= len(gpus):
        raise DeviceError(f"device {device!r}: there are {len(gpus)} GPU(s), cuda:0 to cuda:{len(gpus) - 1}")
    gpu = gpus[index]
    if precision == "auto":
        compute = "bf16" if gpu.bf16 else "fp16"
    elif precision == "bf16" and not gpu.bf16:
        raise DeviceError(f"precision 'bf16': {gpu.name} has no bf16; use 'fp16' or 'auto'")
    else:
        compute = precision
    return DevicePlan(device=f"cuda:{index}", compute=compute, gpu=gpu)


def _cpu_plan(precision: Precision, bf16: bool | None) -> DevicePlan:
    """The CPU's plan; ``bf16`` None asks the processor (only when ``precision`` is "auto")."""
    if precision == "fp16":
        raise DeviceError("precision 'fp16' is for GPUs; on the CPU use 'auto', 'bf16' or 'fp32'")
    if precision != "auto":
        return DevicePlan(device="cpu", compute=precision)
    native = cpu_has_bf16() if bf16 is None else bf16
    return DevicePlan(device="cpu", compute="bf16" if native else "fp32")


def to_device(plan: DevicePlan, *tensors: Any) -> list[Any]:
    """The tensors on the plan's device (no copy on the CPU)."""
    if not plan.is_cuda:
        return list(tensors)
    return [tensor.to(plan.device, non_blocking=True) for tensor in tensors]


def peak_gpu_memory_mb(plan: DevicePlan) -> float | None:
    """The most GPU memory torch held at once since the plan was prepared (None on the CPU)."""
    if not plan.is_cuda:
        return None
    import torch  # deferred: a heavy import only the weight flows need

    return torch.cuda.max_memory_allocated(plan.device) / 2 ** 20


def is_out_of_memory(error: BaseException) -> bool:
    """A CUDA out-of-memory error (torch's own class, or the RuntimeError older builds raise)."""
    return type(error).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(error)


class DeviceOutOfMemory(RuntimeError):
    """The GPU ran out of memory on a step; the message says the step's size and what to lower."""


def out_of_memory_message(plan: DevicePlan, rows: int, longest: int, checkpoint: Path | None) -> str:
    """Which step failed, where the run can resume from, and the settings that lower memory."""
    saved = f"; resume continues from {checkpoint}" if checkpoint else ""
    return (f"{plan.device} ran out of memory on a step of {rows} rows of up to {longest} tokens{saved}. "
            f"Lower batch_size (and raise gradient_accumulation_steps to keep the effective batch), lower "
            f"max_length, or set gradient_checkpointing = true")
