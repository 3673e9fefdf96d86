"""Assistant-only labels (without generation markers), the chunked loss, and length checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.finetune.chat_data import ChatDataError
from promptgym.finetune.encoding import IGNORE_INDEX, encode_conversation
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_data import prepare_sft_data
from tests.finetune.tiny_model import write_rows

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "uno"},
    {"role": "user", "content": "two"},
    {"role": "assistant", "content": "dos"},
]


def tokenizer_of(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def trained_text(tokenizer, encoded) -> str:
    return tokenizer.decode([t for t, label in zip(encoded.input_ids, encoded.labels) if label != IGNORE_INDEX])


def test_only_assistant_turns_carry_labels(tiny_model: Path) -> None:
    tokenizer = tokenizer_of(tiny_model)
    encoded = encode_conversation(tokenizer, CONVERSATION, "assistant")
    assert tokenizer.decode(encoded.input_ids).startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert trained_text(tokenizer, encoded) == "uno<|im_end|>dos<|im_end|>"
    for token, label in zip(encoded.input_ids, encoded.labels):
        assert label in (IGNORE_INDEX, token)
    everything = encode_conversation(tokenizer, CONVERSATION, "all")
    assert everything.labels == everything.input_ids == encoded.input_ids


def test_chunked_loss_equals_the_models_own_loss(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from promptgym.finetune.batches import collate
    from promptgym.finetune.loss import chunked_causal_lm_loss

    tokenizer, model = tokenizer_of(tiny_model), AutoModelForCausalLM.from_pretrained(str(tiny_model))
    rows = [encode_conversation(tokenizer, CONVERSATION, "assistant"),
            encode_conversation(tokenizer, CONVERSATION[:3], "assistant")]
    batch = collate(rows, tokenizer.pad_token_id)
    assert batch.input_ids.shape[1] == len(rows[0].input_ids)  # padded to the longest row, not to max_length
    with torch.no_grad():
        expected = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=batch.labels).loss
        total, count = chunked_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels, chunk_size=3)
    assert count == batch.trained_tokens == rows[0].trained_tokens + rows[1].trained_tokens
    assert float(total / count) == pytest.approx(float(expected), rel=1e-5)


def test_rows_longer_than_max_length_stop_the_run_unless_skipped(tiny_model: Path, tmp_path: Path) -> None:
    rows = [{"messages": CONVERSATION}, {"prompt": "x" * 300, "completion": "y"}, {"prompt": "a", "completion": "b"}]
    path = write_rows(tmp_path / "train.jsonl", rows)
    settings = SFTSettings(base_model=str(tiny_model), train_file=str(path), max_length=120, validation_split=0)
    tokenizer = tokenizer_of(tiny_model)
    with pytest.raises(ChatDataError) as caught:
        prepare_sft_data(settings, tokenizer)
    assert f"{path}:2: " in str(caught.value) and "longer than max_length 120" in str(caught.value)
    assert "would be cut" in str(caught.value) and "skip_invalid_rows" in str(caught.value)
    data = prepare_sft_data(settings.model_copy(update={"skip_invalid_rows": True}), tokenizer)
    assert len(data.train) == 2 and [problem.line for problem in data.skipped] == [2]


def test_validation_split_holds_out_the_last_rows(tiny_model: Path, tmp_path: Path) -> None:
    rows = [{"prompt": f"q{i}", "completion": f"a{i}"} for i in range(10)]
    path = write_rows(tmp_path / "train.jsonl", rows)
    settings = SFTSettings(base_model=str(tiny_model), train_file=str(path), validation_split=0.2, examples=9)
    data = prepare_sft_data(settings, tokenizer_of(tiny_model))
    # examples=9 keeps rows 1..9; a fifth of 9 (floor) holds out the last one
    assert [row.line for row in data.train_rows] == list(range(1, 9))
    assert [row.line for row in data.validation_rows] == [9]


def test_the_output_layer_never_sees_more_than_a_chunk_of_positions(tiny_model: Path) -> None:
    """What bounds memory with a big vocabulary: logits exist for at most ``chunk_size`` positions at a time."""
    import torch
    from transformers import AutoModelForCausalLM

    from promptgym.finetune.batches import collate
    from promptgym.finetune.loss import chunked_causal_lm_loss

    tokenizer, model = tokenizer_of(tiny_model), AutoModelForCausalLM.from_pretrained(str(tiny_model))
    rows = [encode_conversation(tokenizer, CONVERSATION, "all")] * 3
    batch = collate(rows, tokenizer.pad_token_id)
    positions: list[int] = []
    model.get_output_embeddings().register_forward_hook(lambda module, args, output: positions.append(output.shape[0]))
    total, count = chunked_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels, chunk_size=16)
    total.backward()
    assert count == 3 * (len(rows[0].input_ids) - 1) > 16
    # forward and the recomputation in backward: one call per chunk each, none over 16 positions
    assert max(positions) == 16 and sum(positions) == 2 * count
    with torch.no_grad():  # evaluation: no recomputation
        positions.clear()
        chunked_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels, chunk_size=16)
    assert max(positions) == 16 and sum(positions) == count
