"""The SFT loss with the batch's common prefix encoded once: the plain pass's loss and gradients."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM  # noqa: E402

from promptgym.finetune.batches import collate  # noqa: E402
from promptgym.finetune.device import DevicePlan  # noqa: E402
from promptgym.finetune.encoding import IGNORE_INDEX, EncodedConversation  # noqa: E402
from promptgym.finetune.lora import add_lora  # noqa: E402
from promptgym.finetune.loss import (  # noqa: E402
    chunked_causal_lm_loss,
    prefix_shared_causal_lm_loss,
    shared_prefix_length,
)
from promptgym.finetune.settings import LoraSettings  # noqa: E402


def rows_with_prefix(prefix: int, tails: list[int], answer: int = 3) -> list[EncodedConversation]:
    generator = torch.Generator().manual_seed(7)
    shared = torch.randint(5, 250, (prefix,), generator=generator).tolist()
    rows = []
    for tail in tails:
        ids = shared + torch.randint(5, 250, (tail,), generator=generator).tolist()
        rows.append(EncodedConversation(ids, [IGNORE_INDEX] * (len(ids) - answer) + ids[-answer:]))
    return rows


def lora_model(folder: Path, dtype: object = None) -> object:
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype or torch.float32)
    model = add_lora(model, LoraSettings(r=4, dropout=0.0), seed=0)
    for name, parameter in model.named_parameters():  # LoRA's B starts at zero: move it, so gradients reach A
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.02)
    return model


def gradients(model: object) -> dict[str, object]:
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


def test_prefix_length_stops_at_the_first_difference_label_or_shortest_row() -> None:
    batch = collate(rows_with_prefix(20, [5, 9, 7]), pad_id=0)
    assert shared_prefix_length(batch.input_ids, batch.attention_mask, batch.labels) == 20
    batch = collate(rows_with_prefix(20, [5, 9], answer=8), pad_id=0)  # the first row's answer starts in the prefix
    assert shared_prefix_length(batch.input_ids, batch.attention_mask, batch.labels) == 17
    batch = collate(rows_with_prefix(20, [4])[:1], pad_id=0)
    assert shared_prefix_length(batch.input_ids, batch.attention_mask, batch.labels) == 0  # one row: nothing to share


def test_loss_and_gradients_match_the_plain_pass_in_fp32(tiny_model: Path) -> None:
    batch = collate(rows_with_prefix(24, [6, 11, 3, 8]), pad_id=0)
    model = lora_model(tiny_model)
    plain, plain_count = chunked_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels, 16)
    plain.backward()
    expected = gradients(model)
    model.zero_grad(set_to_none=True)
    shared, count = prefix_shared_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels, 16)
    shared.backward()
    assert count == plain_count == 12
    torch.testing.assert_close(shared, plain, rtol=1e-5, atol=1e-5)
    got = gradients(model)
    assert got.keys() == expected.keys() and len(got) > 0
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)


def test_bf16_autocast_stays_within_bf16_tolerance_of_fp32(tiny_model: Path) -> None:
    batch = collate(rows_with_prefix(24, [6, 11, 3, 8]), pad_id=0)
    reference, _ = chunked_causal_lm_loss(lora_model(tiny_model), batch.input_ids, batch.attention_mask, batch.labels)
    model = lora_model(tiny_model, torch.bfloat16)
    with DevicePlan("cpu", "bf16").autocast():
        loss, _ = prefix_shared_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, reference, rtol=2e-2, atol=2e-2)
    assert all(p.dtype == torch.float32 for n, p in model.named_parameters() if "lora_" in n)  # adapters stay fp32
