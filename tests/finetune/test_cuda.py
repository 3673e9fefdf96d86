"""SFT and RL on a CUDA GPU with the tiny model: skipped on machines without one (CI has none; bench/gpu/run.sh runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from promptgym.finetune.lora import add_lora  # noqa: E402
from promptgym.finetune.rl.sampler import sample  # noqa: E402
from promptgym.finetune.rl.settings import RLSettings  # noqa: E402
from promptgym.finetune.rl.update import TrainingRow, row_logprobs  # noqa: E402
from promptgym.finetune.settings import LoraSettings, SFTSettings  # noqa: E402
from promptgym.finetune.sft_run import SFTJob, run_sft  # noqa: E402
from tests.finetune.tiny_model import capital_rows, write_rows  # noqa: E402


def test_sft_trains_on_the_gpu_and_records_it(tiny_model: Path, tmp_path: Path, fake_export) -> None:
    train = write_rows(tmp_path / "train.jsonl", capital_rows(24))
    settings = SFTSettings(base_model=str(tiny_model), train_file=str(train), n_epochs=2, batch_size=4,
                           learning_rate=3e-2, validation_split=0.2, lora={"r": 4, "alpha": 8}, summary_samples=1,
                           device="cuda")
    job = SFTJob.prepare(settings, name="gpu")
    assert job.plan.device == "cuda:0" and job.plan.compute in ("bf16", "fp16")
    assert next(job.model.parameters()).is_cuda
    assert job.measure_step_seconds() > 0
    result = run_sft(job, tmp_path / "run")
    assert result.device == "cuda:0" and result.peak_gpu_memory_mb and result.peak_gpu_memory_mb > 0
    assert result.final_eval_loss < result.initial_eval_loss
    status = json.loads((tmp_path / "run" / "run.json").read_text())
    assert status["device"] == "cuda:0" and status["peak_gpu_memory_mb"] > 0


def test_rl_samples_and_scores_the_same_tokens_on_the_gpu(tiny_model: Path) -> None:
    from transformers import AutoModelForCausalLM

    settings = RLSettings(base_model=str(tiny_model), device="cuda", lora=LoraSettings(r=4, dropout=0.0))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.float32).to("cuda:0")
    model = add_lora(model, settings.lora, seed=0).eval()
    generator = torch.Generator(device="cuda:0").manual_seed(0)
    prompts = [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10]]
    drawn = sample(model, prompts, [6, 6, 6], 1.0, stop_ids=set(), pad_id=0, generator=generator)
    assert [len(item.completion_ids) for item in drawn] == [6, 6, 6]
    rows = [TrainingRow(item.prompt_ids, item.completion_ids, item.logprobs, 1.0) for item in drawn]
    with torch.no_grad():
        scored = row_logprobs(model, rows, 0, 1.0, 512)
    sampled = torch.tensor([value for item in drawn for value in item.logprobs], device="cuda:0")
    assert float((scored - sampled).abs().max()) < 1e-3
    again = sample(model, prompts, [6, 6, 6], 1.0, stop_ids=set(), pad_id=0,
                   generator=torch.Generator(device="cuda:0").manual_seed(0))
    assert [item.completion_ids for item in again] == [item.completion_ids for item in drawn]


def test_keyed_draws_stay_on_the_gpu_and_repeat(tiny_model: Path) -> None:
    from transformers import AutoModelForCausalLM

    from promptgym.finetune.rl.draws import completion_generator

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.float32).to("cuda:0").eval()
    prompts = [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10]]

    def draw(order: list[int]) -> dict[int, list[int]]:
        generators = [completion_generator(3, 1, row, 0, 0, device=model.device) for row in order]
        drawn = sample(model, [prompts[row] for row in order], [6] * len(order), 1.0, stop_ids=set(), pad_id=0,
                       generator=generators)
        return {row: item.completion_ids for row, item in zip(order, drawn)}

    assert draw([0, 1, 2]) == draw([2, 0, 1])  # a row's tokens depend on its key, not on its place in the batch
