import pytest

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.core.serialization import (
    deserialize_object,
    register_synalinks_serializable,
    resolve,
    serialize_object,
    with_objects,
)
from promptgym.metrics import PassAtK
from promptgym.rewards import ExactMatch


def test_registered_function_round_trips():
    @register_synalinks_serializable()
    async def my_reward_fn(y_true, y_pred):
        return 1.0

    data = serialize_object(my_reward_fn)
    assert data == {"function": "Custom>my_reward_fn"}
    assert deserialize_object(data) is my_reward_fn


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError, match="unknown object 'Nope'.*Registered names"):
        resolve("Nope")


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = atomic_write_json(tmp_path / "a" / "x.json", {"a": 1})
    assert read_json(target) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_read_json_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "a": }')
    with pytest.raises(ValueError, match=r"bad.json: line 2"):
        read_json(bad)


def test_with_objects_rebuilds_only_serialized_entries():
    reward = ExactMatch()
    config = {"k": 3, "reward": serialize_object(reward), "other": None}
    rebuilt = with_objects(config, reward="reward", other="reward", absent="reward")
    assert type(rebuilt["reward"]) is ExactMatch and rebuilt["k"] == 3 and rebuilt["other"] is None
    assert "absent" not in rebuilt and isinstance(config["reward"], dict)  # the input is not changed
    assert with_objects({"reward": reward}, reward="reward")["reward"] is reward
    with pytest.raises(ValueError, match="unknown reward 'Nope'"):
        with_objects({"reward": {"class_name": "Nope", "config": {}}}, reward="reward")


def test_a_sampled_metric_round_trips_its_reward():
    metric = PassAtK(k=2, reward=ExactMatch())
    again = PassAtK.from_config(metric.get_config())
    assert again.k == 2 and type(again.reward) is ExactMatch


def test_model_packages_get_serialize_deserialize():
    import promptgym

    for package, cls in ((promptgym.language_models, promptgym.LanguageModel),
                         (promptgym.embedding_models, promptgym.EmbeddingModel)):
        model = package.get("ollama/some-model")
        assert type(model) is cls and package.get(model) is model
        again = package.deserialize(package.serialize(model))
        assert type(again) is cls and again.model == "ollama/some-model"
        with pytest.raises(TypeError, match=f"is an? {cls.__name__}, a model string or a config dict, got 3"):
            package.get(3)


def test_deserialize_with_custom_objects_only_for_that_call():
    import promptgym

    class MyReward(ExactMatch):
        pass

    data = {"class_name": "MyRewardForTheScope", "config": ExactMatch().get_config()}
    assert type(promptgym.rewards.deserialize(data, {"MyRewardForTheScope": MyReward})) is MyReward
    with pytest.raises(ValueError, match="unknown reward 'MyRewardForTheScope'"):
        promptgym.rewards.deserialize(data)
