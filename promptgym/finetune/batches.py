"""Batches of encoded conversations, padded to their own longest row (never to ``max_length``).

    order = epoch_order(len(rows), seed=0, epoch=1)
    batch = collate([rows[i] for i in order[:4]], pad_id=tokenizer.pad_token_id)

The order of an epoch is a function of (seed, epoch) alone, so a resumed run sees exactly the
batches an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from promptgym.finetune.encoding import IGNORE_INDEX, EncodedConversation


@dataclass
class Batch:
    input_ids: Any
    attention_mask: Any
    labels: Any

    @property
    def tokens(self) -> int:
        return int(self.attention_mask.sum())

    @property
    def trained_tokens(self) -> int:
        # labels are compared with the *next* position's target, so the first token of a row never counts
        return int((self.labels[:, 1:] != IGNORE_INDEX).sum())


def collate(rows: Sequence[EncodedConversation], pad_id: int) -> Batch:
    """Right-padded tensors of the rows; padding is masked out of attention and loss."""
    import torch  # deferred: heavy, loaded when a job runs

    width = max(len(row.input_ids) for row in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        size = len(row.input_ids)
        input_ids[index, :size] = torch.tensor(row.input_ids)
        labels[index, :size] = torch.tensor(row.labels)
        attention_mask[index, :size] = 1
    return Batch(input_ids, attention_mask, labels)


def epoch_order(size: int, seed: int, epoch: int, shuffle: bool = True) -> list[int]:
    """Row indices of one epoch: a permutation fixed by (seed, epoch)."""
    if not shuffle:
        return list(range(size))
    import torch  # deferred: heavy, loaded when a job runs

    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(size, generator=generator).tolist()


def batches_of(order: Sequence[int], batch_size: int) -> list[list[int]]:
    return [list(order[start:start + batch_size]) for start in range(0, len(order), batch_size)]
