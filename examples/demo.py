"""The main job (`make demo`): train a program on the embedded model, before/after.

Task: read a date written in everyday English and answer it as DD.MM.YYYY.
The output field only says "the date mentioned in the text", so the untrained
0.5B model picks its own format; RandomFewShot finds demonstrations that
teach the convention.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import promptgym as synalinks
from promptgym.datasets import dates

OUTPUT = Path("output/demo")
MODEL = "local/qwen2.5-coder-0.5b-instruct"


async def main() -> None:
    started = time.perf_counter()
    (x_train, y_train), (x_test, y_test) = dates.load_data(n_train=40, n_test=30, seed=0, output_format="%d.%m.%Y")
    lm = synalinks.LanguageModel(model=MODEL, max_tokens=48)

    inputs = synalinks.Input(data_model=dates.Text)
    outputs = await synalinks.Generator(data_model=dates.Date, language_model=lm, max_string_length=40)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="date_reader")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["date"]),
        optimizer=synalinks.optimizers.RandomFewShot(nb_min_examples=1, nb_max_examples=3),
        metrics=[synalinks.metrics.F1Score(in_mask=["date"])],
    )
    program.summary()

    print(f"\nUntrained program on {len(x_test)} test sentences:")
    before = await program.evaluate(x=x_test, y=y_test, batch_size=32)

    print(f"\nTraining on {len(x_train)} sentences (the last 25% for validation):")
    checkpoint = synalinks.callbacks.ProgramCheckpoint(OUTPUT / "best.json", monitor="val_reward", mode="max",
                                                       save_best_only=True)
    history = await program.fit(x=x_train, y=y_train, validation_split=0.25, epochs=2, batch_size=10,
                                minibatch_size=8, callbacks=[checkpoint], seed=0)

    print(f"\nTrained program on the same {len(x_test)} test sentences:")
    after = await program.evaluate(x=x_test, y=y_test, batch_size=32)
    program.save(OUTPUT / "program.json")
    plot = synalinks.utils.plot_metrics_comparison_with_mean_and_std(
        {"before_training": [before], "after_training": [after]}, to_folder=OUTPUT, title="Date reader: before/after"
    )
    synalinks.utils.plot_history(history, to_folder=OUTPUT)

    usage = lm.usage.total()
    examples = program.trainable_variables[0].get("examples")
    print("\n" + "=" * 72)
    low, high = (f"{bound:.0%}" for bound in (after.interval().low, after.interval().high))
    print(f"exact match on test: {before['reward']:.0%} before -> {after['reward']:.0%} after training "
          f"(95% CI {low}-{high} on {after.n} sentences)")
    print(f"paired test, after vs before: {after.compare(before)}")
    print(f"token F1 on test:    {before['f1_score']:.2f} before -> {after['f1_score']:.2f} after")
    print(f"LM calls: {usage.calls} ({usage.cache_hits} from cache), "
          f"{usage.prompt_tokens + usage.completion_tokens} tokens, {time.perf_counter() - started:.0f} s")
    print(f"learned demonstrations ({len(examples)}):")
    for example in examples:
        print(f"  {example['inputs']['text']!r} -> {example['outputs']['date']!r}")
    print(f"saved program: {OUTPUT / 'program.json'}  (best by val_reward: {OUTPUT / 'best.json'})")
    print(f"before/after plot: {plot}")


if __name__ == "__main__":
    asyncio.run(main())
