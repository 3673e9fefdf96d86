"""KNNFewShot: demonstrations retrieved per input instead of one fixed set.

Each Generator gets a pool of demonstrations and, at every call, shows the
``k`` of them whose inputs are nearest (cosine, on ``embedding_model``) to
the input it is answering (see :mod:`promptgym.modules.retrieval`). The pool
is built the way the other few-shot optimizers build theirs:

- a Generator that reads the program's input and writes its output gets
  every labelled training example, before any call (``use_labels=True``):
  training then costs no program run, only one embedding call for the pool;
- other Generators get the steps of training runs that earned at least
  ``min_reward`` (each step runs the program on the training batch).

    program.compile(reward=ExactMatch(), optimizer=KNNFewShot(k=3))
    await program.fit(x_train, y_train, epochs=1)
    await program.predict(x_test)        # each input with its own 3 nearest demonstrations

The retrieval (pool, its vectors, ``k``, the embedding model) is part of the
program: ``save()`` keeps it, ``load()`` needs no embedding call for the pool,
``summary()`` shows it. Fixed ``examples`` the program already had stay, in
front of the retrieved ones. Instruction optimizers keep the retrieval when
they rewrite instructions, so the two compose (see README, "KNNFewShot").
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.defaults import get_default_embedding_model
from promptgym.lm.embedding_model import DEFAULT_EMBEDDING_MODEL, EmbeddingModel
from promptgym.modules.retrieval import example_text, retrieval_state
from promptgym.optimizers.base import Candidate, FitSizes, StageEstimate
from promptgym.optimizers.few_shot import FewShotOptimizer
from promptgym.optimizers.kit import OptimizerContext, trainable_prompts
from promptgym.optimizers.selection import race_on_validation


def embedding_model_from(value: EmbeddingModel | str | dict[str, Any] | None) -> EmbeddingModel:
    """An EmbeddingModel from an instance, a model string, a saved config, or the default (else the embedded one)."""
    if isinstance(value, EmbeddingModel):
        return value
    if isinstance(value, str):
        return EmbeddingModel(model=value)
    if isinstance(value, dict):
        return deserialize_object(value, expected="embedding model")
    try:
        return get_default_embedding_model("KNNFewShot")
    except Exception:  # noqa: BLE001 - no default set: the embedded model needs no configuration
        return EmbeddingModel(model=DEFAULT_EMBEDDING_MODEL)


@register_builtin
class KNNFewShot(FewShotOptimizer):
    """Show each input its ``k`` nearest demonstrations from the training pool.

    Args:
        k: demonstrations retrieved per call.
        embedding_model: an EmbeddingModel or model string (default:
            ``set_default_embedding_model``'s, else ``local/multilingual-e5-small``).
        min_reward: a training run must earn at least this for its steps to join the pool.
        use_labels: labelled training examples are demonstrations of a Generator
            that reads the program's input and writes its output (no run needed).
        max_metric_calls: cap on the training runs made to collect traces.
        seed: accepted for symmetry with the other optimizers (nothing is sampled).
    """

    def __init__(self, k: int = 3, embedding_model: EmbeddingModel | str | None = None, min_reward: float = 0.5,
                 use_labels: bool = True, max_metric_calls: int | None = None, seed: int | None = None) -> None:
        if k < 1:
            raise ValueError(f"KNNFewShot: k must be >= 1, got {k}")
        super().__init__(nb_min_examples=0, nb_max_examples=k, min_reward=min_reward, use_labels=use_labels,
                         max_metric_calls=max_metric_calls, seed=seed)
        self.k = k
        self.embedding_model = embedding_model_from(embedding_model)

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        """Collect traces for the Generators that need them (none when labels serve); the race is at epoch end."""
        if self.demos.needs_traces(self.prompts) and not self.budget.exhausted:
            shown = self.shown(self.best)
            unseen = self.affordable(ctx, "train", [i for i in batch if i not in shown], self.best)
            results = await self.score(ctx, self.best, "train", unseen)
            self.demos.pool.add(results)
        return {"metric_calls": self.metric_calls, "demo_pool": self.demos.pool.size()}

    async def on_epoch_end(self, ctx: OptimizerContext, epoch: int) -> None:
        if not isinstance(ctx, OptimizerContext):  # synalinks' variable form (optimizers.variable_population)
            return await super().on_epoch_end(ctx, epoch)
        """Race the retrieval (and a fixed set of ``k`` pool demonstrations) against the incumbent on validation.

        The better of the two replaces the incumbent only when it is strictly ahead on every validation
        example; without validation data the retrieval is kept unchecked (``fit()`` warns about that).
        """
        retrieval = await self.retrieval_candidate()
        if retrieval is not None and retrieval.id != self.best_id:
            if ctx.rollouts.size("val") == 0:
                await self.accept(ctx, retrieval, reason=f"{self.k} nearest of a pool ({self.pool_sizes(retrieval)}); "
                                                         "unchecked: no validation data")
            else:
                await race_on_validation(self, ctx, [retrieval, self.fixed_candidate(ctx)],
                                         describe=lambda c: f"{c.origin} ({self.k} demonstrations) candidate {c.id}: ")
        await super().on_epoch_end(ctx, epoch)

    def pool_sizes(self, candidate: Candidate) -> str:
        return ", ".join(f"{len(candidate.variables[state.variable]['retrieval']['pool'])} for {state.module_name}"
                         for state in self.prompts if candidate.variables[state.variable].get("retrieval"))

    def fixed_candidate(self, ctx: OptimizerContext) -> Candidate | None:
        """The incumbent showing ``k`` pool demonstrations drawn once (seeded), the same for every input."""
        rng = self.start_rng(ctx)
        variables = {name: dict(value) for name, value in self.best.variables.items()}
        for state in self.prompts:
            demos = sorted(self.demos.pool.for_module(state.module_name), key=lambda demo: demo.index)
            if not demos:
                continue
            picks = sorted(rng.choice(len(demos), size=min(self.k, len(demos)), replace=False).tolist())
            variables[state.variable]["examples"] = [*variables[state.variable].get("examples", []),
                                                     *(demos[i].as_example() for i in picks)]
        if variables == self.best.variables:
            return None
        return self.find(variables) or self.add_candidate(variables, parent=self.best.id, origin="fixed_few_shot")

    async def retrieval_candidate(self) -> Candidate | None:
        """The incumbent with each Generator's pool as its retrieval (None when no pool changed)."""
        base = self.best.variables
        variables = {name: dict(value) for name, value in base.items()}
        for state in self.prompts:
            demos = sorted(self.demos.pool.for_module(state.module_name), key=lambda demo: demo.index)
            if not demos:
                continue
            pool = [demo.as_example() for demo in demos]
            vectors = await self.embedding_model([example_text(example["inputs"]) for example in pool])
            variables[state.variable]["retrieval"] = retrieval_state(pool, vectors, self.k, self.embedding_model)
        if variables == base:
            return None
        return self.find(variables) or self.add_candidate(variables, parent=self.best.id, origin="knn_few_shot")

    def propose(self, ctx: OptimizerContext) -> Candidate | None:
        return None

    def estimate(self, program: Any, sizes: FitSizes) -> list[StageEstimate]:
        """Beyond training: the retrieval and a fixed set on every validation example, each epoch. Training runs:
        none when labels serve every Generator; otherwise each training example once an epoch (within budget)."""
        runs = sizes.epochs * sizes.train
        if self.use_labels and all(state.answer_fields for state in trainable_prompts(program)):
            runs = 0
        elif self.budget.limit is not None:
            runs = min(runs, self.budget.limit)
        return [StageEstimate(type(self).__name__, lm_calls=2 * sizes.val * sizes.epochs, training_runs=runs)]

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        for key in ("nb_min_examples", "nb_max_examples", "acceptance", "sampling", "sampling_temperature",
                    "population_size", "name", "description"):
            config.pop(key)
        return {**config, "k": self.k, "embedding_model": serialize_object(self.embedding_model)}
