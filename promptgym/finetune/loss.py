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
    import torch  # deferred: heavy, loaded when a job runs
    import torch.nn.functional as F

    logits = head(hidden).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return F.cross_entropy(logits, targets, reduction="sum")


def chunked_causal_lm_loss(model: Any, input_ids: Any, attention_mask: Any, labels: Any,
                           chunk_size: int = 512) -> tuple[Any, int]:
    """``(sum of token losses, number of trained tokens)``; position t predicts label t+1."""
    body, head, softcap = causal_lm_parts(model)
    hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != IGNORE_INDEX
    return _chunked_loss_sum(head, softcap, hidden[:, :-1][keep], targets[keep], chunk_size)


def _chunked_loss_sum(head: Any, softcap: float | None, selected: Any, wanted: Any, chunk_size: int) -> tuple[Any, int]:
    import torch  # deferred: a heavy import only the weight flows need
    from torch.utils.checkpoint import checkpoint

    count = int(wanted.numel())
    if count == 0:
        return selected.sum() * 0.0, 0
    total = torch.zeros((), dtype=torch.float32, device=selected.device)
    for start in range(0, count, chunk_size):
        piece = slice(start, start + chunk_size)
        if torch.is_grad_enabled():
            total = total + checkpoint(_chunk_loss_sum, head, softcap, selected[piece], wanted[piece], use_reentrant=False)
        else:
            total = total + _chunk_loss_sum(head, softcap, selected[piece], wanted[piece])
    return total, count


MIN_SHARED_PREFIX = 16
"""Below this many shared tokens a batch is encoded row by row: the saving would not pay for the second call."""


def shared_prefix_length(input_ids: Any, attention_mask: Any, labels: Any) -> int:
    """How many leading tokens every row of a right-padded batch has in common, none of them a target.

    Every row keeps at least one token after the prefix, and the prefix ends before the first position with
    a label (the prefix's last position predicts it), so the loss of a prefix-shared pass covers exactly the
    same targets as the plain one.
    """
    import torch  # deferred: a heavy import only the weight flows need

    if input_ids.shape[0] < 2:
        return 0
    shortest = int(attention_mask.sum(-1).min())
    differs = (input_ids[:, :shortest] != input_ids[:1, :shortest]).any(0)
    labelled = (labels[:, :shortest] != IGNORE_INDEX).any(0)
    labelled[0] = False  # the first token is never a target
    stops = torch.nonzero(differs | labelled)
    common = int(stops[0]) if len(stops) else shortest
    return min(common, shortest - 1)


def prefix_shared_causal_lm_loss(model: Any, input_ids: Any, attention_mask: Any, labels: Any,
                                 chunk_size: int = 512) -> tuple[Any, int]:
    """:func:`chunked_causal_lm_loss` computing the rows' common prefix once.

    The prefix (in a program's own rows, its system message: most of each row) runs through the decoder as a
    batch of one; its key/value cache is then handed to every row, which runs only its own tokens on it.
    Gradients flow back through the shared cache, so they are those of the plain pass; the tokens computed
    drop from ``rows x width`` to ``prefix + rows x (width - prefix)``.
    """
    import torch  # deferred: a heavy import only the weight flows need
    from transformers import DynamicCache

    prefix = shared_prefix_length(input_ids, attention_mask, labels)
    if prefix < MIN_SHARED_PREFIX:
        return chunked_causal_lm_loss(model, input_ids, attention_mask, labels, chunk_size)
    body, head, softcap = causal_lm_parts(model)
    rows, width = input_ids.shape
    cache = DynamicCache(config=body.config)
    shared = body(input_ids=input_ids[:1, :prefix], attention_mask=attention_mask[:1, :prefix], cache=cache,
                  use_cache=True).last_hidden_state[:, -1:]
    cache.batch_select_indices(torch.zeros(rows, dtype=torch.long, device=input_ids.device))
    own = body(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, cache=cache, use_cache=True,
               position_ids=torch.arange(prefix, width, device=input_ids.device)[None].expand(rows, -1)).last_hidden_state
    # position prefix-1 (the shared pass's last) predicts label `prefix`; own position j predicts label j+1
    hidden = torch.cat([shared.expand(rows, -1, -1), own[:, :-1]], dim=1)
    targets = labels[:, prefix:]
    keep = targets != IGNORE_INDEX
    return _chunked_loss_sum(head, softcap, hidden[keep], targets[keep], chunk_size)


def sft_loss(model: Any, input_ids: Any, attention_mask: Any, labels: Any, chunk_size: int = 512,
             share_prefix: bool = False) -> tuple[Any, int]:
    """The SFT loss of one batch, its common prefix encoded once when ``share_prefix``."""
    if share_prefix:
        return prefix_shared_causal_lm_loss(model, input_ids, attention_mask, labels, chunk_size)
    return chunked_causal_lm_loss(model, input_ids, attention_mask, labels, chunk_size)


def _chunk_logprobs(head: Any, softcap: float | None, temperature: float, hidden: Any, targets: Any) -> Any:
    import torch  # deferred: heavy, loaded when a job runs

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
    import torch  # deferred: heavy, loaded when a job runs
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
