"""OMEGA: OptiMizEr as Genetic Algorithm, with Dominated Novelty Search.

Every training batch, OMEGA picks a parent from its population (softmax over
fitness by default), runs it on the batch, and breeds one child:

- **mutation** (most of the time): a trainable variable is drawn with
  probability proportional to ``exp(-its average reward)``; a ChainOfThought
  step reads the batch (inputs, predictions, ground truth, rewards, reward
  feedback) and writes a new value constrained to the variable's schema (for
  a Generator, new ``instructions``; with ``few_shot_learning=True`` it also
  gets demonstrations sampled from the demo pool);
- **crossover** (probability ``merging_rate * epoch``): the same step merges
  the variable of two good candidates;
- **grounded rewrite** (``grounded_start``, promptgym's addition): while a
  Generator still has its starting instructions, its first mutation reads
  labelled training examples and describes the task and its output format,
  instead of fixing failures of instructions that say nothing about the task.

A child that is degenerate (empty, a copy or rewording, a label, too long,
repetitive, prose about the fix) is rejected before it costs a validation
call, and a few-shot proposal takes its place. The child is scored against the incumbent on the same validation
minibatch and becomes the best only when it does strictly better. At each
epoch end the population competes (Dominated Novelty Search, or plain GA).

The parts, each usable alone: :mod:`~promptgym.optimizers.omega_population` (the population, parent
selection, the DNS / GA competition and candidate distances), :mod:`~promptgym.optimizers.omega_breeding`
(which variable to change, the LM request that writes a child, its guard rails, its demonstrations) and
:mod:`~promptgym.optimizers.omega_prompts` (the prompts). This class wires them into an optimizer.

    optimizer = OMEGA(language_model=lm, embedding_model=em, few_shot_learning=True)
    program.compile(reward=ExactMatch(), optimizer=optimizer)
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any, Callable

import numpy as np

from promptgym.core.events import ProposalFailed, ProposalRejected
from promptgym.core.serialization import register_builtin, serialize_object, with_objects
from promptgym.lm.defaults import get_default_embedding_model, get_default_language_model
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.usage import lm_phase
from promptgym.optimizers import racing
from promptgym.optimizers.base import Candidate
from promptgym.optimizers.demo_pool import DemoSampler, FewShotArguments
from promptgym.optimizers.dns import ALGORITHMS, compete_candidate_dicts, crossover_probability
from promptgym.optimizers.evolutionary import EvolutionaryOptimizer
from promptgym.optimizers.guard_rails import cut_repetition
from promptgym.optimizers.kit import Budget, OptimizerContext
from promptgym.optimizers.omega_breeding import ChildWriter, VariableCredit, crossover_examples, sample_examples
from promptgym.optimizers.omega_population import CandidateDistances, DistanceFunction, Population
from promptgym.optimizers.omega_prompts import (
    LABEL_LENGTH,
    candidate_text,
    mutable_schema,
    shorten,
    step_request,
    string_leaves,
)
from promptgym.optimizers.variable_population import STATE_FIELDS
from promptgym.rewards.base import to_json
from promptgym.rollouts import ExampleResult

logger = logging.getLogger("promptgym")

__all__ = ["OMEGA", "DistanceFunction", "candidate_text", "mutable_schema"]  # the last two: old import path

GROUNDED_ATTEMPTS = 2
"""Grounded rewrites tried per Generator while its instructions are still the starting ones."""
COUNTERS = {"mutation": "mutations", "grounded": "grounded", "crossover": "crossovers"}
"""The ``stats`` counter of each kind of LM-written child."""


def _resolve_model(model: Any, cls: type, default: Callable[[str], Any], needed_by: str) -> Any:
    if model is None:
        return default(needed_by)
    if isinstance(model, str):
        return cls(model=model)
    return model


def check_arguments(k_nearest_fitter: Any, algorithm: str, max_instruction_length: int, max_evidence: int,
                    distance_function: Any) -> None:
    """OMEGA's own arguments (the evolution's are checked by :class:`EvolutionaryOptimizer`)."""
    if not isinstance(k_nearest_fitter, int) or k_nearest_fitter < 1:
        raise ValueError(f"OMEGA: k_nearest_fitter must be an integer >= 1, got {k_nearest_fitter!r}")
    if str(algorithm).lower() not in ALGORITHMS:
        raise ValueError(f"OMEGA: unknown algorithm {algorithm!r}; expected one of {', '.join(map(repr, ALGORITHMS))}")
    if max_instruction_length < 40:
        raise ValueError(f"OMEGA: max_instruction_length must be >= 40 characters, got {max_instruction_length}")
    if max_evidence < 1:
        raise ValueError(f"OMEGA: max_evidence must be >= 1, got {max_evidence}")
    if distance_function is not None and not callable(distance_function):
        raise ValueError("OMEGA: distance_function must be an async function f(c1, c2, embedding_model=None, **kwargs)")


class _Kept:
    """An OMEGA attribute that one of its parts keeps (``OMEGA.population`` is ``OMEGA.pool.ids``)."""

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, owner: Any, cls: type | None = None) -> Any:
        return self if owner is None else getattr(getattr(owner, self.part), self.name)

    def __set__(self, owner: Any, value: Any) -> None:
        setattr(getattr(owner, self.part), self.name, value)


@register_builtin
class OMEGA(FewShotArguments, EvolutionaryOptimizer):
    """Evolve instructions (and demonstrations) with mutation, crossover and Dominated Novelty Search.

    Args:
        language_model: writes mutations and crossovers (default: ``set_default_language_model``'s).
        embedding_model: describes candidates for DNS distances (default:
            ``set_default_embedding_model``'s; not needed with ``algorithm="ga"``
            or a custom ``distance_function``).
        k_nearest_fitter: how many nearest fitter candidates a DNS score averages.
        distance_function: ``async f(c1, c2, embedding_model=None, **kwargs) -> float``
            on two candidates' variables; default: cosine distance of embeddings.
        mutation_temperature / crossover_temperature: sampling temperature of the LM steps.
        selection_temperature: softmax temperature of parent selection.
        sampling_temperature: softmax temperature (over reward) of demonstration sampling.
        few_shot_learning: also give mutated Generators demonstrations from the pool.
        nb_min_examples / nb_max_examples: how many demonstrations per Generator.
        merging_rate: crossover probability per epoch (``merging_rate * epoch``).
        population_size: how many candidates survive each epoch's competition.
        algorithm: ``"dns"`` (competition) or ``"ga"`` (keep the fittest).
        selection: ``"softmax"``, ``"best"`` or ``"random"`` parent selection.
        instructions: task-specific guidance for the mutation and crossover steps.
        max_instruction_length: bound (characters) on every text the LM writes
            (``max_instructions_length`` is its old spelling, accepted for one release).
        max_evidence: how many examples of each batch the parent runs on and
            the LM sees (failures first).
        fallback_few_shot: when a mutation fails or is rejected, propose new
            demonstrations instead (even with ``few_shot_learning=False``).
        grounded_start: while a Generator still has its starting instructions,
            its first mutations (up to two) describe the task from labelled
            training examples instead of fixing the batch's failures, and keep
            the parent's demonstrations (one change at a time).
        min_reward / use_labels / max_metric_calls / seed: as for
            :class:`RandomFewShot` (the budget counts program runs, not the
            optimizer's own mutation and crossover calls).
    """

    population = _Kept("pool", "ids")
    dns_scores = _Kept("pool", "scores")
    algorithm = _Kept("pool", "algorithm")
    k_nearest_fitter = _Kept("pool", "k_nearest_fitter")
    embedding_model = _Kept("distances", "embedding_model")
    distance_function = _Kept("distances", "distance_function")
    _embeddings = _Kept("distances", "embeddings")
    variable_rewards = _Kept("credit", "rewards")
    instructions = _Kept("writer", "instructions")
    max_instruction_length = _Kept("writer", "max_instruction_length")
    max_evidence = _Kept("writer", "max_evidence")

    def __init__(
        self,
        language_model: LanguageModel | str | None = None,
        embedding_model: EmbeddingModel | str | None = None,
        k_nearest_fitter: int = 5,
        distance_function: DistanceFunction | None = None,
        mutation_temperature: float = 0.3,
        crossover_temperature: float = 0.3,
        selection_temperature: float = 0.3,
        sampling_temperature: float = 0.3,
        few_shot_learning: bool = False,
        nb_min_examples: int = 1,
        nb_max_examples: int = 3,
        merging_rate: float = 0.02,
        population_size: int = 10,
        algorithm: str = "dns",
        selection: str = "softmax",
        instructions: str | None = None,
        max_instruction_length: int = 800,
        max_evidence: int = 6,
        fallback_few_shot: bool = True,
        grounded_start: bool = True,
        min_reward: float = 0.5,
        use_labels: bool = True,
        max_metric_calls: int | None = None,
        seed: int | None = None,
        max_instructions_length: int | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if max_instructions_length is not None:
            warnings.warn("OMEGA(max_instructions_length=...) is deprecated: use max_instruction_length",
                          DeprecationWarning, stacklevel=2)
            max_instruction_length = max_instructions_length
        if max_metric_calls is not None and max_metric_calls < 1:
            raise ValueError(f"max_metric_calls must be >= 1 or None, got {max_metric_calls}")
        super().__init__(language_model=None, mutation_temperature=mutation_temperature,
                         crossover_temperature=crossover_temperature, selection=selection,
                         selection_temperature=selection_temperature, merging_rate=merging_rate,
                         population_size=population_size, sampling_temperature=sampling_temperature, name=name,
                         description=description, seed=seed, budget=Budget(max_metric_calls, unit="rollouts"))
        self.demos = DemoSampler(nb_min_examples, nb_max_examples, min_reward, use_labels)
        self.few_shot_learning = few_shot_learning
        check_arguments(k_nearest_fitter, algorithm, max_instruction_length, max_evidence, distance_function)
        # Models given by name are built now; missing ones come from the defaults when training starts (build),
        # so OMEGA() can be made before set_default_language_model().
        self.language_model = LanguageModel(model=language_model) if isinstance(language_model, str) else language_model
        self.distances = CandidateDistances(EmbeddingModel(model=embedding_model) if isinstance(embedding_model, str)
                                            else embedding_model, distance_function)
        self.pool = Population(self.distances, k_nearest_fitter, str(algorithm).lower())
        self.credit = VariableCredit()
        self.writer = ChildWriter(instructions or "", max_instruction_length, max_evidence)
        self.fallback_few_shot = fallback_few_shot
        self.grounded_start = grounded_start
        self.grounded_attempts: dict[str, int] = {}
        self.mutation_programs: dict[str, Any] = {}
        """The variable-level hooks' mutation writers, by variable schema (see rewrite_program)."""
        self.crossover_programs: dict[str, Any] = {}
        self.stats = {"mutations": 0, "crossovers": 0, "few_shot": 0, "grounded": 0, "rejected": 0,
                      "lm_failures": 0}
        self._fitness_split = "val"

    # -- lifecycle ------------------------------------------------------------------------

    def resolve_models(self) -> None:
        """The default models, for those not given (the error says which call to make)."""
        if self.language_model is None:
            self.language_model = _resolve_model(None, LanguageModel, get_default_language_model,
                                                 "OMEGA (its mutation and crossover steps)")
        if self.embedding_model is None:
            if self.algorithm == "ga" or self.distance_function is not None:
                # Only the default cosine distance of DNS needs embeddings; use the default model if one is set.
                try:
                    self.embedding_model = get_default_embedding_model("OMEGA")
                except ValueError:
                    self.embedding_model = None
            else:
                self.embedding_model = _resolve_model(None, EmbeddingModel, get_default_embedding_model,
                                                      "OMEGA (the distances of Dominated Novelty Search)")

    async def competition(self, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Dominated Novelty Search over candidate dicts (each with a ``reward``): the ones that survive.

        Without an embedding model (or when embedding fails) the fittest ``population_size`` survive.
        """
        return await compete_candidate_dicts(candidates, self.embedding_model, self.k_nearest_fitter,
                                             self.population_size)

    # -- synalinks' variable-level hooks (optimizers.variable_population) ----------------------

    async def survivors(self, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A variable's surviving candidates at an epoch's end: DNS (``algorithm="dns"``) or the fittest."""
        if self.algorithm == "dns":
            return await self.competition(candidates)
        return await super().survivors(candidates)

    def rewrite_program(self, operation: str, trainable_variable: Any) -> Any:
        """The program that writes ``trainable_variable``'s mutation or crossover, kept per variable schema in
        ``mutation_programs`` / ``crossover_programs`` (one may be replaced there). synalinks keys them by
        ``id(schema)``; here ``get_schema()`` returns a copy, so the key is the schema's JSON text."""
        programs = self.mutation_programs if operation == "mutation" else self.crossover_programs
        key = json.dumps(trainable_variable.get_schema(), sort_keys=True)
        if key not in programs:
            programs[key] = RewriteProgram(self, operation)
        return programs[key]

    async def mutate_candidate(self, step: int, trainable_variable: Any, selected_candidate: dict[str, Any] | None,
                               x: Any = None, y: Any = None, y_pred: Any = None, training: bool = False) -> Any:
        """A mutation of ``selected_candidate`` written by the language model; None (with a warning) when the call
        fails, so the variable keeps its value."""
        inputs = self.rewrite_inputs(trainable_variable, x, y, y_pred, current_variable=selected_candidate)
        return await self.run_rewrite("mutation", step, trainable_variable, inputs, training)

    async def merge_candidate(self, step: int, trainable_variable: Any, current_candidate: dict[str, Any] | None,
                              other_candidate: dict[str, Any] | None, x: Any = None, y: Any = None, y_pred: Any = None,
                              training: bool = False) -> Any:
        """A crossover of the two candidates written by the language model; None (with a warning) on failure."""
        inputs = self.rewrite_inputs(trainable_variable, x, y, y_pred, current_variable=current_candidate,
                                     other_variable=other_candidate)
        return await self.run_rewrite("crossover", step, trainable_variable, inputs, training)

    def rewrite_inputs(self, trainable_variable: Any, x: Any, y: Any, y_pred: Any, **variables: Any) -> dict[str, Any]:
        """What a mutation or crossover request shows: the program, the batch, the variable and its value(s)."""
        return {"program_description": getattr(self.program, "description", "") or "",
                "program_inputs": [json_of(item) for item in x or []],
                "program_predicted_outputs": [json_of(item) for item in y_pred or []],
                "program_ground_truth": [json_of(item) for item in y or []],
                "variable_description": getattr(trainable_variable, "description", "") or "",
                **{key: {k: v for k, v in (value or {}).items() if k not in STATE_FIELDS and k != "reward"}
                   for key, value in variables.items()}}

    async def run_rewrite(self, operation: str, step: int, trainable_variable: Any, inputs: dict[str, Any],
                          training: bool) -> Any:
        program = self.rewrite_program(operation, trainable_variable)
        try:
            return await program(inputs, training=training)
        except Exception as error:  # noqa: BLE001 - a failed LM call (timeout, rate limit) costs this step only
            warnings.warn(f"OMEGA {operation} at step {step} failed and was skipped (the variable keeps its value): "
                          f"{type(error).__name__}: {error}", stacklevel=3)
            return None

    def build(self, program: Any) -> None:
        self.resolve_models()
        first = not self.built
        super().build(program)
        self.writer.program_description = " ".join(filter(None, [getattr(program, "name", ""),
                                                                  getattr(program, "description", "")]))
        self.writer.variable_descriptions = {v.name: v.description for v in program.trainable_variables}
        if first:
            self.population = [self.best_id]  # type: ignore[list-item]

    async def on_train_begin(self, ctx: OptimizerContext) -> None:
        self.demos.seed(ctx.rollouts, self.prompts)  # labelled demonstrations for the Generators that answer directly
        self._fitness_split = ctx.rollouts.validation_split()
        self.writer.labels = {leaf for y in ctx.rollouts.targets("train") for leaf in string_leaves(to_json(y))
                              if len(leaf) <= LABEL_LENGTH}
        if self.best_id is not None and self.best_id not in self.population:
            self.population.append(self.best_id)

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        if self.budget.exhausted:
            return {"metric_calls": self.metric_calls, "population": len(self.population)}
        parent = self.select_parent(ctx.rng)
        shown = self.shown(parent)
        unseen = [i for i in batch if i not in shown][: self.max_evidence]  # no run nobody reads
        results = await self.score(ctx, parent, "train", self.affordable(ctx, "train", unseen, parent))
        self.demos.learn(ctx.rollouts, results)
        self.credit.credit(results, list(parent.variables), self.owners)
        child = await self.breed(ctx, parent, results)
        if child is None and self.fallback_few_shot:
            child = self.few_shot_child(ctx, parent)
        if child is not None:
            self.population.append(child.id)
            await self.compete(ctx, child)
        return {"metric_calls": self.metric_calls, "population": len(self.population)}

    async def on_epoch_end(self, ctx: OptimizerContext, epoch: int) -> None:
        if not isinstance(ctx, OptimizerContext):  # synalinks' variable form (optimizers.variable_population)
            return await super().on_epoch_end(ctx, epoch)
        await self.compete_population(ctx)
        await super().on_epoch_end(ctx, epoch)

    # -- population (omega_population) ----------------------------------------------------

    def fitness(self, candidate: Candidate) -> float:
        """Mean reward over the validation examples the candidate was scored on (train, then 0, when none)."""
        value = candidate.mean(self._fitness_split)
        if value is None:
            value = candidate.mean("train")
        return float(value) if value is not None else 0.0

    def members(self) -> list[Candidate]:
        return self.pool.members(self.get_candidate)

    def select_parent(self, rng: np.random.Generator, exclude: int | None = None) -> Candidate:
        members = [c for c in self.members() if c.id != exclude] or [self.best]
        return self.pool.select(members, self.fitness, self.selection, self.selection_temperature, rng)

    async def compete_population(self, ctx: OptimizerContext) -> None:
        """Dominated Novelty Search (or GA truncation) over the population; the best always survives."""
        await self.pool.compete(self.members(), self.fitness, self.best, self.population_size, ctx.emit)

    def choose_variable(self, names: list[str], rng: np.random.Generator) -> str:
        return self.credit.choose(names, rng)

    # -- breeding (omega_breeding) --------------------------------------------------------

    async def breed(self, ctx: OptimizerContext, parent: Candidate, results: list[ExampleResult]) -> Candidate | None:
        """A mutation or (with probability ``merging_rate * epoch``) a crossover child, or None."""
        mutable = [name for name, value in parent.variables.items() if self.writer.schema_for(value) is not None]
        if not mutable:
            return None
        ungrounded = [name for name in mutable if self.wants_grounding(parent, name)]
        if ungrounded:
            name = self.choose_variable(ungrounded, ctx.rng)
            self.grounded_attempts[name] = self.grounded_attempts.get(name, 0) + 1
            return await self.offspring(ctx, "grounded", parent, name, results)
        if ctx.rng.random() < crossover_probability(self.merging_rate, ctx.epoch):
            others = [c for c in self.members() if c.id != parent.id]
            if others:
                other = self.select_parent(ctx.rng, exclude=parent.id)
                differing = [n for n in mutable if other.variables.get(n) != parent.variables.get(n)]
                if differing:
                    name = self.choose_variable(differing, ctx.rng)
                    return await self.offspring(ctx, "crossover", parent, name, results, other)
        name = self.choose_variable(mutable, ctx.rng)
        return await self.offspring(ctx, "mutation", parent, name, results)

    def shown(self, candidate: Candidate) -> set[int]:
        """Training examples that ``candidate`` shows as demonstrations (scoring it on them would leak)."""
        return self.demos.shown(candidate.variables, self.prompts)

    async def compete(self, ctx: OptimizerContext, candidate: Candidate) -> bool:
        """Race ``candidate`` against the incumbent (:func:`racing.compete`); keep the better.

        Grounded instructions describe the task: left exactly level with the
        starting ones after held-out examples (a dead heat), they win it.
        """
        hidden = self.shown(candidate) | self.shown(self.best)
        return await racing.compete(self, ctx, candidate, hidden, wins_dead_heat=candidate.origin == "grounded")

    def wants_grounding(self, parent: Candidate, name: str) -> bool:
        """Whether ``name`` still holds its starting instructions and may get a grounded rewrite."""
        if not self.grounded_start or self.grounded_attempts.get(name, 0) >= GROUNDED_ATTEMPTS:
            return False
        value, start = parent.variables.get(name), self.candidates[0].variables.get(name)
        return isinstance(value, dict) and isinstance(start, dict) and "instructions" in value \
            and value["instructions"] == start.get("instructions")

    async def offspring(self, ctx: OptimizerContext, operation: str, parent: Candidate, name: str,
                        results: list[ExampleResult], other: Candidate | None = None) -> Candidate | None:
        """The child the LM writes by ``operation`` on ``name`` (None when the call fails or a guard rail refuses)."""
        value = parent.variables[name]
        fields = list(self.writer.schema_for(value)["properties"])  # type: ignore[index]
        try:
            messages, constrained, validation = self.writer.request(
                operation, name, value, results, ctx.rollouts, ctx.rng, self.credit.average(name),
                other.variables[name] if other is not None else None)
            temperature = self.crossover_temperature if operation == "crossover" else self.mutation_temperature
            with lm_phase("optimizer"):
                answer = await self.language_model(messages, schema=constrained, validation_schema=validation,
                                                   temperature=temperature)
        except Exception as error:  # a failed LM call costs this step only
            self.stats["lm_failures"] += 1
            logger.warning("OMEGA: %s of %s failed: %s: %s", operation, name, type(error).__name__, error)
            await ctx.emit(ProposalFailed(optimizer="OMEGA", what=f"{operation} of {name}",
                                          error=f"{type(error).__name__}: {error}", operation=operation,
                                          variable=name, parent=parent.id))
            return None
        new_fields = {key: cut_repetition(answer.get(key)) for key in fields}
        problem = self.writer.problem(name, value, new_fields, results, self.candidates)
        if problem is not None:
            return await self.rejected(ctx, operation, name, parent, problem,
                                       shorten(json.dumps(new_fields, ensure_ascii=False)))
        new_value = {**value, **new_fields}
        if self.few_shot_learning and "examples" in value and operation != "grounded":
            examples = crossover_examples(ctx.rng, value, other.variables[name], self.demos.nb_max_examples) \
                if other is not None else sample_examples(self.demos, self.owners[name], self.sampling_temperature,
                                                          ctx.rng)
            if examples:
                new_value["examples"] = examples
        variables = {**parent.variables, name: new_value}
        if self.find(variables) is not None:
            return await self.rejected(ctx, operation, name, parent, "copy of an earlier candidate")
        self.stats[COUNTERS[operation]] += 1
        return self.add_candidate(variables, parent=parent.id, origin=operation)

    async def rejected(self, ctx: OptimizerContext, operation: str, name: str, parent: Candidate, reason: str,
                       text: str | None = None) -> None:
        """Count and announce a child refused before its validation call."""
        self.stats["rejected"] += 1
        extra = {"text": text} if text is not None else {}
        await ctx.emit(ProposalRejected(optimizer="OMEGA", what=f"{operation} of {name}", reason=reason, **extra,
                                        operation=operation, variable=name, parent=parent.id))

    def few_shot_child(self, ctx: OptimizerContext, parent: Candidate) -> Candidate | None:
        """The fallback proposal: the parent with new demonstrations (None when the pool has nothing new)."""
        for _ in range(8):
            chosen = {state.variable: sample_examples(self.demos, state.module_name, self.sampling_temperature,
                                                      ctx.rng) for state in self.prompts}
            if not any(chosen.values()):
                return None
            variables = self.demos.with_examples(parent.variables, {n: e for n, e in chosen.items() if e})
            if self.find(variables) is None:
                self.stats["few_shot"] += 1
                return self.add_candidate(variables, parent=parent.id, origin="few_shot")
        return None

    # -- state and config -----------------------------------------------------------------

    def get_extra_state(self) -> dict[str, Any]:
        return {
            "pool": self.demos.pool.get_state(),
            "metric_calls": self.metric_calls,
            "population": list(self.population),
            "competition": {str(k): v for k, v in self.dns_scores.items()},
            "variable_rewards": {k: list(v) for k, v in self.variable_rewards.items()},
            "epoch": self.epochs_done,
            "stats": dict(self.stats),
            "grounded_attempts": dict(self.grounded_attempts),
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.demos.pool.set_state(state.get("pool", {}))
        self.budget.spent = int(state.get("metric_calls", 0))
        known = {c.id for c in self.candidates}
        self.population = [int(i) for i in state.get("population", []) if int(i) in known]
        if not self.population and self.best_id is not None:
            self.population = [self.best_id]
        self.dns_scores = {int(k): float(v) for k, v in state.get("competition", {}).items()}
        self.variable_rewards = {k: [float(x) for x in v] for k, v in state.get("variable_rewards", {}).items()}
        self.stats.update(state.get("stats", {}))
        self.grounded_attempts = {k: int(v) for k, v in state.get("grounded_attempts", {}).items()}
        self._embeddings = {}

    def get_config(self) -> dict[str, Any]:
        return {
            **self.naming_config(),
            "language_model": serialize_object(self.language_model) if self.language_model is not None else None,
            "embedding_model": serialize_object(self.embedding_model) if self.embedding_model is not None else None,
            "k_nearest_fitter": self.k_nearest_fitter,
            "distance_function": serialize_object(self.distance_function) if self.distance_function else None,
            "mutation_temperature": self.mutation_temperature,
            "crossover_temperature": self.crossover_temperature,
            "selection_temperature": self.selection_temperature,
            "sampling_temperature": self.sampling_temperature,
            "few_shot_learning": self.few_shot_learning,
            "merging_rate": self.merging_rate,
            "population_size": self.population_size,
            "algorithm": self.algorithm,
            "selection": self.selection,
            "instructions": self.instructions or None,
            "max_instruction_length": self.max_instruction_length,
            "max_evidence": self.max_evidence,
            "fallback_few_shot": self.fallback_few_shot,
            "grounded_start": self.grounded_start,
            "nb_min_examples": self.demos.nb_min_examples,
            "nb_max_examples": self.demos.nb_max_examples,
            "min_reward": self.demos.pool.min_reward,
            "use_labels": self.demos.use_labels,
            "max_metric_calls": self.budget.limit,
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "OMEGA":
        config = dict(config)
        if "max_instructions_length" in config:  # the spelling of files written before it was renamed
            config["max_instruction_length"] = config.pop("max_instructions_length")
        return cls(**with_objects(config, language_model="language model", embedding_model="embedding model",
                                  distance_function="distance function"))


def json_of(item: Any) -> Any:
    return item.get_json() if callable(getattr(item, "get_json", None)) else item


class RewriteProgram:
    """OMEGA's writer of a variable's new value for the variable-level hooks: ``await program(inputs)`` asks the
    language model (the request of :func:`~promptgym.optimizers.omega_prompts.step_request`) for new values of the
    current value's text fields, and returns the value with them."""

    def __init__(self, optimizer: OMEGA, operation: str) -> None:
        self.optimizer, self.operation = optimizer, operation

    async def __call__(self, inputs: dict[str, Any], training: bool = False) -> dict[str, Any] | None:
        current = inputs.get("current_variable") or {}
        schema = self.optimizer.writer.schema_for(current)
        if schema is None:  # nothing a model can rewrite (no text field)
            return None
        messages, constrained, validation = step_request(self.operation, schema, inputs, self.optimizer.instructions)
        optimizer = self.optimizer
        temperature = optimizer.crossover_temperature if self.operation == "crossover" else optimizer.mutation_temperature
        if optimizer.language_model is None:
            optimizer.resolve_models()
        with lm_phase("optimizer"):
            answer = await optimizer.language_model(messages, schema=constrained, validation_schema=validation,
                                                    temperature=temperature)
        return {**current, **{key: cut_repetition(answer.get(key)) for key in schema["properties"]}}
