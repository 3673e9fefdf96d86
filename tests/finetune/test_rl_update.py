"""The update's log-probabilities (each prompt encoded once, its cache shared by its rows) equal a plain forward
of every row whole, values and gradients; and one update moves the policy towards the better rollouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.finetune.rl.settings import RLSettings
from promptgym.finetune.rl.update import TrainingRow, grpo_update, micro_batches, row_logprobs
from promptgym.finetune.settings import LoraSettings


@pytest.fixture
def policy(tiny_model: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from promptgym.finetune.lora import add_lora

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    model = add_lora(AutoModelForCausalLM.from_pretrained(str(tiny_model)), LoraSettings(r=4, alpha=8, dropout=0.0), seed=0)
    import torch

    with torch.no_grad():  # adapters away from zero, so their gradients are not trivially equal
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.05)
    return model, tokenizer


def rows() -> list[TrainingRow]:
    long, short = [5, 6, 7, 8, 9], [11, 12]
    return [TrainingRow(long, [20, 21, 22], [0.0] * 3, 1.0), TrainingRow(short, [23], [0.0], -1.0),
            TrainingRow(long, [24, 25], [0.0] * 2, -1.0), TrainingRow(short, [26, 27, 28, 29], [0.0] * 4, 1.0)]


def whole_rows_logprobs(model, batch: list[TrainingRow]):
    import torch

    values = []
    for row in batch:
        ids = torch.tensor([row.prompt_ids + row.completion_ids])
        logits = model(input_ids=ids).logits[0, len(row.prompt_ids) - 1:-1].float()
        values.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(row.completion_ids)[:, None]).squeeze(-1))
    return torch.cat(values)


def lora_gradients(model, loss) -> dict[str, object]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}


def test_shared_prompt_logprobs_and_gradients_equal_whole_rows(policy) -> None:
    import torch

    model, tokenizer = policy
    batch = rows()
    shared = row_logprobs(model, batch, tokenizer.pad_token_id, temperature=1.0, chunk_size=3)
    whole = whole_rows_logprobs(model, batch)
    assert shared.shape == (10,) and torch.allclose(shared, whole, atol=1e-5)
    weights = torch.linspace(-1, 1, 10)
    shared_grads = lora_gradients(model, (row_logprobs(model, batch, tokenizer.pad_token_id, 1.0, 3) * weights).sum())
    whole_grads = lora_gradients(model, (whole_rows_logprobs(model, batch) * weights).sum())
    assert shared_grads.keys() == whole_grads.keys() and len(shared_grads) > 0
    for name, gradient in shared_grads.items():
        assert torch.allclose(gradient, whole_grads[name], atol=1e-5), name


def test_micro_batches_keep_a_prompts_rows_together() -> None:
    batches = micro_batches(rows(), 2)
    assert [[row.prompt_ids for row in batch] for batch in batches] == [[[11, 12]] * 2, [[5, 6, 7, 8, 9]] * 2]


def test_an_update_raises_the_better_rollouts_tokens(policy) -> None:
    import torch

    from promptgym.finetune.loop import make_optimizer

    model, tokenizer = policy
    batch = rows()
    with torch.no_grad():
        before = row_logprobs(model, batch, tokenizer.pad_token_id, 1.0, 512)
    sampled = [TrainingRow(r.prompt_ids, r.completion_ids, before[i:i + len(r.completion_ids)].tolist(), r.advantage)
               for r, i in zip(batch, [0, 3, 4, 6])]
    settings = RLSettings(base_model="m", learning_rate=1e-3, micro_batch_size=2)
    optimizer, scheduler = make_optimizer(model, settings, total_steps=10)
    measured = grpo_update(model, optimizer, scheduler, sampled, settings, tokenizer.pad_token_id)
    assert measured["logprob_mismatch"] < 1e-5 and measured["trained_tokens"] == 10 and measured["clip_fraction"] == 0
    with torch.no_grad():
        after = row_logprobs(model, batch, tokenizer.pad_token_id, 1.0, 512)
    advantage = torch.tensor([r.advantage for r in batch for _ in r.completion_ids])
    assert float((advantage * after).sum()) > float((advantage * before).sum())  # the objective went up
    gained = after - before
    assert float(gained[advantage > 0].mean()) > float(gained[advantage < 0].mean())
