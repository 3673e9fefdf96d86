"""Answers of the base model and the tuned one to the same prompts, for the run's summary.

    samples = sample_answers(model, tokenizer, [row.messages for row in rows[:3]])
    samples[0]   # {"prompt": "...", "expected": "...", "base": "...", "tuned": "..."}

LoRA starts as the identity, so the base model's answers are the peft model's with its adapter
switched off; no second model is loaded.
"""

from __future__ import annotations

from typing import Any, Sequence

from promptgym.finetune.encoding import prompt_messages


def _generate(model: Any, tokenizer: Any, messages: list[dict[str, str]], max_new_tokens: int) -> str:
    import torch  # deferred: heavy, loaded when a job runs

    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    input_ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]], device=model.device)
    with torch.no_grad():
        output = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                                max_new_tokens=max_new_tokens, use_cache=True, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(output[0, input_ids.shape[1]:], skip_special_tokens=True).strip()


def sample_answers(model: Any, tokenizer: Any, conversations: Sequence[Sequence[dict[str, str]]],
                   max_new_tokens: int = 64) -> list[dict[str, str]]:
    """Greedy answers to each conversation's last prompt, from the base (adapter off) and the tuned model."""
    was_training = model.training
    model.eval()
    samples = []
    try:
        for messages in conversations:
            prompt = prompt_messages(messages)
            expected = next(m["content"] for m in reversed(messages) if m["role"] == "assistant")
            with model.disable_adapter():
                base = _generate(model, tokenizer, prompt, max_new_tokens)
            tuned = _generate(model, tokenizer, prompt, max_new_tokens)
            samples.append({"prompt": prompt[-1]["content"], "expected": expected, "base": base, "tuned": tuned})
    finally:
        model.train(was_training)
    return samples
