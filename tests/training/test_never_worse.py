"""fit() never returns a program worse on validation than the one it started from, and says what it compared."""

import json
import warnings

import numpy as np
import pytest

import promptgym as pg
from promptgym.optimizers.base import Optimizer
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from promptgym.training.fit import UncheckedTrainingWarning
from tests.support import Answer, EventRecorder, functional_program, labelled, questions


class BlindlyAccepts(Optimizer):
    """A defective optimizer: accepts whatever instructions it was given, without any evidence."""

    def __init__(self, instructions):
        super().__init__()
        self.instructions = instructions

    async def train_step(self, ctx, batch):
        if self.best.id == self.start.id and len(self.candidates) == 1:
            variables = {name: {**value, "instructions": self.instructions} for name, value in self.best.variables.items()}
            await self.accept(ctx, self.add_candidate(variables, parent=self.best.id, origin="blind"), reason="blind")
        return {}


def upper_unless_told_to_shout(request):
    """Right (the question upper-cased) unless the system prompt says SHOUT, then always 'NO'."""
    question = last_user_json(request)["question"]
    return {"answer": "NO" if "SHOUT" in request.messages[0]["content"] else question.upper()}


async def test_a_candidate_worse_on_validation_is_dropped_for_the_start_with_the_evidence():
    lm = ScriptedLanguageModel(respond=upper_unless_told_to_shout)
    program = await functional_program(lm)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=BlindlyAccepts("SHOUT"))
    x, y = labelled("a", "b", "c", "d")
    x_val, y_val = labelled("e", "f", "g", "h", "i")
    recorder = EventRecorder()
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=4, verbose=0,
                                callbacks=[recorder])
    assert "SHOUT" not in json.dumps(program.get_variables())
    assert history.history["val_reward"] == [1.0]
    [rejected] = [e for e in recorder.of("candidate_rejected") if e["comparison"]]
    comparison = rejected["comparison"]
    assert comparison["accepted"] is False and comparison["candidate"] == 1 and comparison["incumbent"] == 0
    assert comparison["candidate_score"]["mean"] == 0.0 and comparison["incumbent_score"]["mean"] == 1.0
    assert comparison["candidate_score"]["n"] == 5 and comparison["candidate_score"]["high"] < 1.0
    assert comparison["test"]["losses"] == 5 and comparison["test"]["p_value"] < 0.1
    assert "worse than the start on validation" in rejected["reason"]
    assert history.comparisons == [comparison]
    assert program.training_setup.optimizer.best_id == 0


async def test_a_candidate_better_on_validation_is_kept_with_the_evidence():
    def right_only_when_told(request):
        question = last_user_json(request)["question"]
        return {"answer": question.upper() if "UPPER" in request.messages[0]["content"] else question}

    program = await functional_program(ScriptedLanguageModel(respond=right_only_when_told))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=BlindlyAccepts("UPPER"))
    x, y = labelled("a", "b")
    x_val, y_val = labelled("e", "f", "g")
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=2, batch_size=2, verbose=0)
    assert "UPPER" in json.dumps(program.get_variables())
    [comparison] = history.comparisons  # checked once: the second epoch has nothing new to say
    assert comparison["accepted"] and comparison["test"]["wins"] == 3 and comparison["stage"] is None


async def test_knn_retrieval_that_hurts_is_raced_against_the_start_and_a_fixed_set_and_loses():
    def misled_by_demonstrations(request):
        """Right with no demonstration; with some, repeats the last one's answer (wrong for a new input)."""
        shown = [json.loads(m["content"]) for m in request.messages[1:-1] if m["role"] == "assistant"]
        return shown[-1] if shown else {"answer": last_user_json(request)["question"].upper()}

    lm = ScriptedLanguageModel(respond=misled_by_demonstrations)
    program = await functional_program(lm)
    optimizer = pg.optimizers.KNNFewShot(k=2, embedding_model=HashEmbeddingModel(dimensions=64))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = labelled("apple", "banana", "cherry", "plum")
    x_val, y_val = labelled("kiwi", "lime", "mango")
    recorder = EventRecorder()
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=4, verbose=0,
                                callbacks=[recorder])
    state = next(iter(program.get_variables().values()))
    assert state.get("retrieval") is None and state["examples"] == []
    rejected = recorder.of("candidate_rejected")
    assert sorted(optimizer.get_candidate(e["candidate"]).origin for e in rejected) == ["fixed_few_shot",
                                                                                          "knn_few_shot"]
    assert all(e["comparison"]["incumbent_score"]["mean"] == 1.0 for e in rejected)
    assert all(e["comparison"]["candidate_score"]["mean"] == 0.0 for e in rejected)
    assert [c["accepted"] for c in history.comparisons] == [False, False]
    assert history.history["val_reward"] == [1.0]


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_knn_retrieval_that_helps_is_kept():
    def copies_nearest(request):
        shown = [json.loads(m["content"]) for m in request.messages[1:-1] if m["role"] == "assistant"]
        return shown[-1] if shown else {"answer": "?"}

    program = await functional_program(ScriptedLanguageModel(respond=copies_nearest))
    program.compile(reward=pg.rewards.ExactMatch(),
                    optimizer=pg.optimizers.KNNFewShot(k=1, embedding_model=HashEmbeddingModel(dimensions=256)))
    x, y = questions("red apple", "green apple", "old car", "new car"), \
        np.array([Answer(answer=a) for a in ("FRUIT", "FRUIT", "CAR", "CAR")], dtype=object)
    x_val = questions("apple", "car")
    y_val = np.array([Answer(answer="FRUIT"), Answer(answer="CAR")], dtype=object)
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=4, verbose=0)
    assert next(iter(program.get_variables().values()))["retrieval"]["k"] == 1
    assert any(c["accepted"] for c in history.comparisons)


async def test_without_validation_data_fit_warns_once_and_says_what_to_pass():
    program = await functional_program(ScriptedLanguageModel(respond=upper_unless_told_to_shout))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=BlindlyAccepts("SHOUT"))
    x, y = labelled("a", "b", "c")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await program.fit(x, y, validation_split=0.0, epochs=3, batch_size=3, verbose=0)
    unchecked = [w for w in caught if issubclass(w.category, UncheckedTrainingWarning)]
    assert len(unchecked) == 1
    assert "validation_data=(x_val, y_val)" in str(unchecked[0].message)
    assert "validation_split=0.2" in str(unchecked[0].message)
    assert "SHOUT" in json.dumps(program.get_variables())  # nothing to check with: the optimizer's choice stands


def test_the_comparison_rides_on_the_events_record():
    event = pg.core.events.CandidateRejected(candidate=2, parent=0, reason="r", comparison={"accepted": False})
    assert pg.core.events.from_record(pg.core.events.as_record(event)) == event


@pytest.mark.parametrize("bad", [None])
def test_an_old_event_record_without_a_comparison_still_reads(bad):
    record = {"event": "candidate_accepted", "candidate": 1, "parent": 0, "reason": "ahead"}
    assert pg.core.events.from_record(record)["comparison"] is bad
