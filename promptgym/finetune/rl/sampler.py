"""Batched sampling from a causal LM (on the CPU or a GPU), keeping the exact tokens drawn and their log-probabilities.

    samples = sample(model, [prompt_ids, prompt_ids, other_ids], max_new_tokens=[32, 32, 32], temperature=1.0,
                     stop_ids={eos_id}, pad_id=pad_id, generator=torch.Generator().manual_seed(0))
    samples[0].completion_ids, samples[0].logprobs, samples[0].finish_reason

Identical prompts (the rollouts of one seed) are encoded once: their key/value cache is computed for each
distinct prompt and then copied to every row that asked for it. Rows that finish leave the batch, so the
remaining ones decode faster. A row's log-probabilities are those of the distribution it was sampled from
(logits divided by the temperature), which is what the update compares the new policy with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

StopCheck = Callable[[int, list[int]], bool]
"""``(row, completion ids so far) -> True`` when the row must stop (a stop string appeared)."""


@dataclass
class Sample:
    """One completion: the prompt it continued, the tokens drawn, their log-probabilities, why it stopped."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "length"


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    import torch  # deferred: heavy, loaded when a job runs

    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        if prompt:
            input_ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask[row, width - len(prompt):] = 1
    return input_ids, attention_mask


def _draw(logits: Any, temperature: float, generator: Any) -> tuple[Any, Any]:
    """(tokens, their log-probabilities) for one step; temperature 0 is greedy (log-probabilities at T=1).

    ``generator`` is one generator for the batch, or a list with one per row (a row's draws then do not
    depend on which other rows share its batch).
    """
    import torch  # deferred: heavy, loaded when a job runs

    logits = logits.float()
    if temperature <= 0:
        logprobs = torch.log_softmax(logits, dim=-1)
        tokens = logprobs.argmax(dim=-1)
    else:
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
        probabilities = logprobs.exp()
        drawing = generator[0] if isinstance(generator, list) else generator
        if drawing is not None and drawing.device != probabilities.device:
            probabilities = probabilities.cpu()  # the generator's device draws, so that a seed means one sequence
        if isinstance(generator, list):
            tokens = torch.cat([torch.multinomial(probabilities[slot], 1, generator=row_generator)
                                for slot, row_generator in enumerate(generator)])
        else:
            tokens = torch.multinomial(probabilities, 1, generator=generator).squeeze(-1)
        tokens = tokens.to(logprobs.device)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def sample(model: Any, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float,
           stop_ids: set[int], pad_id: int, generator: Any = None, stopped: StopCheck | None = None) -> list[Sample]:
    """Continue every prompt until a stop token, ``stopped(row, ids)`` or its own token limit; one batch, one KV cache.

    ``generator``: one ``torch.Generator`` for the batch, or a list with one per prompt.
    """
    import torch  # deferred: heavy, loaded when a job runs
    from transformers import DynamicCache

    if not prompts:
        return []
    if any(not prompt for prompt in prompts):
        raise ValueError("every prompt needs at least one token")
    distinct: dict[tuple[int, ...], int] = {}
    for prompt in prompts:
        distinct.setdefault(tuple(prompt), len(distinct))
    device = model.device
    rows_prompt = torch.tensor([distinct[tuple(prompt)] for prompt in prompts], dtype=torch.long, device=device)
    input_ids, attention_mask = (tensor.to(device) for tensor in left_padded(list(distinct), pad_id))
    samples = [Sample(prompt_ids=list(prompt)) for prompt in prompts]
    limits = [max(0, int(limit)) for limit in max_new_tokens]
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        output = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       cache=cache, use_cache=True, logits_to_keep=1)
        logits = output.logits[:, -1, :][rows_prompt]
        cache.batch_select_indices(rows_prompt)
        attention_mask = attention_mask[rows_prompt]
        positions = attention_mask.sum(-1)
        active = [row for row in range(len(prompts)) if limits[row] > 0]
        if len(active) < len(prompts):
            keep = torch.tensor(active, dtype=torch.long, device=device)
            cache.batch_select_indices(keep)
            logits, attention_mask, positions = logits[keep], attention_mask[keep], positions[keep]
        while active:
            drawing = [generator[row] for row in active] if isinstance(generator, list) else generator
            tokens, logprobs = _draw(logits, temperature, drawing)
            drawn, drawn_logprobs = tokens.tolist(), logprobs.tolist()  # one device-to-host copy per step
            still = []
            for slot, row in enumerate(active):
                token = drawn[slot]
                samples[row].completion_ids.append(token)
                samples[row].logprobs.append(drawn_logprobs[slot])
                if token in stop_ids or (stopped is not None and stopped(row, samples[row].completion_ids)):
                    samples[row].finish_reason = "stop"
                elif len(samples[row].completion_ids) < limits[row]:
                    still.append(slot)
            if not still:
                break
            if len(still) < len(active):
                keep = torch.tensor(still, dtype=torch.long, device=device)
                cache.batch_select_indices(keep)
                tokens, attention_mask, positions = tokens[keep], attention_mask[keep], positions[keep]
                active = [active[slot] for slot in still]
            attention_mask = torch.cat([attention_mask, torch.ones((len(active), 1), dtype=torch.long, device=device)],
                                       dim=-1)
            output = model(input_ids=tokens[:, None], attention_mask=attention_mask, position_ids=positions[:, None],
                           cache=cache, use_cache=True)
            positions = positions + 1
            logits = output.logits[:, -1, :]
    return samples
