"""RandomFewShot / GreedyOptimizer: free labelled demonstrations, racing, budgets, leaks, traces."""

import numpy as np
import pytest

import promptgym as pg
from promptgym.optimizers.base import Candidate
from promptgym.optimizers.racing import race_decided, settle_close_call
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import Answer, Question, questions


def shows_examples(request):
    """Right (the upper-cased question) only when the prompt carries at least one demonstration."""
    question = last_user_json(request)["question"]
    answer = {"answer": question.upper() if len(request.messages) > 2 else "?"}
    return {"thinking": "t", **answer} if "thinking" in request.schema["properties"] else answer


def always_right(request):
    return {"answer": last_user_json(request)["question"].upper()}


def data(prefix, n):
    x = questions(*[f"{prefix}{i}" for i in range(n)])
    y = np.array([Answer(answer=f"{prefix.upper()}{i}") for i in range(n)], dtype=object)
    return x, y


async def program_with(lm, optimizer, module=pg.Generator, name="fs"):
    inputs = pg.Input(data_model=Question)
    outputs = await module(data_model=Answer, language_model=lm)(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name=name)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    return program


async def fit_recording_events(program, x, y, x_val, y_val) -> list[dict]:
    """One epoch over a batch of 10, minibatches of 4, no end-of-epoch validation; the trainer's events."""
    events = []

    class Recorder(pg.callbacks.Callback):
        def on_event(self, event):
            events.append(event)

    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=10, minibatch_size=4,
                      validation_freq=2, verbose=0, callbacks=[Recorder()])
    return events


def asked(lm):
    return [last_user_json(request)["question"] for request in lm.requests]


@pytest.mark.parametrize(("lead", "left", "decided"), [(3, 2, True), (2, 2, False), (0, 0, True), (-1, 1, True),
                                                        (0, 1, False), (0.5, 0, True)])
def test_race_is_decided_when_the_rest_cannot_change_the_winner(lead, left, decided):
    assert race_decided(lead, left) is decided


@pytest.mark.parametrize(("lead", "left", "decided"), [(-1, 0, True), (-1, 1, False), (0, 1, True), (2, 1, False),
                                                        (3, 1, True), (-3, 1, True), (-2, 1, False)])
def test_a_close_call_is_its_own_verdict_with_a_margin(lead, left, decided):
    # Verdicts with a margin of one example: ahead by more, within it (too close to call), behind by more.
    assert race_decided(lead, left, margin=1) is decided


class HeldOutRollouts:
    """What settle_close_call reads of the rollout service: a validation split, a minibatch size, one order."""

    minibatch_size = 2

    def validation_split(self):
        return "val"

    def held_out_order(self):
        return [0, 1, 2, 3, 4, 5, 6, 7]


class HeldOutContext:
    rollouts = HeldOutRollouts()


class ScoringBy:
    """What settle_close_call asks of an optimizer: score a program on a chunk, and what it can afford."""

    def __init__(self, score):
        self._score = score

    async def score(self, ctx, program, split, chunk):
        await self._score(program, split, chunk)

    def affordable(self, ctx, split, chunk, *programs):
        return list(chunk)


@pytest.mark.parametrize(("incumbent_misses", "won", "raced"), [
    ({2}, True, 4),          # level after round 1 (a dead heat), ahead after round 2: only the second round tells
    ({0}, True, 2),          # ahead after round 1: no second round
    (set(), False, 4),       # level after both rounds: the incumbent stays, and it stops there (not 8 examples)
])
async def test_a_dead_heat_takes_one_more_round_of_held_out_examples(incumbent_misses, won, raced):
    candidate, incumbent = Candidate(1, {}), Candidate(0, {})

    async def score(program, split, chunk):
        for i in chunk:
            right = program is candidate or i not in incumbent_misses
            program.scores.setdefault(split, {})[str(i)] = float(right)

    candidate.scores["val"] = incumbent.scores["val"] = {str(i): 1.0 for i in range(10)}  # both perfect
    outcome = await settle_close_call(ScoringBy(score), HeldOutContext(), candidate, incumbent, 0.0, 10,
                                      "10 val examples", set())
    assert (outcome.won, outcome.examples - 10) == (won, raced)
    assert outcome.where == f"10 val examples (lead +0: too close to call) and {raced} held-out train examples"


async def test_a_candidate_that_solved_no_validation_example_is_not_settled():
    candidate, incumbent = Candidate(1, {}), Candidate(0, {})
    candidate.scores["val"] = incumbent.scores["val"] = {str(i): 0.0 for i in range(10)}

    async def score(program, split, chunk):
        raise AssertionError("no held-out run for a candidate at zero")

    outcome = await settle_close_call(ScoringBy(score), HeldOutContext(), candidate, incumbent, 0.0, 10,
                                      "10 val examples", set())
    assert (outcome.won, outcome.examples, outcome.where) == (False, 10, "10 val examples")


async def test_labels_are_demonstrations_before_any_call_and_the_race_stops_early():
    lm = ScriptedLanguageModel(respond=shows_examples)
    program = await program_with(lm, pg.optimizers.RandomFewShot(nb_min_examples=3, nb_max_examples=3))
    (x, y), (x_val, y_val) = data("t", 20), data("v", 10)
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=20, minibatch_size=10,
                                validation_freq=2, verbose=0)
    # No training example ran: the Generator answers directly, so its demonstrations are the labels.
    assert all(q.startswith("v") for q in asked(lm))
    # Candidate right, incumbent wrong: after 3 rounds of 2 the lead (6) exceeds what 4 examples can undo.
    # (fit()'s final check against the start then scores both on the other 4 validation examples: 8 more calls)
    assert len(lm.requests) == 20 and history.history["lm_calls"] == [12]
    assert history.history["reward"] == [None]  # no training rollout to report
    optimizer = program.training_setup.optimizer
    assert optimizer.metric_calls == 12 and optimizer.best.origin == "random_few_shot"
    examples = program.trainable_variables[0].get("examples")
    assert len(examples) == 3 and all(e["outputs"]["answer"] == e["inputs"]["question"].upper() for e in examples)


async def test_budget_caps_program_runs_exactly():
    lm = ScriptedLanguageModel(respond=shows_examples)
    program = await program_with(lm, pg.optimizers.RandomFewShot(max_metric_calls=5), name="budget")
    (x, y), (x_val, y_val) = data("t", 30), data("v", 10)
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=2, batch_size=10, minibatch_size=10,
                      validation_freq=3, verbose=0)
    # Step 1: one round (candidate + incumbent on 2 validation examples) = 4 runs, accepted 2/2 against 0/2;
    # a second round would cost 4. Step 2: the new incumbent is known on those examples, so one run of the
    # next candidate fits the last unit of budget. Step 3: nothing left, nothing run.
    # fit()'s final check (outside the budget) then scores start and best on all 10 validation examples: 16 more
    assert program.training_setup.optimizer.metric_calls == 5 and len(lm.requests) == 5 + 16
    assert program.training_setup.optimizer.get_candidate(1).origin == "random_few_shot"


async def test_a_tie_keeps_the_incumbent():
    lm = ScriptedLanguageModel(respond=always_right)
    program = await program_with(lm, pg.optimizers.RandomFewShot(), name="tie")
    (x, y), (x_val, y_val) = data("t", 10), data("v", 6)
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=10, minibatch_size=6,
                      validation_freq=2, verbose=0)
    optimizer = program.training_setup.optimizer
    assert optimizer.best.origin == "initial" and program.trainable_variables[0].get("examples") == []
    # A tie is only settled by the last validation example (6 pairs), then goes to a second race on 6
    # training examples neither program shows (6 more pairs): a dead heat, so one more round on the held-out
    # examples left (the challenger shows 3 of the 10: 1 pair). Still level: the incumbent stays.
    assert len(lm.requests) == 26
    assert sum(q.startswith("t") for q in asked(lm)) == 14


async def test_a_tie_on_validation_is_broken_on_held_out_training_examples():
    def demos_help_on_training_questions(request):
        question = last_user_json(request)["question"]
        good = question.startswith("v") or len(request.messages) > 2
        return {"answer": question.upper() if good else "?"}

    lm = ScriptedLanguageModel(respond=demos_help_on_training_questions)
    program = await program_with(lm, pg.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=2), name="tb")
    (x, y), (x_val, y_val) = data("t", 10), data("v", 4)
    events = await fit_recording_events(program, x, y, x_val, y_val)
    accepted = [e for e in events if e["event"] == "candidate_accepted"]
    assert accepted and accepted[0]["reason"] == ("ahead by 4 on 4 val examples (lead +0: too close to call) "
                                                  "and 4 held-out train examples")
    optimizer = program.training_setup.optimizer
    shown = optimizer.shown(optimizer.best)
    assert not shown & {int(i) for i in optimizer.best.scores["train"]}  # never scored on its own demonstrations


def demos_slip_once_on_validation(request):
    """Zero-shot: right on validation, wrong on training questions; with demos right, except on question v0."""
    question = last_user_json(request)["question"]
    with_demos = len(request.messages) > 2
    good = (question != "v0") if with_demos else question.startswith("v")
    return {"answer": question.upper() if good else "?"}


async def test_close_calls_reuse_the_held_out_examples_the_incumbent_already_ran():
    lm = ScriptedLanguageModel(respond=always_right)
    program = await program_with(lm, pg.optimizers.RandomFewShot(nb_min_examples=1, nb_max_examples=1), name="reuse")
    (x, y), (x_val, y_val) = data("t", 12), data("v", 4)
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=4, minibatch_size=4,
                      validation_freq=2, verbose=0)
    optimizer = program.training_setup.optimizer
    challengers = optimizer.candidates[1:]
    # Three dead heats, each settled on two rounds of 4 held-out examples.
    assert len(challengers) == 3 and optimizer.best.origin == "initial"
    # One fixed order of held-out examples: the incumbent ran on 9 training examples, not 3 x 8; each
    # challenger skipped only the example it shows.
    assert len(optimizer.best.scores["train"]) == 9
    assert all(len(c.scores["train"]) == 8 and not optimizer.shown(c) & {int(i) for i in c.scores["train"]}
               for c in challengers)
    assert len(lm.requests) == 4 + 3 * 4 + 3 * 8 + 9


async def test_one_example_behind_on_validation_is_too_close_to_call():
    lm = ScriptedLanguageModel(respond=demos_slip_once_on_validation)
    program = await program_with(lm, pg.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=2), name="close")
    (x, y), (x_val, y_val) = data("t", 10), data("v", 4)
    events = await fit_recording_events(program, x, y, x_val, y_val)
    scored = [e for e in events if e["event"] == "candidate_scored"]
    # 3/4 against 4/4 on validation, then 4/4 against 0/4 on held-out training examples: ahead by 3 in all.
    assert scored[0]["lead"] == 3 and scored[0]["examples"] == 8
    assert [e["reason"] for e in events if e["event"] == "candidate_accepted"][0] == (
        "ahead by 3 on 4 val examples (lead -1: too close to call) and 4 held-out train examples")


async def test_two_examples_behind_on_validation_loses_without_training_runs():
    def slips_twice(request):
        question = last_user_json(request)["question"]
        good = question not in ("v0", "v1") if len(request.messages) > 2 else question.startswith("v")
        return {"answer": question.upper() if good else "?"}

    lm = ScriptedLanguageModel(respond=slips_twice)
    program = await program_with(lm, pg.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=2), name="far")
    (x, y), (x_val, y_val) = data("t", 10), data("v", 4)
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=10, minibatch_size=4,
                      validation_freq=2, verbose=0)
    assert program.training_setup.optimizer.best.origin == "initial"
    assert not any(q.startswith("t") for q in asked(lm))  # behind by 2 after one round of 2: no held-out race


async def test_validating_on_training_data_never_scores_a_demonstration_on_itself():
    lm = ScriptedLanguageModel(respond=shows_examples)
    program = await program_with(lm, pg.optimizers.RandomFewShot(nb_min_examples=3, nb_max_examples=3), name="leak")
    x, y = data("t", 8)
    await program.fit(x, y, validation_split=0.0, epochs=1, batch_size=8, minibatch_size=8, validation_freq=2,
                      verbose=0)
    optimizer = program.training_setup.optimizer
    candidate = optimizer.get_candidate(1)
    shown = optimizer.shown(candidate)
    assert len(shown) == 3 and not shown & {int(i) for i in candidate.scores["train"]}


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_chain_of_thought_learns_from_traces():
    def right_on_even(request):
        question = last_user_json(request)["question"]
        good = len(request.messages) > 2 or int(question[1:]) % 2 == 0
        return {"thinking": "t", "answer": question.upper() if good else "?"}

    lm = ScriptedLanguageModel(respond=right_on_even)
    program = await program_with(lm, pg.optimizers.RandomFewShot(), module=pg.ChainOfThought, name="cot")
    (x, y), (x_val, y_val) = data("t", 6), data("v", 6)
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=6, minibatch_size=6,
                                verbose=0)
    assert asked(lm)[:6] == [f"t{i}" for i in range(6)]  # the incumbent ran on the batch for traces
    assert history.history["reward"] == [0.5]
    examples = program.trainable_variables[0].get("examples")
    assert examples and all(e["outputs"]["thinking"] == "t" for e in examples)  # traced, not bare labels
    assert history.history["val_reward"] == [1.0]


async def test_without_labels_traces_are_needed():
    lm = ScriptedLanguageModel(respond=always_right)
    program = await program_with(lm, pg.optimizers.GreedyOptimizer(use_labels=False), name="nolabels")
    (x, y), (x_val, y_val) = data("t", 4), data("v", 4)
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=4, minibatch_size=4, verbose=0)
    assert asked(lm)[:4] == ["t0", "t1", "t2", "t3"]
    assert program.training_setup.optimizer.demos.pool.size() == 4


async def test_budget_and_spend_survive_save_and_load(tmp_path):
    lm = ScriptedLanguageModel(respond=shows_examples)
    program = await program_with(lm, pg.optimizers.RandomFewShot(max_metric_calls=6), name="saved")
    (x, y), (x_val, y_val) = data("t", 10), data("v", 4)
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=10, minibatch_size=4,
                      validation_freq=2, verbose=0)
    program.save(tmp_path / "p.json")
    loaded = pg.Program.load(tmp_path / "p.json")
    optimizer = loaded.training_setup.optimizer
    assert optimizer.max_metric_calls == 6 and optimizer.metric_calls == program.training_setup.optimizer.metric_calls
    with pytest.raises(ValueError, match="max_metric_calls must be >= 1"):
        pg.optimizers.RandomFewShot(max_metric_calls=0)


async def run_with_acceptance(acceptance, respond):
    lm = ScriptedLanguageModel(respond=respond)
    optimizer = pg.optimizers.RandomFewShot(nb_min_examples=1, nb_max_examples=1, acceptance=acceptance)
    program = await program_with(lm, optimizer)
    x, y = data("t", 16)
    x_val, y_val = data("v", 4)
    events = await fit_recording_events(program, x, y, x_val, y_val)
    accepted = [e for e in events if e["event"] == "candidate_accepted"]
    return optimizer, accepted


async def test_significant_acceptance_asks_for_more_than_a_lead():
    lead, accepted_lead = await run_with_acceptance("lead", shows_examples)
    significant, accepted = await run_with_acceptance("significant", shows_examples)
    assert accepted_lead and accepted
    assert "better on 8 paired examples: +1.000" in accepted[0]["reason"]  # 4 of 4 is p=0.125: 4 more were needed
    assert significant.metric_calls > lead.metric_calls


async def test_significant_acceptance_rejects_a_win_that_held_out_examples_undo():
    def right_on_validation_only_with_demos(request):
        question = last_user_json(request)["question"]
        shown = len(request.messages) > 2
        right = shown == question.startswith("v")
        return {"answer": question.upper() if right else "?"}

    _, accepted_lead = await run_with_acceptance("lead", right_on_validation_only_with_demos)
    _, accepted = await run_with_acceptance("significant", right_on_validation_only_with_demos)
    assert accepted_lead and not accepted
    with pytest.raises(ValueError, match="acceptance must be one of lead, significant"):
        pg.optimizers.RandomFewShot(acceptance="maybe")
