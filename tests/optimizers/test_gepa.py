"""GEPA with the scripted model: acceptance, exact budget, failures, resume, guard rails."""

from __future__ import annotations

import logging

import pytest

import promptgym as pg
from promptgym.optimizers import GEPA
from promptgym.optimizers.proposals import degenerate_reason
from promptgym.traces import TraceStore
from tests.optimizers.prompt_search_support import (
    GOOD,
    context,
    data,
    events,
    one_epoch,
    program_for,
    task_lm,
    task_requests,
)


async def run_search(optimizer: GEPA, ctx, steps: int = 3) -> None:
    await one_epoch(optimizer, ctx, steps, batch_size=2)


async def test_reflection_improves_and_child_joins_pool_and_becomes_best():
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=40, reflection_minibatch_size=2, seed=0)
    ctx = context(program, optimizer)
    await run_search(optimizer, ctx)
    best = optimizer.best
    assert best.variables["qa/state"]["instructions"] == GOOD
    assert best.parent == 0 and best.origin == "reflection"
    assert best.mean("val") == 1.0 and optimizer.candidates[0].mean("val") == 0.0
    assert optimizer.pool[:2] == [0, best.id]
    kinds = events(ctx).kinds()
    assert "candidate_added" in kinds and "candidate_accepted" in kinds
    # the reflection model read inputs, outputs, score and feedback
    reflection = next(r for r in lm.requests if "new_instructions" in r.schema["properties"])
    prompt = reflection.messages[0]["content"]
    assert "Answer the question." in prompt and "Score: 0.00" in prompt and "expected 'Q" in prompt
    assert reflection.schema["properties"]["new_instructions"]["maxLength"] == 1000


async def test_child_not_better_on_the_minibatch_is_rejected_without_validation():
    lm = task_lm(proposal="Answer the question carefully and in lower case.")
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=30, reflection_minibatch_size=2, seed=0)
    ctx = context(program, optimizer)
    await run_search(optimizer, ctx, steps=1)
    child = optimizer.candidates[1]
    assert child.origin == "reflection" and optimizer.pool == [0] and optimizer.best_id == 0
    assert "val" not in child.scores and len(child.scores["train"]) == 2
    assert "candidate_rejected" in events(ctx).kinds()


@pytest.mark.parametrize("budget", [4, 5, 7, 8, 9, 13, 17, 25, 40])
async def test_budget_counts_every_new_rollout_exactly_and_is_never_exceeded(budget):
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=budget, reflection_minibatch_size=2, seed=1, skip_perfect_score=False)
    ctx = context(program, optimizer)
    await run_search(optimizer, ctx)
    assert optimizer.metric_calls == task_requests(lm)  # one task LM call per new rollout, none for memoised ones
    assert optimizer.metric_calls <= budget
    # it stopped because the next worst case (2 + 2 + 4) didn't fit, or proposals went idle (all known)
    assert (optimizer.exhausted and budget - optimizer.metric_calls < 2 + 2 + 4) or optimizer.rejected_proposals > 0


async def test_memoised_rollouts_are_free():
    lm = task_lm(proposal="This proposal is degenerate? no, but it stays in lower case always.")
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=100, reflection_minibatch_size=6, seed=0)
    ctx = context(program, optimizer)
    await optimizer.on_train_begin(ctx)
    assert optimizer.metric_calls == 4  # the starting program on 4 validation examples
    await optimizer.reflective_mutation(ctx)
    spent = optimizer.metric_calls
    assert spent == 4 + 6 + 6  # parent minibatch + rejected child minibatch
    before = task_requests(lm)
    await optimizer.reflective_mutation(ctx)  # same full-train minibatch: the parent run is memoised
    assert task_requests(lm) == before  # the child is known: rejected before its rollout
    assert optimizer.metric_calls == spent


async def test_budget_plan_is_logged_and_warns_when_it_buys_fewer_than_three(caplog):
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=12, reflection_minibatch_size=2, seed=0)
    ctx = context(program, optimizer)
    with caplog.at_level(logging.INFO, logger="promptgym"):
        await optimizer.on_train_begin(ctx)
    assert optimizer.planned_proposals == 2  # (12 - 4 validation) // (2 + 2)
    assert any("buys only 2 proposal" in r.message and r.levelno == logging.WARNING for r in caplog.records)
    assert events(ctx).events[0]["event"] == "budget_plan"


async def test_reflection_failures_are_skipped_not_fatal():
    lm = task_lm(fail_proposals=True)
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=30, reflection_minibatch_size=2, seed=0)
    ctx = context(program, optimizer)
    await run_search(optimizer, ctx)
    assert optimizer.proposal_failures >= 1 and len(optimizer.candidates) == 1
    assert "proposal_failed" in events(ctx).kinds()
    assert optimizer.metric_calls <= 30


@pytest.mark.parametrize("proposal", ["", "answer the question.", "Q0 WORD", "go go go go go go go go go go go go go go"])
async def test_degenerate_proposals_are_rejected_before_any_rollout(proposal):
    lm = task_lm(proposal=proposal)
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=30, reflection_minibatch_size=2, seed=0, min_instruction_length=1)
    ctx = context(program, optimizer)
    await optimizer.on_train_begin(ctx)
    await optimizer.reflective_mutation(ctx)
    assert len(optimizer.candidates) == 1
    assert optimizer.rejected_proposals + optimizer.proposal_failures == 1  # "" fails the schema's minLength
    assert optimizer.metric_calls == 4 + 2  # validation of the start + parent minibatch only


def test_degenerate_reason_accepts_a_real_rewrite():
    assert degenerate_reason(GOOD, "Answer the question.", {"q0 word"}) is None
    assert degenerate_reason("Line one here.\nSame line\nSame line\nSame line", "x") is not None


async def test_state_round_trip_resumes_the_search(tmp_path):
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=40, reflection_minibatch_size=2, seed=0)
    ctx = context(program, optimizer)
    ctx.steps = 3  # 6 training examples in batches of 2
    await optimizer.on_train_begin(ctx)
    await optimizer.on_epoch_begin(ctx, 0)
    await optimizer.train_step(ctx, [0, 1])
    state = optimizer.get_state()
    import json

    state = json.loads(json.dumps(state))  # what program.save() stores
    restored = GEPA.from_config(optimizer.get_config())
    restored.set_state(state)
    assert restored.metric_calls == optimizer.metric_calls and restored.pool == optimizer.pool
    assert [c.as_dict() for c in restored.candidates] == optimizer.export_candidates()
    assert restored._order == optimizer._order and restored._position == optimizer._position
    ctx2 = context(program, restored)
    await restored.on_train_begin(ctx2)  # does not re-score the start
    assert restored.metric_calls == optimizer.metric_calls
    await restored.on_epoch_begin(ctx2, 0)
    ctx2.steps, ctx2.step = 3, 1
    await restored.train_step(ctx2, [2, 3])
    assert restored.metric_calls <= 40
    new_program = await program_for(task_lm())
    restored.load_candidate(new_program, restored.best_id)
    assert new_program.get_variables()["qa/state"]["instructions"] == restored.best.variables["qa/state"]["instructions"]


async def test_optimize_examples_round_robin_uses_the_demo_pool():
    lm = task_lm(proposal="Answer the question carefully and in lower case.")
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=60, reflection_minibatch_size=2, seed=0, optimize_examples=True,
                     candidate_selection="best")
    ctx = context(program, optimizer)
    await run_search(optimizer, ctx, steps=3)
    origins = {c.origin for c in optimizer.candidates}
    assert "examples" in origins  # second component of the round-robin: few-shot examples from labels


async def test_merge_combines_two_pool_candidates_sharing_an_ancestor():
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=200, seed=0, use_merge=True)
    ctx = context(program, optimizer)
    await optimizer.on_train_begin(ctx)
    base = optimizer.candidates[0].variables
    a = optimizer.add_candidate({"qa/state": {**base["qa/state"], "instructions": GOOD}}, parent=0)
    b = optimizer.add_candidate({"qa/state": {**base["qa/state"], "examples": [
        {"inputs": {"question": "x"}, "outputs": {"answer": "X"}}]}}, parent=0)
    for cand in (a, b):
        await optimizer.add_to_pool(ctx, cand, "val", [0, 1, 2, 3], reason="test")
    # give b a unique win so both stay on the front
    b.scores["val"]["0"] = 2.0
    optimizer.merges_due = 1
    before = optimizer.metric_calls
    assert await optimizer.merge(ctx)
    merged = optimizer.candidates[-1]
    assert merged.origin.startswith("merge:")
    assert merged.variables["qa/state"]["instructions"] == GOOD and merged.variables["qa/state"]["examples"]
    assert optimizer.metric_calls - before == 4  # subsample of 3, then the 1 remaining validation example


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_fit_runs_the_whole_budget_in_one_epoch_and_saves_state(tmp_path):
    lm = task_lm()
    pg.set_default_language_model(lm)
    program = await program_for(lm)
    program.compile(reward="exactmatch", optimizer=pg.optimizers.get({"class_name": "GEPA", "config": {
        "max_metric_calls": 30, "reflection_minibatch_size": 2, "seed": 0}}))
    x, y = data(8)
    xv, yv = data(4, start=50)
    history = await program.fit(x, y, validation_data=(xv, yv), epochs=1, batch_size=4, verbose=0)
    optimizer = program.training_setup.optimizer
    assert 4 + 4 + 4 <= optimizer.metric_calls <= 30  # start, one minibatch pair, child validation
    assert history.history["val_reward"][-1] == 1.0
    # Every call is in the History, the starting program's validation (made before the first epoch) too,
    # and fit() runs nothing outside the budget: rollouts are exactly GEPA's metric calls.
    assert sum(history.history["lm_calls"]) == len(lm.requests)
    assert task_requests(lm) == optimizer.metric_calls
    assert program.get_variables()["qa/state"]["instructions"] == GOOD
    path = tmp_path / "p.json"
    program.save(str(path))
    loaded = pg.Program.load(str(path))
    again = loaded.training_setup.optimizer
    assert isinstance(again, GEPA) and again.metric_calls == optimizer.metric_calls
    assert len(again.export_candidates()) == len(optimizer.candidates)


def test_string_names_resolve():
    assert isinstance(pg.optimizers.get("gepa"), GEPA)
    with pytest.raises(ValueError, match="max_metric_calls"):
        GEPA(max_metric_calls=0)


async def test_optimize_examples_starts_with_every_training_label_without_a_call():
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=1, optimize_examples=True, seed=0)  # too small to score anything
    ctx = context(program, optimizer)
    await optimizer.on_train_begin(ctx)
    assert lm.requests == []
    demos = optimizer.demos.pool.for_module("qa")
    assert len(demos) == ctx.rollouts.size("train") and all(d.labeled and d.outputs["answer"].isupper() for d in demos)


async def test_reviewers_comments_from_a_trace_store_reach_the_reflection(tmp_path):
    store = TraceStore(tmp_path / "traces.db")
    for index in range(6):  # every training question was served, and reviewers commented on it
        trace_id = store.record(program="qa_program", inputs={"question": f"q{index} word"}, outputs={"answer": "x"})
        store.add_feedback(trace_id, comment=f"shout it back, reviewer {index}")
    store.add_feedback(store.record(program="other", inputs={"question": "q0 word"}), comment="not this program")
    lm = task_lm()
    program = await program_for(lm)
    optimizer = GEPA(max_metric_calls=40, reflection_minibatch_size=2, seed=0, comments=str(tmp_path))
    await run_search(optimizer, context(program, optimizer))
    reflection = next(r for r in lm.requests if "new_instructions" in r.schema["properties"])
    prompt = reflection.messages[0]["content"]
    assert prompt.count("A reviewer of this answer in production wrote: shout it back, reviewer") == 2
    assert "not this program" not in prompt
    assert optimizer.get_config()["comments"] == str(tmp_path)
