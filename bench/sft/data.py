"""The data of the SFT benchmarks: the dates task (DD.MM.YYYY) as the program's own chat messages.

    rows = date_rows(x, y)            # [{"messages": [system, user, assistant]}, ...]
    program = date_program("local/smollm2-135m-instruct")

A row is exactly what the dates program's Generator sends with no demonstrations (its system prompt,
then the input JSON) and the label as the answer, so a model tuned on these rows is then used by the
same program, zero-shot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import promptgym as pg
from promptgym.datasets import dates

DATE_FORMAT = "%d.%m.%Y"


def load_dates(n_train: int = 160, n_test: int = 60, seed: int = 0) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    return dates.load_data(n_train=n_train, n_test=n_test, seed=seed, output_format=DATE_FORMAT)


def date_program(model: str, examples: list[Any] | None = None) -> pg.Program:
    """The dates program of `make demo`: one Generator, Text -> Date."""
    lm = pg.LanguageModel(model=model, max_tokens=48)
    generator = pg.Generator(data_model=dates.Date, language_model=lm, max_string_length=40, name="date_reader",
                             examples=examples)
    program = pg.Sequential([pg.Input(data_model=dates.Text), generator], name="date_reader_program")
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["date"]))
    return program


def date_rows(x: Any, y: Any) -> list[dict[str, Any]]:
    generator = date_program("local/smollm2-135m-instruct").get_module("date_reader")
    rows = []
    for inputs, target in zip(x, y):
        messages = generator.messages(inputs.model_dump(mode="json"), [])
        rows.append({"messages": [*messages, {"role": "assistant", "content": json.dumps(target.model_dump(mode="json"))}]})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


if __name__ == "__main__":
    # python bench/sft/data.py examples/configs/data   ->  dates_dmy_sft_{train,validation}.jsonl
    import sys

    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    (x_train, y_train), (x_val, y_val) = load_dates(n_train=160, n_test=40, seed=0)
    print(write_jsonl(folder / "dates_dmy_sft_train.jsonl", date_rows(x_train, y_train)))
    print(write_jsonl(folder / "dates_dmy_sft_validation.jsonl", date_rows(x_val, y_val)))
