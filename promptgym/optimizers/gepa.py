"""GEPA: reflective prompt evolution with a Pareto pool (Agrawal et al., arXiv 2507.19457).

Each iteration:

1. pick a parent from the pool, with probability proportional to the number
   of validation examples on which it is best (after dropping dominated ones);
2. run it on a training minibatch with traces (inputs, outputs, score,
   feedback of every Generator step);
3. the reflection model reads them and rewrites one component of the parent
   (round-robin over the Generators' instructions, and their examples when
   ``optimize_examples=True``);
4. the child runs on the same minibatch; only if its total is strictly higher
   is it scored on the whole validation set and added to the pool.

With ``use_merge=True``, after a child joins the pool GEPA also tries to merge
two pool candidates that share an ancestor (each component from the side that
changed it).

Budget: ``max_metric_calls`` is the number of scored rollouts (one program run
on one example, then its reward), minibatch and validation alike. Only new
evaluations count: a (candidate, example) pair the trainer already ran is
memoised and costs no model call, so it costs no budget either. An iteration
starts only if its worst case (parent minibatch + child minibatch + full
validation) fits in what is left, so the run never exceeds the budget.

Pacing under ``fit()``: GEPA draws its own minibatches
(``reflection_minibatch_size`` examples, reshuffled on each pass over the
training split); the trainer's steps only pace the search. Each
``train_step`` spends an equal share of the remaining budget over the steps
left in the epoch, so ``fit(epochs=1, batch_size=any)`` spends the whole
budget; later epochs continue only while budget remains.

    program.compile(reward=ExactMatch(), optimizer=GEPA(max_metric_calls=150,
                    reflection_language_model=LanguageModel("local/qwen2.5-coder-1.5b-instruct")))
    await program.fit(x_train, y_train, validation_data=(x_val, y_val), epochs=1, batch_size=4)
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from promptgym.core.events import (
    BudgetPlan,
    CandidateAdded,
    CandidateProposed,
    CandidateRejected,
    ReflectionSkipped,
    SearchEnd,
)
from promptgym.core.serialization import register_builtin
from promptgym.datasets.traces import input_key, open_trace_store
from promptgym.modules.generator import as_json
from promptgym.optimizers import pareto
from promptgym.optimizers.base import Candidate
from promptgym.optimizers.demo_pool import DemoSampler
from promptgym.optimizers.kit import Budget, OptimizerContext
from promptgym.optimizers.proposals import (
    PromptSearchOptimizer,
    as_text,
    output_strings,
    text_schema,
)
from promptgym.rollouts import ExampleResult

logger = logging.getLogger("promptgym")

REFLECTION_PROMPT = """I gave an assistant the following instructions to perform a task:
```
{instructions}
```

Here are task inputs the assistant received, its responses, and feedback on each response:
```
{examples}
```

Write new, improved instructions for the assistant. Read the inputs carefully and work out the input
format and the task in detail. Read the feedback on every response: where an answer was wrong, state
the rule or the domain fact that would have given the expected answer. Keep what worked. Write
instructions that are general (they must work for new inputs), not a list of these particular answers.
Answer only with the new instructions."""

MAX_IDLE_ITERATIONS = 3
"""Iterations in a row that spend no budget (proposal rejected, parent runs memoised) end a step."""


def component_key(variable: str, field: str) -> str:
    return f"{variable}:{field}"


def components_of(names: list[str], variables: dict[str, Any], optimize_examples: bool) -> list[str]:
    """The evolvable parts of the prompts held by variables ``names``: instructions, and examples if asked."""
    keys = []
    for name in names:
        keys.append(component_key(name, "instructions"))
        if optimize_examples and "examples" in variables[name]:
            keys.append(component_key(name, "examples"))
    return keys


def flatten(variables: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    flat = {}
    for key in keys:
        name, field = key.rsplit(":", 1)
        flat[key] = variables[name][field]
    return flat


def with_component(variables: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    result = copy.deepcopy(variables)
    name, field = key.rsplit(":", 1)
    result[name][field] = copy.deepcopy(value)
    return result


@register_builtin
class GEPA(PromptSearchOptimizer):
    """Reflective prompt evolution with Pareto-front parent selection.

    Args:
        reflection_language_model: the model that reads traces and rewrites
            instructions; default: ``set_default_language_model``'s, else the
            program's (first Generator's) model. A stronger model than the
            task model helps most (see MODELS.md).
        max_metric_calls: budget in scored rollouts (minibatches and
            validation; memoised re-scores are free). The run never exceeds it.
        reflection_minibatch_size: training examples per reflective minibatch.
        candidate_selection: ``"pareto"`` (GEPA) or ``"best"`` (always the
            highest validation mean).
        optimize_examples: also evolve each Generator's few-shot examples
            (from a pool of well-scored training runs; no LM call).
        max_examples: examples per Generator when ``optimize_examples``.
        use_merge / max_merge_invocations: GEPA's merge of two pool
            candidates that share an ancestor.
        skip_perfect_score / perfect_score: don't reflect on a minibatch the
            parent already solves perfectly.
        min_instruction_length / max_instruction_length: bounds on proposals
            (``maxLength`` in the reflection schema; shorter ones are rejected).
        reflection_temperature: sampling temperature of reflection calls
            (default: the model's own).
        comments: a trace store (the folder of ``serve --record``): what reviewers wrote about a served
            answer reaches the reflection beside the feedback of the example with the same input.
        seed: fixes parent sampling and minibatches (default: from the trainer's seed).
    """

    model_argument = "reflection_language_model"

    def __init__(self, reflection_language_model: Any = None, max_metric_calls: int = 150,
                 reflection_minibatch_size: int = 3, candidate_selection: str = "pareto",
                 optimize_examples: bool = False, max_examples: int = 3, use_merge: bool = False,
                 max_merge_invocations: int = 5, skip_perfect_score: bool = True, perfect_score: float = 1.0,
                 min_instruction_length: int = 20, max_instruction_length: int = 1000,
                 reflection_temperature: float | None = None, comments: str | None = None,
                 seed: int | None = None) -> None:
        if max_metric_calls < 1:
            raise ValueError(f"max_metric_calls must be >= 1, got {max_metric_calls}")
        super().__init__(seed=seed, budget=Budget(int(max_metric_calls), unit="rollouts"))
        if reflection_minibatch_size < 1:
            raise ValueError(f"reflection_minibatch_size must be >= 1, got {reflection_minibatch_size}")
        if candidate_selection not in ("pareto", "best"):
            raise ValueError(f"candidate_selection must be 'pareto' or 'best', got {candidate_selection!r}")
        if not 1 <= min_instruction_length < max_instruction_length:
            raise ValueError("need 1 <= min_instruction_length < max_instruction_length")
        self.reflection_language_model = reflection_language_model
        self.reflection_minibatch_size = int(reflection_minibatch_size)
        self.candidate_selection = candidate_selection
        self.optimize_examples = optimize_examples
        self.max_examples = max_examples
        self.use_merge = use_merge
        self.max_merge_invocations = max_merge_invocations
        self.skip_perfect_score = skip_perfect_score
        self.perfect_score = perfect_score
        self.min_instruction_length = min_instruction_length
        self.max_instruction_length = max_instruction_length
        self.reflection_temperature = reflection_temperature
        self.comments = comments
        self._comments: dict[tuple[str, int], list[str]] = {}
        # search state (saved by get_extra_state)
        self.pool: list[int] = []
        self.next_component: dict[int, int] = {}
        self.iterations = 0
        self.merges_due = 0
        self.merges_done = 0
        self.exhausted = False
        self.demos = DemoSampler(max_examples, max_examples, min_reward=0.5)
        self._order: list[int] = []
        self._position = 0
        self._reflection_lm: Any = None
        self.val_split = "val"
        self.planned_proposals = 0

    # -- lifecycle ------------------------------------------------------------------------

    def build(self, program: Any) -> None:
        super().build(program)
        self._reflection_lm = self.resolve_language_model(self.reflection_language_model, "GEPA's reflection")

    @property
    def max_metric_calls(self) -> int:
        return int(self.budget.limit or 0)

    @property
    def metric_calls(self) -> int:
        """Scored rollouts spent so far (the budget's unit)."""
        return int(self.budget.spent)

    def validation_indices(self, ctx: OptimizerContext) -> tuple[str, list[int]]:
        split = ctx.rollouts.validation_split()
        return split, list(range(ctx.rollouts.size(split)))

    async def on_train_begin(self, ctx: OptimizerContext) -> None:
        self.start_rng(ctx)
        if self.comments is not None:
            self._comments = reviewer_comments(self.comments, ctx)
        if self.optimize_examples:  # labelled examples of the Generators that answer directly: no call needed
            self.demos.seed(ctx.rollouts, self.prompts)
        split, val = self.validation_indices(ctx)
        self.val_split = split
        self.exhausted = False
        self._plan(ctx, len(val))
        await ctx.emit(BudgetPlan(optimizer="GEPA", unit="rollouts", limit=self.max_metric_calls, used=self.metric_calls,
                                  minibatch_size=self.reflection_minibatch_size, validation_size=len(val)))
        seed = self.candidates[0]
        if not self.pool:
            if not self.budget.affordable(len(ctx.rollouts.pending(split, val, seed.variables))):
                logger.warning("GEPA: max_metric_calls=%d cannot even score the starting program on the %d "
                               "validation examples; nothing to do", self.max_metric_calls, len(val))
                self.exhausted = True
                return
            await self.score(ctx, seed, split, val)
            self.pool.append(seed.id)
            self.next_component.setdefault(seed.id, 0)
            self.best_id = seed.id

    def _plan(self, ctx: OptimizerContext, validation_size: int) -> None:
        """Log how many proposals the budget buys, and warn when it is fewer than 3."""
        b = min(self.reflection_minibatch_size, ctx.rollouts.size("train"))
        left = int(self.budget.remaining) - (0 if self.pool else validation_size)
        typical = max(0, left // max(1, 2 * b))
        worst = max(0, left // max(1, 2 * b + validation_size))
        logger.info("GEPA: max_metric_calls=%d (%d used) buys about %d proposals (%d if every one were accepted "
                    "and validated on %d examples); each proposal costs %d minibatch rollouts",
                    self.max_metric_calls, self.metric_calls, typical, worst, validation_size, 2 * b)
        if typical < 3:
            logger.warning("GEPA: max_metric_calls=%d buys only %d proposal(s); raise it to at least %d for "
                           "3 proposals", self.max_metric_calls, typical,
                           self.metric_calls + (0 if self.pool else validation_size) + 3 * 2 * b)
        self.planned_proposals = typical

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        share = self.share(ctx)
        if self.budget.exhausted:
            self.exhausted = True
        start, idle = self.metric_calls, 0
        while not self.exhausted and self.metric_calls - start < share and idle < MAX_IDLE_ITERATIONS:
            before = self.metric_calls
            await self.iteration(ctx)
            idle = idle + 1 if self.metric_calls == before else 0
        return {"metric_calls": float(self.metric_calls), "pool_size": float(len(self.pool)),
                "best_val_reward": float(self.val_mean(self.best) or 0.0)}

    async def on_train_end(self, ctx: OptimizerContext) -> None:
        await ctx.emit(SearchEnd(optimizer="GEPA", unit="rollouts", used=self.metric_calls, limit=self.max_metric_calls,
                                 iterations=self.iterations, candidates=len(self.candidates), best=self.best_id,
                                 pool=list(self.pool)))

    # -- one iteration --------------------------------------------------------------------

    async def iteration(self, ctx: OptimizerContext) -> None:
        """One merge attempt (when due) or one reflective mutation."""
        if not self.pool:
            self.exhausted = True
            return
        self.iterations += 1
        if self.use_merge and self.merges_due > 0 and self.merges_done < self.max_merge_invocations:
            self.merges_due -= 1
            if await self.merge(ctx):
                return
        await self.reflective_mutation(ctx)

    def pool_table(self, split: str) -> dict[int, dict[str, float]]:
        return {cid: dict(self.get_candidate(cid).scores.get(split, {})) for cid in self.pool}

    def select_parent(self, ctx: OptimizerContext) -> Candidate:
        split, _ = self.validation_indices(ctx)
        table = self.pool_table(split)
        if self.candidate_selection == "best":
            return self.get_candidate(pareto.select_best(table))
        assert self._rng is not None
        return self.get_candidate(pareto.select_parent(table, self._rng))

    def next_minibatch(self, ctx: OptimizerContext) -> list[int]:
        """The next ``reflection_minibatch_size`` training examples of a shuffled pass (reshuffled per pass)."""
        assert self._rng is not None
        size = ctx.rollouts.size("train")
        count = min(self.reflection_minibatch_size, size)
        if len(self._order) != size or self._position + count > size:
            self._order = self._rng.permutation(size).tolist()
            self._position = 0
        batch = self._order[self._position:self._position + count]
        self._position += count
        return sorted(batch)

    async def reflective_mutation(self, ctx: OptimizerContext) -> None:
        split, val = self.validation_indices(ctx)
        parent = self.select_parent(ctx)
        keys = components_of(self.generators, parent.variables, self.optimize_examples)
        if not keys:
            self.exhausted = True
            logger.warning("GEPA: the program has no trainable Generator instructions; nothing to evolve")
            return
        position = self.next_component.get(parent.id, 0)
        key = keys[position % len(keys)]
        self.next_component[parent.id] = position + 1
        minibatch = self.next_minibatch(ctx)
        worst_case = len(ctx.rollouts.pending("train", minibatch, parent.variables)) + len(minibatch) + len(val)
        if not self.budget.affordable(worst_case):
            self.exhausted = True
            logger.info("GEPA: stopping with %d of %d metric calls left (an iteration may cost %d)",
                        self.budget.remaining, self.max_metric_calls, worst_case)
            return
        parent_results = await self.score(ctx, parent, "train", minibatch)
        self.demos.learn(ctx.rollouts, parent_results)
        if self.skip_perfect_score and all(r.reward >= self.perfect_score for r in parent_results):
            await ctx.emit(ReflectionSkipped(candidate=parent.id, reason="perfect minibatch"))
            return
        proposed = await self.propose(ctx, parent, key, parent_results)
        if proposed is None:
            return
        variables, origin = proposed
        child = self.add_candidate(variables, parent=parent.id, origin=origin)
        self.next_component[child.id] = position + 1
        await ctx.emit(CandidateProposed(candidate=child.id, parent=parent.id, origin=origin, component=key))
        child_results = await self.score(ctx, child, "train", minibatch)
        self.demos.pool.add(child_results)
        parent_total = sum(r.reward for r in parent_results)
        child_total = sum(r.reward for r in child_results)
        if not pareto.is_improvement([r.reward for r in child_results], [r.reward for r in parent_results]):
            await ctx.emit(CandidateRejected(candidate=child.id, parent=parent.id,
                                             reason=f"minibatch {child_total:.3f} <= parent {parent_total:.3f}"))
            return
        await self.add_to_pool(ctx, child, split, val, reason=f"minibatch {child_total:.3f} > {parent_total:.3f}")

    async def add_to_pool(self, ctx: OptimizerContext, child: Candidate, split: str, val: list[int], reason: str) -> None:
        await self.score(ctx, child, split, val)
        self.pool.append(child.id)
        self.merges_due += 1 if self.use_merge else 0
        score = self.val_mean(child)
        await ctx.emit(CandidateAdded(candidate=child.id, parent=child.parent, reason=reason, val_reward=score))
        table = self.pool_table(split)
        best = pareto.select_best(table)
        if best != self.best_id:
            await self.accept(ctx, self.get_candidate(best), reason=f"validation mean {score:.3f} ({reason})")

    def val_mean(self, candidate: Candidate) -> float | None:
        """Mean validation reward of a pool candidate (None outside the pool)."""
        if candidate.id not in self.pool:
            return None
        return candidate.mean(self.val_split)

    # -- proposals ------------------------------------------------------------------------

    async def propose(self, ctx: OptimizerContext, parent: Candidate, key: str,
                      results: list[ExampleResult]) -> tuple[dict[str, Any], str] | None:
        name, field = key.rsplit(":", 1)
        if field == "examples":
            return await self.propose_examples(ctx, parent, name)
        current = parent.variables[name]["instructions"]
        records = self.reflective_records(name, results)
        messages = [{"role": "user", "content": REFLECTION_PROMPT.format(instructions=current, examples=records)}]
        schema = text_schema("new_instructions", "The improved instructions", self.min_instruction_length,
                             self.max_instruction_length)
        answer = await self.ask(ctx, self._reflection_lm, messages, schema, f"reflection on {name}",
                                temperature=self.reflection_temperature)
        if answer is None:
            return None
        labels = output_strings([step.outputs for r in results for step in r.trace.steps]
                                + [ctx.rollouts.target_json("train", r.index) for r in results])

        def known(text: str) -> str | None:
            return None if self.find(with_component(parent.variables, key, text)) is None else "same as a known candidate"

        text = await self.accept_instructions(ctx, answer.get("new_instructions"), current, labels,
                                              f"instructions for {name}", known)
        return None if text is None else (with_component(parent.variables, key, text), "reflection")

    async def propose_examples(self, ctx: OptimizerContext, parent: Candidate, name: str
                               ) -> tuple[dict[str, Any], str] | None:
        assert self._rng is not None
        chosen = self.demos.draw(self.module_of(name), self._rng, count=self.max_examples)
        variables = with_component(parent.variables, component_key(name, "examples"), chosen)
        if not chosen or chosen == parent.variables[name].get("examples") or self.find(variables) is not None:
            await self.reject(ctx, f"examples for {name}", "no new demonstrations in the pool")
            return None
        return variables, "examples"

    def reflective_records(self, variable_name: str, results: list[ExampleResult]) -> str:
        """What the reflection model reads: per example, the module's inputs, outputs, score and feedback."""
        module = self.module_of(variable_name)
        blocks = []
        for number, result in enumerate(results, 1):
            steps = result.trace.for_module(module)
            lines = [f"# Example {number}"]
            if steps:
                lines.append(f"Inputs: {as_text(steps[-1].inputs)}")
                lines.append(f"Response: {as_text(steps[-1].outputs)}")
            else:
                lines.append(f"Response: none ({as_text(result.error or 'the module did not run', 300)})")
            lines.append(f"Score: {result.reward:.2f}")
            lines.append(f"Feedback: {as_text(result.feedback or ('correct' if result.reward >= self.perfect_score else 'incorrect'), 400)}")
            lines.extend(f"A reviewer of this answer in production wrote: {as_text(comment, 400)}"
                         for comment in self._comments.get((result.split, result.index), []))
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    # -- merge ----------------------------------------------------------------------------

    async def merge(self, ctx: OptimizerContext) -> bool:
        """Try to merge two non-dominated pool candidates sharing an ancestor; True if it spent budget."""
        assert self._rng is not None
        split, val = self.validation_indices(ctx)
        table = self.pool_table(split)
        front = sorted(pareto.nondominated(pareto.best_sets(table), table))
        parents = {c.id: c.parent for c in self.candidates}
        pairs = [(a, b, anc) for i, a in enumerate(front) for b in front[i + 1:]
                 if (anc := pareto.common_ancestor(parents, a, b)) is not None]
        self._rng.shuffle(pairs)
        keys = components_of(self.generators, self.best.variables, optimize_examples=True)  # merge whatever differs
        means = pareto.aggregate(table)
        for a, b, anc in pairs:
            ca, cb, c0 = (self.get_candidate(cid) for cid in (a, b, anc))
            merged = pareto.merge_components(flatten(c0.variables, keys), flatten(ca.variables, keys),
                                             flatten(cb.variables, keys), means[a], means[b])
            if merged is None:
                continue
            variables = copy.deepcopy(ca.variables)
            for key, value in merged.items():
                variables = with_component(variables, key, value)
            if self.find(variables) is not None:
                continue
            subsample = sorted(self._rng.choice(val, size=min(self.reflection_minibatch_size, len(val)),
                                                replace=False).tolist())
            if not self.budget.affordable(len(val)):
                self.exhausted = True
                return False
            self.merges_done += 1
            child = self.add_candidate(variables, parent=a, origin=f"merge:{a}+{b}")
            await ctx.emit(CandidateProposed(candidate=child.id, parent=a, origin=child.origin))
            results = await self.score(ctx, child, split, subsample)
            mine = sum(r.reward for r in results)
            theirs = max(sum(ca.scores[split][str(i)] for i in subsample), sum(cb.scores[split][str(i)] for i in subsample))
            if mine >= theirs:
                await self.add_to_pool(ctx, child, split, val, reason=f"merge {mine:.3f} >= {theirs:.3f}")
            else:
                await ctx.emit(CandidateRejected(candidate=child.id, parent=a, reason=f"merge {mine:.3f} < {theirs:.3f}"))
            return True
        return False

    # -- state ----------------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(),
                "max_metric_calls": self.max_metric_calls,
                "reflection_minibatch_size": self.reflection_minibatch_size,
                "candidate_selection": self.candidate_selection, "optimize_examples": self.optimize_examples,
                "max_examples": self.max_examples, "use_merge": self.use_merge,
                "max_merge_invocations": self.max_merge_invocations,
                "skip_perfect_score": self.skip_perfect_score, "perfect_score": self.perfect_score,
                "min_instruction_length": self.min_instruction_length,
                "max_instruction_length": self.max_instruction_length,
                "reflection_temperature": self.reflection_temperature, "comments": self.comments}

    def get_extra_state(self) -> dict[str, Any]:
        return {**super().get_extra_state(), "metric_calls": self.metric_calls, "pool": list(self.pool),
                "next_component": {str(k): v for k, v in self.next_component.items()},
                "iterations": self.iterations, "merges_due": self.merges_due, "merges_done": self.merges_done,
                "demos": self.demos.pool.get_state(), "order": list(self._order), "position": self._position}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.budget.spent = int(state.get("metric_calls", 0))
        self.pool = [int(cid) for cid in state.get("pool", [])]
        self.next_component = {int(k): int(v) for k, v in state.get("next_component", {}).items()}
        self.iterations = int(state.get("iterations", 0))
        self.merges_due = int(state.get("merges_due", 0))
        self.merges_done = int(state.get("merges_done", 0))
        self.demos.pool.set_state(state.get("demos", {}))
        self._order = [int(i) for i in state.get("order", [])]
        self._position = int(state.get("position", 0))
        self.exhausted = False


def reviewer_comments(traces: str, ctx: OptimizerContext) -> dict[tuple[str, int], list[str]]:
    """The comments of the trace store ``traces``, by (split, index) of the examples whose input they were on."""
    by_input: dict[str, list[str]] = {}
    for trace in open_trace_store(traces).traces(program=ctx.rollouts.program.name):
        if trace.comments:
            by_input.setdefault(input_key(trace.inputs), []).extend(trace.comments)
    found: dict[tuple[str, int], list[str]] = {}
    for split in ("train", "val"):
        for index, x in enumerate(ctx.rollouts.inputs(split) if ctx.rollouts.size(split) else []):
            comments = by_input.get(input_key(as_json(x)))
            if comments:
                found[(split, index)] = comments
    return found
