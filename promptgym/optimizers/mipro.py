"""MIPRO: instruction and demonstration search with Bayesian optimisation (Opsahl-Ong et al., 2024).

Stages:

1. **Bootstrap demonstrations.** The starting program runs on training
   examples; the Generator steps of well-scored runs (and, with
   ``use_labels``, ground truth for the answering step) form a pool, from
   which ``num_candidates`` demo sets per Generator are drawn (set 0 keeps
   the current examples).
2. **Propose instructions.** The proposal model writes ``num_candidates - 1``
   instructions per Generator (candidate 0 is the current one), grounded in a
   summary of the dataset (one call), the program's structure, a demo set and
   a randomly drawn tip. Degenerate proposals are rejected without a rollout.
3. **Search.** optuna's TPE sampler (seeded) picks an (instruction, demo set)
   per Generator for each of ``num_trials`` trials; a trial scores on a
   validation minibatch; every ``minibatch_full_eval_steps`` trials the
   configuration with the best minibatch average is scored on the whole
   validation split, and the best full score is kept.

Pacing under ``fit()``: stages 1-2 run in ``on_train_begin`` (the starting
program is scored on the full validation split there too); each
``train_step`` then runs an equal share of the trials left over the steps
left in the epoch, so ``fit(epochs=1)`` with any ``batch_size`` runs every
trial.

Budget: ``max_lm_calls`` caps every model call MIPRO causes (bootstrap and
trial rollouts, rewards, proposals), measured from the usage ledger without
response-cache hits. A trial or evaluation starts only when its estimated
cost (pending rollouts x measured calls per rollout) fits in what is left.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import optuna

from promptgym.core.events import (
    BudgetPlan,
    CandidateProposed,
    DemosBootstrapped,
    FullEvaluation,
    InstructionProposed,
    SearchEnd,
    TrialEnd,
)
from promptgym.core.serialization import register_builtin
from promptgym.optimizers import racing
from promptgym.lm.usage import LEDGER
from promptgym.optimizers.base import Candidate, lm_calls_since
from promptgym.optimizers.demo_pool import DemoSampler
from promptgym.optimizers.kit import Budget, OptimizerContext
from promptgym.optimizers.proposals import (
    PromptSearchOptimizer,
    as_text,
    output_strings,
    text_schema,
)
from promptgym.rewards.base import to_json

logger = logging.getLogger("promptgym")

PRESETS: dict[str, dict[str, int]] = {
    "light": {"num_candidates": 6, "minibatch_size": 25, "minibatch_full_eval_steps": 10},
    "medium": {"num_candidates": 12, "minibatch_size": 25, "minibatch_full_eval_steps": 10},
    "heavy": {"num_candidates": 18, "minibatch_size": 25, "minibatch_full_eval_steps": 10},
}

TIPS = {
    "none": "",
    "creative": "Don't be afraid to be creative when writing the instruction!",
    "simple": "Keep the instruction clear and concise.",
    "description": "Make sure your instruction is very informative and descriptive.",
    "high_stakes": "The instruction should include a high stakes scenario in which the model must solve the task correctly.",
    "persona": "Include a persona that is relevant to the task in the instruction (for example 'You are a ...').",
}

SUMMARY_PROMPT = """Here are examples from a dataset: each has an input and the expected output.
```
{examples}
```
Describe this dataset in 2-3 sentences: what the inputs are, what is asked, and what the expected
outputs look like (format, allowed values). Do not list the examples."""

PROPOSAL_PROMPT = """You write instructions for one step of a language-model program.

Dataset: {summary}

Program:
{program}

The step to instruct: {module}. Its current instructions:
```
{instructions}
```
Examples of this step's inputs and correct outputs:
```
{demos}
```
{tip}
Write new instructions for this step (proposal {number}). Describe the task and the expected output
precisely, so that the step answers new inputs correctly. Answer only with the instructions."""


MAX_FREE_REPEATS = 20
"""Asks per trial that may land on an already-scored configuration before one is spent on a repeat."""


def default_num_trials(num_generators: int, num_candidates: int, search_examples: bool) -> int:
    """DSPy's rule: max(2 * variables * log2(candidates), 1.5 * candidates)."""
    variables = num_generators * (2 if search_examples else 1)
    return max(1, int(max(2 * variables * math.log2(max(2, num_candidates)), 1.5 * num_candidates)))


@register_builtin
class MIPRO(PromptSearchOptimizer):
    """Bayesian search over (instruction, demo set) per Generator.

    Args:
        auto: ``"light"`` | ``"medium"`` | ``"heavy"`` presets (6 / 12 / 18
            candidates; minibatches of 25; a full evaluation every 10 trials);
            explicit arguments override the preset; ``None`` uses "light" values.
        num_candidates: instructions and demo sets per Generator (each includes the current one).
        num_trials: trials of the search (default: DSPy's rule from the
            number of Generators and candidates). A configuration TPE asks
            for again on a minibatch where all its scores are known costs
            nothing and teaches nothing: TPE is told its value and asked
            again, and the trial is not spent (``repeats`` counts these).
        max_lm_calls: cap on every model call MIPRO causes (None: no cap).
        proposal_language_model: the model that summarises the data and writes
            instructions (default: the default model, else the program's).
        optimize_instructions / optimize_examples: what the search varies.
        max_bootstrapped_demos: demonstrations per demo set.
        max_bootstrap_examples: training examples run to bootstrap demos
            (default: all, up to 4 x num_candidates x max_bootstrapped_demos).
        min_reward: a run must earn this to give demonstrations.
        use_labels: ground truth may stand in for failed runs' answers.
        minibatch_size / minibatch_full_eval_steps: trial minibatch and how
            often the best configuration so far is scored on the full split.
        min_instruction_length / max_instruction_length: proposal bounds.
        proposal_temperature: sampling temperature of proposal calls.
        seed: fixes demo sets, tips, minibatches and the TPE sampler.
    """

    model_argument = "proposal_language_model"

    def __init__(self, auto: str | None = "light", num_candidates: int | None = None, num_trials: int | None = None,
                 max_lm_calls: int | None = None, proposal_language_model: Any = None,
                 optimize_instructions: bool = True, optimize_examples: bool = True,
                 max_bootstrapped_demos: int = 3, max_bootstrap_examples: int | None = None,
                 min_reward: float = 0.5, use_labels: bool = True, minibatch_size: int | None = None,
                 minibatch_full_eval_steps: int | None = None, min_instruction_length: int = 20,
                 max_instruction_length: int = 600, proposal_temperature: float | None = 0.7,
                 seed: int | None = None) -> None:
        super().__init__(seed=seed, budget=Budget(max_lm_calls, unit="lm_calls"))
        if auto is not None and auto not in PRESETS:
            raise ValueError(f"auto must be one of {', '.join(PRESETS)} or None, got {auto!r}")
        preset = PRESETS[auto or "light"]
        self.auto = auto
        self.num_candidates = int(num_candidates if num_candidates is not None else preset["num_candidates"])
        self.minibatch_size = int(minibatch_size if minibatch_size is not None else preset["minibatch_size"])
        self.minibatch_full_eval_steps = int(minibatch_full_eval_steps if minibatch_full_eval_steps is not None
                                             else preset["minibatch_full_eval_steps"])
        for name, value in (("num_candidates", self.num_candidates), ("minibatch_size", self.minibatch_size),
                            ("minibatch_full_eval_steps", self.minibatch_full_eval_steps)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if num_trials is not None and num_trials < 1:
            raise ValueError(f"num_trials must be >= 1, got {num_trials}")
        if max_lm_calls is not None and max_lm_calls < 1:
            raise ValueError(f"max_lm_calls must be >= 1, got {max_lm_calls}")
        if not (optimize_instructions or optimize_examples):
            raise ValueError("MIPRO needs optimize_instructions or optimize_examples (or both)")
        self.requested_trials = num_trials
        self.proposal_language_model = proposal_language_model
        self.optimize_instructions = optimize_instructions
        self.optimize_examples = optimize_examples
        self.max_bootstrapped_demos = max_bootstrapped_demos
        self.max_bootstrap_examples = max_bootstrap_examples
        self.min_reward = min_reward
        self.use_labels = use_labels
        self.min_instruction_length = min_instruction_length
        self.max_instruction_length = max_instruction_length
        self.proposal_temperature = proposal_temperature
        # search state (saved by get_extra_state)
        self.prepared = False
        self.summary = ""
        self.instruction_candidates: dict[str, list[str]] = {}
        self.demo_sets: dict[str, list[list[dict[str, Any]]]] = {}
        self.trials: list[dict[str, Any]] = []
        self.repeats = 0
        self.told: list[dict[str, Any]] = []
        """Every value TPE was told, trials and free repeats, in order (the study is rebuilt from it)."""
        self.full_evaluated: list[int] = []
        self.num_trials = 0
        self.exhausted = False
        self._study: optuna.Study | None = None
        self._proposal_lm: Any = None
        self.val_split = "val"

    # -- lifecycle ------------------------------------------------------------------------

    def build(self, program: Any) -> None:
        super().build(program)
        # Before the first rollout, one is priced at a call per Generator.
        self.budget.default_calls_per_rollout = float(max(1, len(self.generators)))
        self._proposal_lm = self.resolve_language_model(self.proposal_language_model, "MIPRO's proposals")

    @property
    def max_lm_calls(self) -> int | None:
        return self.budget.limit

    @property
    def lm_calls(self) -> int:
        """Every model call MIPRO caused so far (the budget's unit), response-cache hits not counted."""
        return int(self.budget.spent)

    async def on_train_begin(self, ctx: OptimizerContext) -> None:
        self.start_rng(ctx)
        self.val_split = ctx.rollouts.validation_split()
        self.exhausted = False
        if not self.generators:
            logger.warning("MIPRO: the program has no trainable Generator; nothing to search")
            self.prepared, self.exhausted = True, True
            return
        if self.num_trials == 0:
            self.num_trials = self.requested_trials or default_num_trials(
                len(self.generators), self.num_candidates, self.optimize_examples)
        if not self.prepared:
            await self.bootstrap(ctx)
            await self.propose_instructions(ctx)
            self.prepared = True
        self._make_study()
        baseline = self.candidates[0]
        if baseline.id not in self.full_evaluated:
            await self.full_evaluation(ctx, baseline)
        logger.info("MIPRO: %d trials over %s; %d LM calls spent so far%s", self.num_trials,
                    ", ".join(f"{self.module_of(n)}: {len(self.instruction_candidates[n])} instructions x "
                              f"{len(self.demo_sets[n])} demo sets" for n in self.generators),
                    self.lm_calls, "" if self.max_lm_calls is None else f" of {self.max_lm_calls}")
        await ctx.emit(BudgetPlan(optimizer="MIPRO", unit="lm_calls", limit=self.max_lm_calls, used=self.lm_calls,
                                  minibatch_size=self.minibatch_size, num_trials=self.num_trials))

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        left = self.num_trials - len(self.trials)
        share = math.ceil(self.share(ctx, left)) if left > 0 else 0
        for _ in range(share):
            if self.exhausted or len(self.trials) >= self.num_trials:
                break
            await self.trial(ctx)
        if (len(self.trials) >= self.num_trials or self.exhausted) and self.trials:
            await self.periodic_full_evaluation(ctx)
        return {"trials": float(len(self.trials)), "optimizer_lm_calls": float(self.lm_calls),
                "best_val_reward": float(self.best.mean(self.val_split) or 0.0)}

    async def on_train_end(self, ctx: OptimizerContext) -> None:
        if self.trials:
            await self.periodic_full_evaluation(ctx)
        await ctx.emit(SearchEnd(optimizer="MIPRO", unit="lm_calls", used=self.lm_calls, limit=self.max_lm_calls,
                                 iterations=len(self.trials), candidates=len(self.candidates), best=self.best_id))

    # -- accounting -----------------------------------------------------------------------

    async def ask_counted(self, ctx: OptimizerContext, messages: list[dict[str, str]], schema: dict[str, Any],
                          what: str) -> dict[str, Any] | None:
        """A proposal call, charged to the budget."""
        snapshot = LEDGER.snapshot()
        answer = await self.ask(ctx, self._proposal_lm, messages, schema, what, temperature=self.proposal_temperature)
        self.budget.charge(lm_calls=lm_calls_since(snapshot))
        return answer

    # -- stage 1: demonstrations ----------------------------------------------------------

    async def bootstrap(self, ctx: OptimizerContext) -> None:
        assert self._rng is not None
        base = self.candidates[0]
        self.demo_sets = {name: [list(base.variables[name].get("examples", []))] for name in self.generators}
        if not self.optimize_examples:
            return
        limit = self.max_bootstrap_examples or 4 * self.num_candidates * max(1, self.max_bootstrapped_demos)
        size = ctx.rollouts.size("train")
        indices = sorted(self._rng.permutation(size)[:min(size, limit)].tolist())
        affordable = indices[:max(0, int(self.budget.remaining // self.budget.calls_per_rollout()))] \
            if self.max_lm_calls is not None else indices
        demos = DemoSampler(self.max_bootstrapped_demos, self.max_bootstrapped_demos, self.min_reward, self.use_labels)
        # Generators that answer directly get the labelled examples for free; run only for the others.
        demos.seed(ctx.rollouts, self.prompts)
        if affordable and demos.needs_traces(self.prompts):
            demos.learn(ctx.rollouts, await self.score(ctx, base, "train", affordable))
        for name in self.generators:
            sets = self.demo_sets[name]
            for _ in range(4 * self.num_candidates):
                if len(sets) >= self.num_candidates:
                    break
                chosen = demos.draw(self.module_of(name), self._rng, count=self.max_bootstrapped_demos)
                if chosen and chosen not in sets:
                    sets.append(chosen)
        await ctx.emit(DemosBootstrapped(optimizer="MIPRO", pool_size=demos.pool.size(),
                                         demo_sets={self.module_of(n): len(s) for n, s in self.demo_sets.items()}))

    # -- stage 2: instructions ------------------------------------------------------------

    async def propose_instructions(self, ctx: OptimizerContext) -> None:
        assert self._rng is not None
        base = self.candidates[0]
        self.instruction_candidates = {name: [base.variables[name]["instructions"]] for name in self.generators}
        if not self.optimize_instructions:
            return
        self.summary = await self.summarize(ctx)
        labels = output_strings([to_json(y) for y in ctx.rollouts.targets("train")][:200])
        program = self.describe_program()
        for name in self.generators:
            known = self.instruction_candidates[name]
            for number in range(1, self.num_candidates):
                if not self.budget.affordable(0, lm_calls=1):
                    logger.info("MIPRO: max_lm_calls reached while proposing instructions")
                    return
                tip_name = list(TIPS)[int(self._rng.integers(len(TIPS)))]
                demos = self.demo_sets[name][number % len(self.demo_sets[name])]
                prompt = PROPOSAL_PROMPT.format(
                    summary=self.summary or "(no summary)", program=program, module=self.module_of(name),
                    instructions=known[0],
                    demos="\n".join(f"{as_text(d['inputs'], 300)} -> {as_text(d['outputs'], 200)}" for d in demos)
                    or "(none yet)",
                    tip=f"Tip: {TIPS[tip_name]}\n" if TIPS[tip_name] else "", number=number)
                schema = text_schema("proposed_instruction", "The new instructions", self.min_instruction_length,
                                     self.max_instruction_length)
                answer = await self.ask_counted(ctx, [{"role": "user", "content": prompt}], schema,
                                                f"instruction proposal {number} for {name}")
                if answer is None:
                    continue
                text = await self.accept_instructions(
                    ctx, answer.get("proposed_instruction"), known[0], labels, f"instruction proposal {number} for {name}",
                    lambda text: "same as another proposal" if text in known else None)
                if text is None:
                    continue
                known.append(text)
                await ctx.emit(InstructionProposed(optimizer="MIPRO", module=self.module_of(name), tip=tip_name,
                                                   text=as_text(text, 200)))

    async def summarize(self, ctx: OptimizerContext) -> str:
        assert self._rng is not None
        xs, ys = ctx.rollouts.inputs("train"), ctx.rollouts.targets("train")
        picks = sorted(self._rng.permutation(len(xs))[:8].tolist())
        examples = "\n".join(f"{as_text(to_json(xs[i]), 300)} -> {as_text(to_json(ys[i]), 200)}" for i in picks)
        answer = await self.ask_counted(ctx, [{"role": "user", "content": SUMMARY_PROMPT.format(examples=examples)}],
                                        text_schema("summary", "The dataset description", 10, 400), "dataset summary")
        return (answer or {}).get("summary", "") or ""

    # -- stage 3: search ------------------------------------------------------------------

    def distributions(self) -> dict[str, optuna.distributions.CategoricalDistribution]:
        dists = {}
        for name in self.generators:
            dists[f"{name}:instruction"] = optuna.distributions.CategoricalDistribution(
                list(range(len(self.instruction_candidates[name]))))
            dists[f"{name}:demos"] = optuna.distributions.CategoricalDistribution(list(range(len(self.demo_sets[name]))))
        return dists

    def sampler(self) -> optuna.samplers.TPESampler:
        """TPE seeded from the optimizer's seed and the trials so far, so a resumed search draws what it would have
        (optuna's sampler state itself is not saved)."""
        seed = self.seed if self.seed is not None else (self._seed_used or 0)
        startup = min(10, max(2, self.num_trials // 3))
        return optuna.samplers.TPESampler(seed=seed + len(self.trials), n_startup_trials=startup, multivariate=True)

    def _make_study(self) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._study = optuna.create_study(direction="maximize", sampler=self.sampler())
        dists = self.distributions()
        for record in self.told or self.trials:
            self._study.add_trial(optuna.trial.create_trial(params=record["params"], distributions=dists,
                                                            value=record["value"]))

    def variables_for(self, params: dict[str, int]) -> dict[str, Any]:
        variables = {name: dict(value) for name, value in self.candidates[0].variables.items()}
        for name in self.generators:
            variables[name]["instructions"] = self.instruction_candidates[name][params[f"{name}:instruction"]]
            variables[name]["examples"] = self.demo_sets[name][params[f"{name}:demos"]]
        return variables

    async def trial(self, ctx: OptimizerContext) -> None:
        assert self._study is not None and self._rng is not None
        self._study.sampler = self.sampler()
        size = ctx.rollouts.size(self.val_split)
        minibatch = sorted(self._rng.choice(size, size=min(self.minibatch_size, size), replace=False).tolist())
        for repeat in range(MAX_FREE_REPEATS + 1):
            trial = self._study.ask(self.distributions())
            params = {key: int(value) for key, value in trial.params.items()}
            variables = self.variables_for(params)
            candidate = self.find(variables)
            pending = len(ctx.rollouts.pending(self.val_split, minibatch, variables))
            if pending or candidate is None or repeat == MAX_FREE_REPEATS:
                break
            # Already scored on every example of this minibatch: nothing to learn or pay for. TPE hears the
            # known value, and the trial is asked again instead of being spent on a repeat.
            known = candidate.mean(self.val_split, minibatch) or 0.0
            self._study.tell(trial, known)
            self.told.append({"params": params, "value": known})
            self.repeats += 1
        if not self.budget.affordable(pending):
            self._study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.exhausted = True
            logger.info("MIPRO: max_lm_calls=%s reached after %d trials", self.max_lm_calls, len(self.trials))
            return
        if candidate is None:
            candidate = self.add_candidate(variables, parent=self.candidates[0].id, origin="mipro")
            await ctx.emit(CandidateProposed(candidate=candidate.id, parent=candidate.parent, origin="mipro",
                                             params=params))
        results = await self.score(ctx, candidate, self.val_split, minibatch)
        value = float(np.mean([r.reward for r in results])) if results else 0.0
        self._study.tell(trial, value)
        self.told.append({"params": params, "value": value})
        self.trials.append({"number": len(self.trials), "params": params, "value": value,
                            "candidate": candidate.id, "minibatch": minibatch})
        await ctx.emit(TrialEnd(optimizer="MIPRO", trial=len(self.trials) - 1, params=params, value=value,
                                candidate=candidate.id))
        if len(self.trials) % self.minibatch_full_eval_steps == 0:
            await self.periodic_full_evaluation(ctx)

    async def periodic_full_evaluation(self, ctx: OptimizerContext) -> None:
        """Score the not-yet-fully-evaluated candidate with the best minibatch average on the whole split."""
        tried = {record["candidate"] for record in self.trials} - set(self.full_evaluated)
        if not tried:
            return
        means = {cid: self.get_candidate(cid).mean(self.val_split) or 0.0 for cid in tried}
        best = max(sorted(means), key=lambda cid: means[cid])
        await self.full_evaluation(ctx, self.get_candidate(best))

    async def full_evaluation(self, ctx: OptimizerContext, candidate: Candidate) -> None:
        indices = list(range(ctx.rollouts.size(self.val_split)))
        if not self.budget.affordable(len(ctx.rollouts.pending(self.val_split, indices, candidate.variables))):
            self.exhausted = True
            return
        await self.score(ctx, candidate, self.val_split, indices)
        self.full_evaluated.append(candidate.id)
        score = candidate.mean(self.val_split) or 0.0
        incumbent = self.best.mean(self.val_split) if self.best.id in self.full_evaluated else None
        await ctx.emit(FullEvaluation(optimizer="MIPRO", candidate=candidate.id, score=score))
        if incumbent is None:
            await self.accept(ctx, candidate, reason=f"full validation {score:.3f}")
            return
        if candidate.id == self.best_id:
            return
        lead = (score - incumbent) * len(indices)
        outcome = await self.settle_close_call(ctx, candidate, lead, len(indices),
                                               f"full validation ({score:.3f} vs {incumbent:.3f})")
        if outcome.won:
            await self.accept(ctx, candidate, reason=f"ahead by {outcome.lead:g} on {outcome.where}")

    async def settle_close_call(self, ctx: OptimizerContext, candidate: Candidate, lead: float, examples: int,
                                where: str) -> racing.Outcome:
        """Within one example of the incumbent on full validation: go on over held-out training examples."""
        hidden = racing.shown_training_examples(ctx, candidate, self.best)
        return await racing.settle_close_call(self, ctx, candidate, self.best, lead, examples, where, hidden)

    # -- state ----------------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "auto": self.auto, "num_candidates": self.num_candidates,
                "num_trials": self.requested_trials, "max_lm_calls": self.max_lm_calls,
                "optimize_instructions": self.optimize_instructions, "optimize_examples": self.optimize_examples,
                "max_bootstrapped_demos": self.max_bootstrapped_demos,
                "max_bootstrap_examples": self.max_bootstrap_examples, "min_reward": self.min_reward,
                "use_labels": self.use_labels, "minibatch_size": self.minibatch_size,
                "minibatch_full_eval_steps": self.minibatch_full_eval_steps,
                "min_instruction_length": self.min_instruction_length,
                "max_instruction_length": self.max_instruction_length,
                "proposal_temperature": self.proposal_temperature}

    def get_extra_state(self) -> dict[str, Any]:
        return {**super().get_extra_state(), "prepared": self.prepared, "summary": self.summary,
                "instruction_candidates": self.instruction_candidates, "demo_sets": self.demo_sets,
                "trials": self.trials, "repeats": self.repeats, "told": self.told, "full_evaluated": list(self.full_evaluated),
                "lm_calls": self.lm_calls, "rollouts": self.budget.rollouts,
                "rollout_lm_calls": self.budget.rollout_lm_calls, "num_trials": self.num_trials}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.prepared = bool(state.get("prepared", False))
        self.summary = state.get("summary", "")
        self.instruction_candidates = {k: list(v) for k, v in state.get("instruction_candidates", {}).items()}
        self.demo_sets = {k: list(v) for k, v in state.get("demo_sets", {}).items()}
        self.trials = list(state.get("trials", []))
        self.repeats = int(state.get("repeats", 0))
        self.told = list(state.get("told", []))
        self.full_evaluated = [int(c) for c in state.get("full_evaluated", [])]
        self.budget.spent = int(state.get("lm_calls", 0))
        self.budget.rollouts = int(state.get("rollouts", 0))
        self.budget.rollout_lm_calls = int(state.get("rollout_lm_calls", 0))
        self.num_trials = int(state.get("num_trials", 0))
        self._study = None


MIPROv2 = MIPRO
"""DSPy's name for the same optimizer."""
