"""The rows of an SFT job: read, checked, split, encoded; every problem reported with its file and line.

    data = prepare_sft_data(settings, tokenizer)
    data.train, data.validation      # lists of EncodedConversation
    data.skipped                     # problems of rows left out (only with skip_invalid_rows = true)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from promptgym.finetune.chat_data import ChatDataError, ChatRow, DataProblem, read_chat_jsonl
from promptgym.finetune.encoding import ChatTemplateError, EncodedConversation, encode_conversation
from promptgym.finetune.settings import SFTSettings


@dataclass
class SFTData:
    train: list[EncodedConversation]
    validation: list[EncodedConversation]
    train_rows: list[ChatRow]
    validation_rows: list[ChatRow]
    skipped: list[DataProblem] = field(default_factory=list)
    validation_source: str = "none"

    @property
    def train_tokens(self) -> int:
        return sum(len(row.input_ids) for row in self.train)


def split_rows(rows: list[ChatRow], fraction: float) -> tuple[list[ChatRow], list[ChatRow]]:
    """The last ``fraction`` of the rows (at least one, if any) are held out for validation."""
    if fraction <= 0 or len(rows) < 2:
        return rows, []
    held = min(len(rows) - 1, max(1, math.floor(len(rows) * fraction)))
    return rows[:-held], rows[-held:]


def _encode(rows: list[ChatRow], tokenizer: Any, settings: SFTSettings) -> tuple[list[EncodedConversation], list[ChatRow], list[DataProblem]]:
    encoded, kept, problems = [], [], []
    for row in rows:
        try:
            item = encode_conversation(tokenizer, row.messages, settings.train_on)
        except ChatTemplateError:
            raise
        except Exception as error:  # noqa: BLE001 - a template error on one row is that row's problem
            problems.append(DataProblem(row.file, row.line, f"can't render with the chat template: {error}"))
            continue
        if len(item.input_ids) > settings.max_length:
            cut = len(item.input_ids) - settings.max_length
            problems.append(DataProblem(row.file, row.line, f"{len(item.input_ids)} tokens, longer than max_length "
                                                            f"{settings.max_length}: {cut} token(s) would be cut"))
            continue
        if item.trained_tokens == 0:
            problems.append(DataProblem(row.file, row.line, "no token to train on after rendering"))
            continue
        encoded.append(item)
        kept.append(row)
    return encoded, kept, problems


def prepare_sft_data(settings: SFTSettings, tokenizer: Any) -> SFTData:
    """Read and check every row before any training; raise ChatDataError unless ``skip_invalid_rows``."""
    train_rows, problems = read_chat_jsonl(settings.train_file, limit=settings.examples)
    if settings.validation_file:
        validation_rows, validation_problems = read_chat_jsonl(settings.validation_file)
        problems += validation_problems
        source = settings.validation_file
    else:
        train_rows, validation_rows = split_rows(train_rows, settings.validation_split)
        source = f"last {len(validation_rows)} row(s) of train_file" if validation_rows else "none"
    train, train_rows, train_problems = _encode(train_rows, tokenizer, settings)
    validation, validation_rows, validation_problems = _encode(validation_rows, tokenizer, settings)
    problems += train_problems + validation_problems
    problems.sort(key=lambda problem: (problem.file, problem.line))
    if problems and not settings.skip_invalid_rows:
        raise ChatDataError(problems, hint=f"{len(problems)} invalid row(s); fix them, or set skip_invalid_rows = true "
                                           "to train without them")
    if not train:
        raise ChatDataError(problems or [DataProblem(settings.train_file, 0, "no training rows")],
                            hint="nothing left to train on")
    return SFTData(train, validation, train_rows, validation_rows, skipped=problems, validation_source=source)
