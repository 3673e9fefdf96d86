import json

import pytest

import promptgym as pg
from promptgym.lm.errors import LMConnectionError, LMOutputError, UnknownModelError
from promptgym.lm.model_string import parse_model_string
from promptgym.lm.usage import lm_phase
from promptgym.testing import ScriptedLanguageModel
from tests.lm.fake_openai_server import FakeOpenAIServer

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
MESSAGES = [{"role": "user", "content": "q"}]


def test_model_strings():
    assert str(parse_model_string("local/smollm2-135m-instruct")) == "local/smollm2-135m-instruct"
    assert parse_model_string("text-embedding-3-small").provider == "openai"
    assert parse_model_string("ollama/llama3").provider == "ollama"
    with pytest.raises(UnknownModelError):
        parse_model_string("")


def test_unknown_local_model_lists_known_ones():
    with pytest.raises(UnknownModelError, match="known local models: .*qwen2.5-coder-0.5b-instruct"):
        pg.LanguageModel(model="local/gpt-5")


async def test_invalid_answer_is_retried_with_the_error():
    lm = ScriptedLanguageModel(responses=["not json", {"wrong": 1}, {"answer": "ok"}])
    assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "ok"}
    assert len(lm.requests) == 3
    assert "invalid" in lm.requests[2].messages[-1]["content"]
    assert "at answer: Field required" in lm.requests[2].messages[-1]["content"]


async def test_gives_up_after_output_retries():
    lm = ScriptedLanguageModel(responses=["nope"], output_retries=1)
    with pytest.raises(LMOutputError, match="no valid answer after 2 attempts"):
        await lm(MESSAGES, schema=SCHEMA)
    assert lm.usage.total().failures == 1


async def test_cache_hits_at_temperature_zero_only():
    lm = ScriptedLanguageModel(responses=[{"answer": "a"}], cache=True)
    await lm(MESSAGES, schema=SCHEMA)
    await lm(MESSAGES, schema=SCHEMA)
    assert len(lm.requests) == 1
    assert lm.usage.total().cache_hits == 1
    await lm(MESSAGES, schema=SCHEMA, temperature=0.7)
    await lm(MESSAGES, schema=SCHEMA, temperature=0.7)
    assert len(lm.requests) == 3


async def test_usage_is_counted_per_phase():
    lm = ScriptedLanguageModel(responses=[{"answer": "a"}])
    await lm(MESSAGES, schema=SCHEMA)
    with lm_phase("reward"):
        await lm(MESSAGES, schema=SCHEMA)
        await lm(MESSAGES, schema=SCHEMA)
    assert lm.usage.by_phase["inference"].calls == 1
    assert lm.usage.by_phase["reward"].calls == 2
    assert lm.usage.total().completion_tokens == 6  # two words of JSON per answer


async def test_openai_engine_falls_back_when_json_schema_is_refused():
    with FakeOpenAIServer(lambda body: json.dumps({"answer": "42"}), refuse_json_schema=True) as server:
        lm = pg.LanguageModel(model="openai/test", api_base=server.url, cache=False)
        assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "42"}
        assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "42"}
    formats = [request.get("response_format", {}).get("type") for request in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # the working mode is remembered
    assert server.requests[1]["response_format"]["schema"] == SCHEMA


async def test_openai_engine_validates_and_retries_when_the_server_ignores_the_schema():
    answers = iter(["Sure! The answer is 42.", 'Here: {"answer": "42"}'])
    with FakeOpenAIServer(lambda body: next(answers)) as server:
        lm = pg.LanguageModel(model="openai/test", api_base=server.url, cache=False)
        assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "42"}
    assert len(server.requests) == 2


async def test_openai_engine_retries_5xx_then_succeeds():
    with FakeOpenAIServer(lambda body: json.dumps({"answer": "x"}), failures_before_success=2) as server:
        lm = pg.LanguageModel(model="openai/test", api_base=server.url, cache=False, retries=3)
        lm.engine.backoff_s = 0.01
        assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "x"}
    assert len(server.requests) == 3


async def test_unreachable_server_names_the_url():
    lm = pg.LanguageModel(model="openai/test", api_base="http://127.0.0.1:9/v1", cache=False, retries=1)
    lm.engine.backoff_s = 0.01
    with pytest.raises(LMConnectionError, match=r"http://127.0.0.1:9/v1/chat/completions unreachable after 2 attempts"):
        await lm(MESSAGES, schema=SCHEMA)


async def test_openai_embeddings():
    with FakeOpenAIServer(lambda body: "") as server:
        em = pg.EmbeddingModel(model="openai/emb", api_base=server.url)
        vectors = await em(["a", "abc", "a"])
    assert vectors.shape == (3, 2)
    assert vectors[0].tolist() == pytest.approx(vectors[2].tolist())
    assert len(server.requests) == 1 and server.requests[0]["input"] == ["a", "abc"]
    # what the server said the call used: its input tokens (one per character here) and cached ones
    assert (em.cumulated_calls, em.cumulated_prompt_tokens, em.cumulated_cached_tokens) == (1, 4, 1)
    assert em.last_call_vectors == 2 and em.last_call_elapsed_s > 0
    await em(["abc"])  # from memory: a cache hit (not a model call); its vector counts as returned, and its
    # tokens as if it were made (estimated: 1), so a rerun from the cache reports the same tokens (docs/cost.md)
    assert (em.cumulated_calls, em.cumulated_cache_hits, em.cumulated_vectors, em.cumulated_prompt_tokens) == (1, 1, 3, 5)


def test_defaults_say_which_call_to_make():
    with pytest.raises(ValueError, match=r"set_default_language_model\('local/"):
        pg.get_default_language_model("OMEGA")
    lm = pg.set_default_language_model("local/smollm2-135m-instruct")
    assert pg.get_default_language_model() is lm
    with pytest.raises(ValueError, match=r"^Retriever needs an embedding model: pass embedding_model=\.\.\., or call "
                                         r"promptgym\.set_default_embedding_model\('local/multilingual-e5-small'\) first$"):
        pg.get_default_embedding_model("Retriever")
    em = pg.EmbeddingModel(model="ollama/nomic-embed-text")
    assert pg.set_default_embedding_model(em) is em and pg.get_default_embedding_model() is em
    assert pg.config.default_embedding_model() is em and pg.config.default_language_model() is lm


def test_answers_cut_off_by_max_tokens_are_closed():
    from promptgym.lm.json_output import close_truncated_json, parse_json_object

    assert parse_json_object('{"new_instructions": "3.00, 4.00, 5.0') == {"new_instructions": "3.00, 4.00, 5.0"}
    assert parse_json_object('{"a": ["x", "y') == {"a": ["x", "y"]}
    assert parse_json_object('{"a": {"b": 1},') == {"a": {"b": 1}}
    assert close_truncated_json('{"a": "done"}') is None
    with pytest.raises(LMOutputError):
        parse_json_object('{"a": ')


async def test_raw_newlines_inside_a_string_are_read_not_refused():
    # The first embedded soak's 502s: the 135M model's answers, word for word (three times each at temperature 0).
    cut = '{ "answer": "108 }\n\nThis is a JSON string that contains a nested JSON object with the question'
    stopped = '{ "answer": "100 }\n\nThis is a JSON object with the following structure:\n{\n  " }'
    lm = ScriptedLanguageModel(responses=[cut, stopped], output_retries=0)
    assert (await lm(MESSAGES, schema=SCHEMA))["answer"].startswith("108 }\n\nThis is a JSON string")
    assert await lm(MESSAGES, schema=SCHEMA) == {"answer": "100 }\n\nThis is a JSON object with the following structure:\n{\n  "}
    assert len(lm.requests) == 2  # each read at the first attempt
