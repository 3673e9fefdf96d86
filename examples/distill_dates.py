"""Distil a prompt-optimised program into weights, on a CPU.

Task: read a date in everyday English and answer it as DD.MM.YYYY (the dates dataset). SmolLM2-135M
gets it wrong zero-shot; with a few well-chosen demonstrations (RandomFewShot) it does better. Here the
demonstrated program teaches the model itself:

1. optimise the program's demonstrations with RandomFewShot (prompt learning);
2. ``program.export_sft_data``: run it on the training sentences and keep, as chat rows, the messages its
   Generator sends (without the demonstrations) and the answers that earned the reward;
3. fine-tune SmolLM2 on those rows (LoRA, ``promptgym.finetune.sft``), exported to GGUF;
4. run the same program with its demonstrations removed, on the fine-tuned model.

    .venv/bin/python examples/distill_dates.py          # about 5 minutes on 2 cores
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import promptgym as pg
from promptgym.datasets import dates
from promptgym.finetune import SFTSettings, sft

BASE = "local/smollm2-135m-instruct"
OUTPUT = Path("output/distill_dates")


def date_program(model: str) -> pg.Program:
    lm = pg.LanguageModel(model=model, max_tokens=48)
    generator = pg.Generator(data_model=dates.Date, language_model=lm, max_string_length=40, name="date_reader")
    return pg.Sequential([pg.Input(data_model=dates.Text), generator], name="date_reader_program")


async def main() -> None:
    (x_train, y_train), (x_test, y_test) = dates.load_data(n_train=160, n_test=60, seed=0, output_format="%d.%m.%Y")
    reward = pg.rewards.ExactMatch(in_mask=["date"])

    program = date_program(BASE)
    program.compile(reward=reward, optimizer=pg.optimizers.RandomFewShot(nb_min_examples=1, nb_max_examples=3))
    zero_shot = await program.evaluate(x_test, y_test, verbose=0)
    started = time.perf_counter()
    await program.fit(x=x_train[:40], y=y_train[:40], validation_split=0.25, epochs=2, batch_size=10,
                      minibatch_size=8, seed=0, verbose=0)
    with_demos = await program.evaluate(x_test, y_test, verbose=0)
    print(f"prompt learning: {time.perf_counter() - started:.0f} s, "
          f"{len(program.get_module('date_reader').examples)} demonstrations")

    report = await program.export_sft_data(x_train, y_train, str(OUTPUT / "distilled.jsonl"), min_reward=1.0)
    print(f"export: {report}")

    started = time.perf_counter()
    result = sft(SFTSettings(base_model=BASE, train_file=str(OUTPUT / "distilled.jsonl"), n_epochs=2,
                             learning_rate=2e-4, validation_split=0.1), OUTPUT / "sft", name="distill-dates")
    print(f"fine-tuning: {time.perf_counter() - started:.0f} s, {result.steps} steps, eval loss "
          f"{result.initial_eval_loss:.3f} -> {result.final_eval_loss:.3f}; model {result.model_id}")

    student = date_program(result.model_id)  # the same program, no demonstrations, on the tuned model
    student.compile(reward=reward)
    distilled = await student.evaluate(x_test, y_test, verbose=0)

    print("\nexact match on", len(x_test), "test sentences (DD.MM.YYYY):")
    print(f"  {BASE} zero-shot:                 {zero_shot['reward']:.0%}")
    print(f"  same model + learned demonstrations: {with_demos['reward']:.0%}")
    print(f"  distilled model, no demonstrations:  {distilled['reward']:.0%}")
    print(f"summary of the fine-tuning run: {OUTPUT / 'sft' / 'summary.md'}")


if __name__ == "__main__":
    asyncio.run(main())
