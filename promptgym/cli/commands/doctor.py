"""``promptgym doctor``: what promptgym sees on this machine for weight training (torch, CUDA, GPUs, the CPU).

    $ promptgym doctor
    torch        torch 2.13.0+cpu (CPU build)
    GPUs         none: SFT and RL train on the CPU
    CPU          2 cores; bf16 computed natively (avx512_bf16): precision 'auto' trains in bf16
    device auto  cpu, bf16 base + fp32 LoRA
"""

from __future__ import annotations

import importlib.util
import os
import platform

from rich.table import Table

from promptgym.cli.common import console
from promptgym.finetune.device import GIB, Accelerator, DeviceError, TorchCuda, cpu_has_bf16, plan_device

OPTIONAL_PACKAGES = (("transformers", "SFT and RL"), ("peft", "LoRA"), ("ray", "--executor ray"),
                     ("llama_cpp", "the embedded engine"), ("vllm", "not used yet"))


def doctor_rows(accelerator: Accelerator | None = None, cpu_bf16: bool | None = None) -> list[tuple[str, str]]:
    """(label, value) rows of the report; ``accelerator`` and ``cpu_bf16`` replace the machine's answers in tests."""
    accelerator = accelerator or TorchCuda()
    cpu_bf16 = cpu_has_bf16() if cpu_bf16 is None else cpu_bf16
    rows = [("python", f"{platform.python_version()} ({platform.machine()})"), ("torch", accelerator.torch_build())]
    gpus = accelerator.gpus()
    if not gpus:
        rows.append(("GPUs", "none: SFT and RL train on the CPU (a GPU needs torch's CUDA build, see docs/sft.md)"))
    for gpu in gpus:
        rows.append((f"cuda:{gpu.index}", f"{gpu.name}, {gpu.free_bytes / GIB:.1f} of {gpu.total_bytes / GIB:.1f} GiB "
                                          f"free, {'bf16' if gpu.bf16 else 'no bf16 (fp16 instead)'}"))
    rows.append(("CPU", f"{os.cpu_count()} cores; " + ("bf16 computed natively: precision 'auto' trains in bf16"
                                                       if cpu_bf16 else "no native bf16: precision 'auto' stays fp32")))
    try:
        rows.append(("device auto", plan_device("auto", "auto", accelerator, cpu_bf16).describe()))
    except DeviceError as error:
        rows.append(("device auto", f"unusable: {error}"))
    for module, use in OPTIONAL_PACKAGES:
        found = importlib.util.find_spec(module) is not None
        rows.append((module, ("installed" if found else "not installed") + f" ({use})"))
    return rows


def doctor_command() -> None:
    """Show what promptgym sees for weight training: torch's build, CUDA, GPUs and memory, the CPU."""
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in doctor_rows():
        table.add_row(label, value)
    console.print(table)
