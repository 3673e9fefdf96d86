"""The GRPO update: a clipped policy-gradient step on the tokens the policy server sampled.

    rows = [TrainingRow(prompt_ids, completion_ids, behaviour_logprobs, advantage), ...]
    stats = grpo_update(model, optimizer, scheduler, rows, settings)

Per sampled token t of a completion with advantage A (its rollout's group-normalised reward):

    ratio = exp(log pi(t) - log pi_sampled(t))
    loss  = -min(ratio * A, clip(ratio, 1 - clip, 1 + clip) * A) + beta * KL(pi || base)

summed over every token of the batch and divided by their number (long completions weigh by their
tokens). ``log pi_sampled`` is what the server recorded when it drew the token, so the ratio starts at 1
and the clipping only bites from the second of ``updates_per_batch`` steps on. The KL term (k3 estimator,
only when ``beta > 0``) compares with the base model: the same weights with the adapter switched off.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

from promptgym.finetune.loss import causal_lm_parts, chunked_token_logprobs
from promptgym.finetune.rl.sampler import left_padded
from promptgym.finetune.rl.settings import RLSettings


@dataclass(frozen=True)
class TrainingRow:
    """One completion to learn from: exactly what was served, and its rollout's advantage."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    advantage: float


def micro_batches(rows: Sequence[TrainingRow], size: int) -> list[list[TrainingRow]]:
    """``size`` rows at a time, rows of one prompt (a group) together so that they share its encoding."""
    ordered = sorted(rows, key=lambda row: (len(row.prompt_ids), row.prompt_ids, len(row.completion_ids)))
    return [ordered[start:start + size] for start in range(0, len(ordered), size)]


def row_logprobs(model: Any, rows: Sequence[TrainingRow], pad_id: int, temperature: float, chunk_size: int) -> Any:
    """The current policy's log-probability of every completion token of ``rows`` (row-major, flat).

    Each distinct prompt runs through the model once (the rows of a group share it, as they did when they
    were sampled); its key/value cache is then copied to its rows, which run their completions on it. With
    4 rollouts of a 50-token prompt and 16-token completions that is about half the tokens of encoding every
    row whole, gradients included (they flow back through the copies).
    """
    import torch  # deferred: heavy, loaded when a job runs
    from transformers import DynamicCache

    body, head, softcap = causal_lm_parts(model)
    device = model.device
    distinct: dict[tuple[int, ...], int] = {}
    for row in rows:
        distinct.setdefault(tuple(row.prompt_ids), len(distinct))
    rows_prompt = torch.tensor([distinct[tuple(row.prompt_ids)] for row in rows], dtype=torch.long, device=device)
    prompt_ids, prompt_mask = (tensor.to(device) for tensor in left_padded(list(distinct), pad_id))
    cache = DynamicCache(config=model.config)
    prompt_hidden = body(input_ids=prompt_ids, attention_mask=prompt_mask, cache=cache, use_cache=True,
                         position_ids=(prompt_mask.cumsum(-1) - 1).clamp(min=0)).last_hidden_state[:, -1]
    cache.batch_select_indices(rows_prompt)
    width = max(len(row.completion_ids) for row in rows)
    completion_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        completion_ids[index, :len(row.completion_ids)] = torch.tensor(row.completion_ids)
        completion_mask[index, :len(row.completion_ids)] = 1
    completion_ids, completion_mask = completion_ids.to(device), completion_mask.to(device)
    starts = prompt_mask.sum(-1)[rows_prompt]
    hidden = body(input_ids=completion_ids, attention_mask=torch.cat([prompt_mask[rows_prompt], completion_mask], -1),
                  position_ids=starts[:, None] + torch.arange(width, device=device)[None], cache=cache,
                  use_cache=True).last_hidden_state
    # token 1 is predicted at the prompt's last position, token j+1 at completion position j
    selected = torch.cat([torch.cat([prompt_hidden[rows_prompt[index]][None], hidden[index, :len(row.completion_ids) - 1]])
                          for index, row in enumerate(rows)])
    targets = torch.tensor([token for row in rows for token in row.completion_ids], dtype=torch.long, device=device)
    return chunked_token_logprobs(head, softcap, selected, targets, temperature, chunk_size)


def reference_logprobs(model: Any, batches: list[list[TrainingRow]], pad_id: int, temperature: float,
                       chunk_size: int) -> list[Any]:
    """Per micro-batch, the base model's log-probabilities (adapter off), for the KL penalty."""
    import torch  # deferred: heavy, loaded when a job runs

    with torch.no_grad(), model.disable_adapter():
        return [row_logprobs(model, batch, pad_id, temperature, chunk_size) for batch in batches]


def grpo_update(model: Any, optimizer: Any, scheduler: Any, rows: Sequence[TrainingRow], settings: RLSettings,
                pad_id: int) -> dict[str, Any]:
    """``updates_per_batch`` optimiser steps on ``rows``; returns the loss, KL, clipped share and timing."""
    import torch  # deferred: heavy, loaded when a job runs

    started = time.perf_counter()
    batches = micro_batches(rows, settings.micro_batch_size)
    total_tokens = sum(len(row.completion_ids) for row in rows)
    references = (reference_logprobs(model, batches, pad_id, settings.temperature, settings.loss_chunk_size)
                  if settings.beta > 0 else [None] * len(batches))
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    model.train()
    losses, kls, clipped, mismatch, grad_norm, lr = [], [], 0, 0.0, 0.0, scheduler.get_last_lr()[0]
    for update in range(settings.updates_per_batch):
        loss_sum, kl_sum = 0.0, 0.0
        for batch, reference in zip(batches, references):
            logprobs = row_logprobs(model, batch, pad_id, settings.temperature, settings.loss_chunk_size)
            sampled = torch.tensor([value for row in batch for value in row.logprobs], dtype=torch.float32,
                                   device=logprobs.device)
            advantage = torch.tensor([row.advantage for row in batch for _ in row.completion_ids], dtype=torch.float32,
                                     device=logprobs.device)
            ratio = torch.exp(logprobs - sampled)
            bounded = torch.clamp(ratio, 1 - settings.clip, 1 + settings.clip)
            per_token = -torch.minimum(ratio * advantage, bounded * advantage)
            if reference is not None:
                gap = reference - logprobs
                kl = torch.exp(gap) - gap - 1
                per_token = per_token + settings.beta * kl
                kl_sum += float(kl.detach().sum())
            loss = per_token.sum() / total_tokens
            loss.backward()
            loss_sum += float(loss.detach())
            if update == 0:
                mismatch = max(mismatch, float((logprobs.detach() - sampled).abs().max()))
            clipped += int(((ratio.detach() - bounded.detach()).abs() > 0).sum())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(parameters, settings.max_grad_norm or math.inf))
        lr = scheduler.get_last_lr()[0]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss_sum)
        kls.append(kl_sum / total_tokens)
    model.eval()
    return {"loss": losses[-1], "kl": kls[-1] if settings.beta > 0 else None, "grad_norm": grad_norm, "lr": lr,
            "clip_fraction": clipped / (total_tokens * settings.updates_per_batch),
            "logprob_mismatch": mismatch, "trained_tokens": total_tokens, "update_s": time.perf_counter() - started}
