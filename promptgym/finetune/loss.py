"""Causal-LM cross-entropy and token log-probabilities that never hold the logits of a whole batch.

    loss_sum, count = chunked_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels)
    (loss_sum / count).backward()
    logprobs = chunked_token_logprobs(head, softcap, hidden, targets, temperature=1.0)   # RL: per sampled token

The decoder runs once; the output layer then runs only on positions that have a label, a chunk at a
time, each chunk under activation checkpointing, so at most one chunk of logits (``chunk_size`` x
vocabulary, float32) is alive in the forward and in the backward pass. With Qwen's 152k vocabulary,
batch 4 x 512 positions of full logits would take 1.2 GB (and as much again for their gradient); a
chunk of 512 takes 311 MB, and positions without a label (prompts, padding) cost nothing.
"""

from __future__ import annotations

from typing import Any

from promptgym.finetune.encoding import IGNORE_INDEX


def causal_lm_parts(model: Any) -> tuple[Any, Any, float | None]:
    """(decoder body, output layer, logit soft-cap) of a transformers causal LM, with or without a peft wrapper."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    body = getattr(causal_lm, causal_lm.base_model_prefix)
    softcap = getattr(causal_lm.config, "final_logit_softcapping", None)
    return body, causal_lm.get_output_embeddings(), softcap


def _chunk_loss_sum(head: Any, softcap: float | None, hidden: Any, targets: Any) -> Any:
    import torch
    import torch.nn.functional as F

    logits = head(hidden).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return F.cross_entropy(logits, targets, reduction="sum")


def chunked_causal_lm_loss(model: Any, input_ids: Any, attention_mask: Any, labels: Any,
                           chunk_size: int = 512) -> tuple[Any, int]:
    """``(sum of token losses, number of trained tokens)``; position t predicts label t+1."""
    import torch
    from torch.utils.checkpoint import checkpoint

    body, head, softcap = causal_lm_parts(model)
    hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != IGNORE_INDEX
    selected, wanted = hidden[:, :-1][keep], targets[keep]
    count = int(wanted.numel())
    if count == 0:
        return hidden.sum() * 0.0, 0
    total = torch.zeros((), dtype=torch.float32)
    for start in range(0, count, chunk_size):
        piece = slice(start, start + chunk_size)
        if torch.is_grad_enabled():
            total = total + checkpoint(_chunk_loss_sum, head, softcap, selected[piece], wanted[piece], use_reentrant=False)
        else:
            total = total + _chunk_loss_sum(head, softcap, selected[piece], wanted[piece])
    return total, count


def _chunk_logprobs(head: Any, softcap: float | None, temperature: float, hidden: Any, targets: Any) -> Any:
    import torch

    logits = head(hidden).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return torch.log_softmax(logits / temperature, dim=-1).gather(-1, targets[:, None]).squeeze(-1)


def chunked_token_logprobs(head: Any, softcap: float | None, hidden: Any, targets: Any, temperature: float = 1.0,
                           chunk_size: int = 512) -> Any:
    """``log softmax(head(hidden) / temperature)[target]`` per row of ``hidden`` (N x hidden size), in chunks.

    The same chunking (and activation checkpointing) as :func:`chunked_causal_lm_loss`, for losses that
    need each token's log-probability (policy gradients); ``head``/``softcap`` from :func:`causal_lm_parts`.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    pieces = []
    for start in range(0, int(targets.numel()), chunk_size):
        piece = slice(start, start + chunk_size)
        if torch.is_grad_enabled():
            pieces.append(checkpoint(_chunk_logprobs, head, softcap, temperature, hidden[piece], targets[piece],
                                     use_reentrant=False))
        else:
            pieces.append(_chunk_logprobs(head, softcap, temperature, hidden[piece], targets[piece]))
    return torch.cat(pieces) if pieces else hidden.sum(-1)[:0]
