import pytest

import promptgym as pg
from promptgym import metrics, rewards
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel
from tests.support import Answer


class Full(pg.DataModel):
    thinking: str = pg.Field(description="t")
    answer: str = pg.Field(description="a")


async def test_exact_match_with_masks_and_feedback():
    reward = rewards.ExactMatch(in_mask=["answer"])
    result = await reward.score(Full(thinking="x", answer="Paris"), Full(thinking="y", answer=" Paris "))
    assert result.score == 1.0
    wrong = await reward.score(Full(thinking="x", answer="Paris"), Full(thinking="x", answer="Lyon"))
    assert wrong.score == 0.0 and "answer: expected 'Paris', got 'Lyon'" in wrong.feedback
    assert await rewards.ExactMatch(out_mask=["thinking"])(Full(thinking="a", answer="b"), Full(thinking="c", answer="b")) == 1.0
    assert await reward(Full(thinking="a", answer="b"), None) == 0.0


async def test_cosine_similarity_uses_the_embedding_model():
    reward = rewards.CosineSimilarity(embedding_model=HashEmbeddingModel(), in_mask=["answer"])
    same = await reward(Answer(answer="the cat sat"), Answer(answer="the cat sat"))
    different = await reward(Answer(answer="the cat sat"), Answer(answer="quantum chromodynamics"))
    assert same == pytest.approx(1.0) and different < 0.5


async def test_lm_as_judge_parses_the_verdict_in_the_reward_phase():
    judge = ScriptedLanguageModel(responses=[{"critique": "close", "reward": 0.7}])
    reward = rewards.LMAsJudge(language_model=judge, criteria="accuracy")
    result = await reward.score(Answer(answer="a"), Answer(answer="b"))
    assert (result.score, result.feedback) == (0.7, "close")
    assert "accuracy" in judge.requests[0].messages[0]["content"]


async def test_program_as_judge():
    class Pair(pg.DataModel):
        ground_truth: str
        prediction: str

    class Verdict(pg.DataModel):
        reward: float

    judge_lm = ScriptedLanguageModel(respond=lambda r: {"reward": 1.0 if '\\"b\\"' in r.messages[-1]["content"] else 0.0})
    inputs = pg.Input(data_model=Pair)
    judge = pg.Program(inputs=inputs, outputs=await pg.Generator(data_model=Verdict, language_model=judge_lm)(inputs))
    reward = rewards.ProgramAsJudge(program=judge)
    assert await reward(Answer(answer="b"), Answer(answer="b")) == 1.0


async def test_mean_reward_wrapper_with_registered_async_function():
    @pg.saving.register_synalinks_serializable()
    async def word_overlap(y_true, y_pred):
        true_words = set(y_true.get("answer").lower().split())
        return len(true_words & set(y_pred.get("answer").lower().split())) / len(true_words)

    reward = rewards.MeanRewardWrapper(fn=word_overlap)
    assert await reward(Answer(answer="red fox"), Answer(answer="a red dog")) == 0.5
    rebuilt = rewards.get(pg.saving.serialize_object(reward))
    assert rebuilt.fn is word_overlap


async def test_token_metrics():
    y_true, y_pred = Answer(answer="quick red fox"), Answer(answer="the red fox jumps high")  # "the" is not a word
    assert await metrics.Precision()(y_true, y_pred) == pytest.approx(2 / 4)
    assert await metrics.Recall()(y_true, y_pred) == pytest.approx(2 / 3)
    assert await metrics.F1Score()(y_true, y_pred) == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))


def test_identifiers_are_case_insensitive_and_list_choices():
    assert isinstance(rewards.get("ExactMatch"), rewards.ExactMatch)
    assert isinstance(metrics.get({"class_name": "Mean", "config": {}}), metrics.Mean)
    assert isinstance(pg.optimizers.get("random_few_shot"), pg.optimizers.RandomFewShot)
    assert isinstance(pg.optimizers.get("GreedyOptimizer"), pg.optimizers.GreedyOptimizer)
    with pytest.raises(ValueError, match="unknown reward 'exact'; valid names: .*exactmatch"):
        rewards.get("exact")


def test_string_rewards_that_need_a_model_say_which_default_to_set():
    with pytest.raises(ValueError, match="set_default_embedding_model"):
        rewards.get("cosinesimilarity")
    pg.set_default_embedding_model(HashEmbeddingModel())
    assert isinstance(rewards.get("cosinesimilarity"), rewards.CosineSimilarity)
