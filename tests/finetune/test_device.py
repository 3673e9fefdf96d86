"""The device plan: what `device`/`precision` resolve to, with CUDA answered by a fake accelerator."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.cli.commands.doctor import doctor_rows
from promptgym.finetune.device import (
    GPU,
    DeviceError,
    DevicePlan,
    cpu_has_bf16,
    is_out_of_memory,
    out_of_memory_message,
    plan_device,
)
from promptgym.finetune.settings import SFTSettings

H200 = GPU(index=0, name="NVIDIA H200", total_bytes=143 * 2 ** 30, free_bytes=140 * 2 ** 30, bf16=True)
T4 = GPU(index=1, name="Tesla T4", total_bytes=16 * 2 ** 30, free_bytes=15 * 2 ** 30, bf16=False)


class FakeCuda:
    def __init__(self, *gpus: GPU) -> None:
        self.found = list(gpus)

    def torch_build(self) -> str:
        return "torch 9.9 (CPU build)" if not self.found else "torch 9.9 (CUDA 13.0)"

    def gpus(self) -> list[GPU]:
        return self.found


def test_auto_takes_the_first_gpu_in_bf16() -> None:
    plan = plan_device("auto", "auto", FakeCuda(H200, T4))
    assert (plan.device, plan.compute, plan.is_cuda) == ("cuda:0", "bf16", True)
    assert plan.describe() == "cuda:0 (NVIDIA H200, 140.0 GiB free), bf16 base + fp32 LoRA"
    assert plan.record() == {"device": "cuda:0", "precision": "bf16", "gpu_name": "NVIDIA H200", "gpu_total_gib": 143.0}


def test_a_gpu_without_bf16_gets_fp16_and_refuses_bf16() -> None:
    assert plan_device("cuda:1", "auto", FakeCuda(H200, T4)).compute == "fp16"
    with pytest.raises(DeviceError, match="Tesla T4 has no bf16"):
        plan_device("cuda:1", "bf16", FakeCuda(H200, T4))


def test_auto_without_a_gpu_is_the_cpu_in_bf16_only_where_the_cpu_computes_it() -> None:
    assert plan_device("auto", "auto", FakeCuda(), cpu_bf16=True) == DevicePlan("cpu", "bf16")
    assert plan_device("auto", "auto", FakeCuda(), cpu_bf16=False) == DevicePlan("cpu", "fp32")
    assert plan_device("cpu", "fp32", FakeCuda(H200), cpu_bf16=True) == DevicePlan("cpu", "fp32")


def test_cuda_on_a_machine_without_one_is_a_clear_error() -> None:
    with pytest.raises(DeviceError, match=r"device 'cuda': torch sees no CUDA GPU \(torch 9.9 \(CPU build\)\)"):
        plan_device("cuda", "auto", FakeCuda())
    with pytest.raises(DeviceError, match="there are 2 GPU"):
        plan_device("cuda:2", "auto", FakeCuda(H200, T4))
    with pytest.raises(DeviceError, match="'fp16' is for GPUs"):
        plan_device("cpu", "fp16")
    with pytest.raises(DeviceError, match="expected 'auto', 'cpu', 'cuda' or 'cuda:N'"):
        plan_device("gpu")


def test_settings_reject_an_unknown_device_by_name() -> None:
    with pytest.raises(ValueError, match="device"):
        SFTSettings(base_model="local/x", train_file="t.jsonl", device="tpu")
    assert SFTSettings(base_model="local/x", train_file="t.jsonl", device="cuda:3").device == "cuda:3"


def test_cpu_bf16_is_read_from_the_cpu_flags(tmp_path: Path) -> None:
    (tmp_path / "with").write_text("flags\t: fpu avx512f avx512_bf16 amx_tile\n")
    (tmp_path / "without").write_text("flags\t: fpu avx2 avx512f\n")
    assert cpu_has_bf16(tmp_path / "with") and not cpu_has_bf16(tmp_path / "without")
    assert not cpu_has_bf16(tmp_path / "missing")


def test_out_of_memory_is_recognised_and_says_what_to_lower() -> None:
    class OutOfMemoryError(RuntimeError):
        pass

    assert is_out_of_memory(OutOfMemoryError("x")) and is_out_of_memory(RuntimeError("CUDA out of memory. Tried"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    message = out_of_memory_message(DevicePlan("cuda:0", "bf16", H200), 32, 512, Path("run/checkpoints/step_000010"))
    assert message.startswith("cuda:0 ran out of memory on a step of 32 rows of up to 512 tokens; resume continues "
                              "from run/checkpoints/step_000010")
    for setting in ("batch_size", "gradient_accumulation_steps", "max_length", "gradient_checkpointing"):
        assert setting in message


def test_doctor_reports_gpus_and_what_auto_picks() -> None:
    rows = dict(doctor_rows(FakeCuda(H200), cpu_bf16=False))
    assert rows["cuda:0"] == "NVIDIA H200, 140.0 of 143.0 GiB free, bf16"
    assert rows["device auto"].startswith("cuda:0 (NVIDIA H200")
    rows = dict(doctor_rows(FakeCuda(), cpu_bf16=False))
    assert rows["GPUs"].startswith("none") and rows["device auto"] == "cpu, fp32"


def test_a_step_out_of_memory_checkpoints_and_says_what_to_lower(tiny_model: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgym.finetune.checkpoint import last_checkpoint
    from promptgym.finetune.device import DeviceOutOfMemory
    from promptgym.finetune.sft_run import SFTJob, SFTRun, run_sft
    from tests.finetune.tiny_model import capital_rows, write_rows

    class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError's name, raised on the third step
        pass

    train = write_rows(tmp_path / "train.jsonl", capital_rows(20))
    job = SFTJob.prepare(SFTSettings(base_model=str(tiny_model), train_file=str(train), batch_size=4,
                                     validation_split=0, lora={"r": 4}, summary_samples=0), name="oom")
    real_step, calls = SFTRun.optimizer_step, []

    def step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_step(*args, **kwargs)

    monkeypatch.setattr(SFTRun, "optimizer_step", step)
    with pytest.raises(DeviceOutOfMemory, match=r"on a step of 4 rows of up to \d+ tokens; resume continues from "
                                                 r".*step_000002.*Lower batch_size"):
        run_sft(job, tmp_path / "run")
    assert last_checkpoint(tmp_path / "run" / "checkpoints").name == "step_000002"
