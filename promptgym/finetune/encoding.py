"""Conversations to token ids and labels, with the loss on assistant turns only (or on everything).

    encoded = encode_conversation(tokenizer, messages, train_on="assistant")
    encoded.input_ids, encoded.labels      # labels are -100 wherever no loss is taken

The model's own chat template renders the conversation. Assistant turns are found by rendering
prefixes of the conversation (the text up to a turn's start, with the generation prompt, and the
text through its end): no ``{% generation %}`` markers are needed, which our models' templates lack.
A token is trained on when it starts inside an assistant turn (its content and end-of-turn token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

IGNORE_INDEX = -100
TrainOn = Literal["assistant", "all"]


class ChatTemplateError(ValueError):
    """The tokenizer has no chat template, or one whose renderings of a conversation's prefixes don't line up."""


@dataclass(frozen=True)
class EncodedConversation:
    input_ids: list[int]
    labels: list[int]

    @property
    def trained_tokens(self) -> int:
        return sum(1 for label in self.labels if label != IGNORE_INDEX)


def _render(tokenizer: Any, messages: Sequence[dict[str, str]], generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)


def assistant_spans(tokenizer: Any, messages: Sequence[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant turns."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError("the base model's tokenizer has no chat template: chat rows can't be rendered")
    text = _render(tokenizer, messages)
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:index], generation_prompt=True)
        through = _render(tokenizer, messages[: index + 1])
        if not (text.startswith(through) and through.startswith(before)):
            raise ChatTemplateError(
                "the chat template renders a conversation's prefixes differently from the whole conversation, "
                "so assistant turns can't be located; use train_on = \"all\"")
        spans.append((len(before), len(through.rstrip())))
    return text, spans


def encode_conversation(tokenizer: Any, messages: Sequence[dict[str, str]], train_on: TrainOn = "assistant") -> EncodedConversation:
    """Token ids of the rendered conversation, labels on the assistant turns (``train_on="assistant"``) or on all."""
    text, spans = assistant_spans(tokenizer, messages)
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    input_ids = list(encoding["input_ids"])
    if train_on == "all":
        return EncodedConversation(input_ids, list(input_ids))
    labels = [IGNORE_INDEX] * len(input_ids)
    for position, (start, _end) in enumerate(encoding["offset_mapping"]):
        if any(low <= start < high for low, high in spans):
            labels[position] = input_ids[position]
    return EncodedConversation(input_ids, labels)


def prompt_messages(messages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """The conversation up to (not including) its last assistant turn: what a model is asked to continue."""
    last = max(index for index, message in enumerate(messages) if message["role"] == "assistant")
    return list(messages[:last])
