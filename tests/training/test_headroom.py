"""The headroom check: perfect start, invalid output, weak instruction writers."""

import numpy as np

import promptgym as pg
from promptgym.testing import ScriptedLanguageModel, last_user_json
from promptgym.training.headroom import check_headroom, headroom_warnings, instruction_writer
from tests.support import Answer, Question, questions


def kinds(warnings):
    return [warning.kind for warning in warnings]


def test_a_perfect_start_and_frequent_failures_are_named():
    perfect = headroom_warnings([1.0] * 10, failures=0)
    assert kinds(perfect) == ["perfect"] and "10/10" in perfect[0].message and "72%" in perfect[0].message
    assert headroom_warnings([1.0] * 9 + [0.0], failures=0) == []
    broken = headroom_warnings([0.0] * 3 + [1.0] * 7, failures=3)
    assert kinds(broken) == ["invalid_output"] and "3 of 10" in broken[0].message
    assert headroom_warnings([], failures=0) == []


def test_weak_instruction_writers_only_for_instruction_only_optimizers():
    lm = pg.LanguageModel(model="local/qwen2.5-coder-0.5b-instruct")
    gepa = pg.optimizers.GEPA(reflection_language_model=lm)
    warning = headroom_warnings([0.5], failures=0, optimizer=gepa)
    assert kinds(warning) == ["weak_instruction_writer"] and "qwen2.5-coder-1.5b" in warning[0].message
    assert instruction_writer(pg.optimizers.GEPA(reflection_language_model=lm, optimize_examples=True)) is None
    assert instruction_writer(pg.optimizers.RandomFewShot()) is None
    assert instruction_writer(pg.optimizers.GEPA(), program_model=lm) == "local/qwen2.5-coder-0.5b-instruct"
    strong = pg.LanguageModel(model="local/qwen2.5-coder-1.5b-instruct")
    assert headroom_warnings([0.5], failures=0, optimizer=pg.optimizers.GEPA(reflection_language_model=strong)) == []


async def test_check_headroom_scores_one_sample_of_the_starting_program():
    def upper_or_nothing(request):
        question = last_user_json(request)["question"]
        return {"answer": question.upper()} if question != "bad" else {"wrong_field": 1}

    lm = ScriptedLanguageModel(respond=upper_or_nothing)
    program = pg.Sequential([pg.Input(data_model=Question), pg.Generator(data_model=Answer, language_model=lm)])
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]), optimizer=pg.optimizers.RandomFewShot())
    x = questions("a", "b", "c", "d", "e")
    y = np.array([Answer(answer=q.upper()) for q in "abcde"], dtype=object)
    evaluation, warnings = await check_headroom(program, x, y, size=4)
    assert evaluation.n == 4 and len(lm.requests) == 4 and kinds(warnings) == ["perfect"]
    x_bad = questions("bad", "bad", "c", "d")
    evaluation, warnings = await check_headroom(program, x_bad, y[:4], size=4)
    assert evaluation.failures == (0, 1) and kinds(warnings) == ["invalid_output"]


async def test_fit_with_verbose_checks_one_minibatch_through_the_budget(capsys):
    lm = ScriptedLanguageModel(respond=lambda request: {"answer": last_user_json(request)["question"].upper()})
    program = pg.Sequential([pg.Input(data_model=Question), pg.Generator(data_model=Answer, language_model=lm)])
    optimizer = pg.optimizers.RandomFewShot(max_metric_calls=6)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    x = questions(*"abcdefgh")
    y = np.array([Answer(answer=q.upper()) for q in "abcdefgh"], dtype=object)
    await program.fit(x[:4], y[:4], validation_data=(x[4:], y[4:]), epochs=1, batch_size=4, minibatch_size=3,
                      validation_freq=2, verbose=1)
    assert "already scores 3/3 on the validation sample" in capsys.readouterr().err
    assert optimizer.candidates[0].scores["val"] == {"0": 1.0, "1": 1.0, "2": 1.0}
    assert 3 < optimizer.metric_calls <= 6 and len(optimizer.candidates) == 2  # the rest of the budget raced one
    quiet = pg.optimizers.RandomFewShot(max_metric_calls=3)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]), optimizer=quiet)
    await program.fit(x[:4], y[:4], validation_data=(x[4:], y[4:]), epochs=1, batch_size=4, minibatch_size=3,
                      validation_freq=2, verbose=0)
    assert "validation sample" not in capsys.readouterr().err
