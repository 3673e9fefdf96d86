"""OMEGA end to end on the embedded engine: SmolLM2-135M for the task and the optimizer, e5-small for DNS."""

from typing import Literal

import numpy as np
import pytest

import promptgym as pg
from promptgym.optimizers.guard_rails import instruction_problem

pytestmark = pytest.mark.integration


class Review(pg.DataModel):
    review: str = pg.Field(description="A short product review")


class Sentiment(pg.DataModel):
    label: Literal["positive", "negative"] = pg.Field(description="The sentiment of the review")


REVIEWS = [
    ("I love it, works perfectly.", "positive"),
    ("Broke after one day, a waste of money.", "negative"),
    ("Great quality and fast delivery.", "positive"),
    ("Terrible, it stopped working and support never answered.", "negative"),
    ("Absolutely wonderful, I would buy it again.", "positive"),
    ("Awful smell and the screen cracked.", "negative"),
]


async def test_omega_on_the_embedded_models():
    lm = pg.LanguageModel(model="local/smollm2-135m-instruct")
    # Same engine for the optimizer, with a tighter budget per mutation (the machine has 2 cores).
    optimizer_lm = pg.LanguageModel(model="local/smollm2-135m-instruct", max_tokens=256, output_retries=0)
    em = pg.EmbeddingModel(model="local/multilingual-e5-small")
    inputs = pg.Input(data_model=Review)
    outputs = await pg.Generator(data_model=Sentiment, language_model=lm, name="classify")(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="sentiment")
    optimizer = pg.optimizers.OMEGA(language_model=optimizer_lm, embedding_model=em, few_shot_learning=True,
                                    nb_max_examples=2, population_size=3, max_instruction_length=300)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x = np.array([Review(review=text) for text, _ in REVIEWS], dtype=object)
    y = np.array([Sentiment(label=label) for _, label in REVIEWS], dtype=object)
    x_val, y_val = x[4:], y[4:]
    before = (await program.evaluate(x_val, y_val, verbose=0))["reward"]
    history = await program.fit(x[:4], y[:4], validation_data=(x_val, y_val), epochs=1, batch_size=2,
                                minibatch_size=2, verbose=0)

    # Acceptance is paired on the whole validation set (minibatch = 2 = all of it): never worse.
    assert history.history["val_reward"][-1] >= before
    assert optimizer.fitness(optimizer.best) >= optimizer.fitness(optimizer.get_candidate(0))
    # The real model was asked to mutate, and its calls are counted in the optimizer phase.
    assert sum(history.history["lm_calls_optimizer"]) >= 2
    # Whatever it wrote, nothing degenerate became a candidate.
    for candidate in optimizer.candidates:
        if candidate.origin in ("grounded", "mutation", "crossover"):
            parent = optimizer.get_candidate(candidate.parent)
            text = candidate.variables["classify/state"]["instructions"]
            assert len(text) <= 300
            assert instruction_problem(text, parent=parent.variables["classify/state"]["instructions"],
                                       labels={"positive", "negative"}, max_length=300) is None
    # DNS ran on e5 embeddings: one vector per surviving candidate, scores are cosine distances or 1.0.
    assert optimizer.best_id in optimizer.population and 1 <= len(optimizer.population) <= 3
    assert set(optimizer.population) <= set(optimizer._embeddings) or len(optimizer.population) == 1
    assert all(0.0 <= score <= 1.0 for score in optimizer.dns_scores.values())
