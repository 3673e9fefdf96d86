"""EmbedKnowledge -> UpdateKnowledge ingests; RetrieveKnowledge searches with LM-written queries (scripted LM)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import promptgym as synalinks
from promptgym.lm.json_grammar import json_schema_gbnf
from promptgym.modules.knowledge.retrieve_knowledge import MAX_QUERIES, HybridRegexSearchQuery, SearchQuery, input_text
from promptgym.optimizers.kit import trainable_prompts
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from tests.support import Answer, Document
from tests.support import Question as Query


TEXTS = {"p": "Paris is the capital of France", "b": "Berlin is the capital of Germany",
         "r": "Rome is the capital of Italy"}


async def stored_kb(tmp_path: Path) -> synalinks.KnowledgeBase:
    embedder = HashEmbeddingModel(dimensions=64)
    kb = synalinks.KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Document], embedding_model=embedder)
    inputs = synalinks.Input(data_model=Document)
    embedded = await synalinks.EmbedKnowledge(embedding_model=embedder, in_mask=["text"])(inputs)
    stored = await synalinks.UpdateKnowledge(knowledge_base=kb)(embedded)
    ingest = synalinks.Program(inputs=inputs, outputs=stored, name="ingest")
    await ingest.predict(np.array([Document(id=key, text=text) for key, text in TEXTS.items()], dtype=object))
    return kb


async def test_embed_then_update_stores_records_with_their_vectors(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)
    assert await kb.count(table_name="Document") == 3
    rows = await kb.sql("SELECT id, len(embedding) AS d FROM Document ORDER BY id")
    assert rows == [{"id": "b", "d": 64}, {"id": "p", "d": 64}, {"id": "r", "d": 64}]
    assert (await kb.similarity_search("capital of Italy Rome", table_name="Document", k=1))[0]["id"] == "r"


async def test_retrieve_knowledge_in_a_rag_program(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)

    def respond(request):
        user = last_user_json(request)
        if "result" in user:  # the answer step sees the rows retrieved
            return {"answer": user["result"][0]["text"].split()[0]}
        return {"tables": ["Document"], "search": ["capital of Germany"]}

    lm = ScriptedLanguageModel(respond=respond)
    inputs = synalinks.Input(data_model=Query)
    found = await synalinks.RetrieveKnowledge(knowledge_base=kb, language_model=lm, k=2, name="retriever")(inputs)
    answer = await synalinks.Generator(data_model=Answer, language_model=lm)(found)
    program = synalinks.Program(inputs=inputs, outputs=answer, name="rag")
    assert (await program(Query(question="Which city is Germany's capital?"))).get("answer") == "Berlin"
    retriever = program.get_module("retriever")
    value = await retriever(Query(question="Germany?"))
    assert value.get("question") == "Germany?" and value.get("search") == ["capital of Germany"]
    assert [row["id"] for row in value.get("result")][0] == "b" and len(value.get("result")) == 2


async def test_without_a_language_model_the_retriever_searches_with_the_input_itself(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)
    lm = ScriptedLanguageModel(respond=lambda request: {"answer": last_user_json(request)["result"][0]["text"][:4]})
    inputs = synalinks.Input(data_model=Query)
    found = await synalinks.RetrieveKnowledge(knowledge_base=kb, search_type="fulltext", k=1, name="retriever")(inputs)
    assert list(found.get_schema()["properties"]) == ["search", "result", "question"]
    answer = await synalinks.Generator(data_model=Answer, language_model=lm, name="answerer")(found)
    program = synalinks.Program(inputs=inputs, outputs=answer, name="rag")
    assert (await program(Query(question="capital of Italy"))).get("answer") == "Rome"
    assert len(lm.requests) == 1  # the answerer's call: nothing writes a query
    retriever = program.get_module("retriever")
    value = await retriever(Query(question="Germany capital"))
    assert value.get("search") == ["Germany capital"] and [row["id"] for row in value.get("result")] == ["b"]
    assert retriever.prompt_variable is None and retriever.trainable_variables == []
    assert [prompt.module_name for prompt in trainable_prompts(program)] == ["answerer"]
    assert await retriever(Query(question="")) is None  # an empty input searches nothing
    with pytest.raises(ValueError, match="search_type='regex' needs a language_model"):
        synalinks.RetrieveKnowledge(knowledge_base=kb, search_type="regex")
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = synalinks.Program.load(str(path)).get_module("retriever")
    assert loaded.language_model is None and loaded.search_query_generator is None
    assert [row["id"] for row in (await loaded(Query(question="France capital"))).get("result")] == ["p"]


def test_the_input_text_is_its_values_one_per_line() -> None:
    assert input_text({"question": "Where?", "hint": "", "ids": [1, 2], "none": None}) == "Where?\n[1, 2]"


async def test_the_answerer_reads_the_rows_first_and_the_question_last(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)
    seen: list[str] = []

    def respond(request):
        if "search" in (request.schema or {}).get("properties", {}):
            return {"tables": ["Document"], "search": ["capital of Italy"]}
        seen.append(request.messages[-1]["content"])
        return {"answer": "Rome"}

    lm = ScriptedLanguageModel(respond=respond)
    for return_query, keys in ((True, ["tables", "search", "result", "question"]), (False, ["result", "question"])):
        inputs = synalinks.Input(data_model=Query)
        found = await synalinks.RetrieveKnowledge(knowledge_base=kb, language_model=lm, k=1,
                                                  return_query=return_query)(inputs)
        assert list(found.get_schema()["properties"]) == keys
        answer = await synalinks.Generator(data_model=Answer, language_model=lm)(found)
        program = synalinks.Program(inputs=inputs, outputs=answer, name="rag")
        assert (await program(Query(question="Italy?"))).get("answer") == "Rome"
        assert list(json.loads(seen[-1])) == keys  # the turn the model reads: the question right before its answer


async def test_query_writing_is_trainable_and_settings_are_read_each_call(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)
    script = [{"tables": ["Document"], "search": ["capital"]}]
    lm = ScriptedLanguageModel(respond=lambda request: script[0])
    retriever = synalinks.RetrieveKnowledge(knowledge_base=kb, language_model=lm, search_type="fulltext", k=3,
                                            examples=[({"question": "q"}, {"tables": ["Document"], "search": ["s"]})])
    prompt = retriever.search_query_generator.state
    assert prompt in retriever.trainable_variables and "Document" in prompt.value["instructions"]
    assert len(prompt.value["examples"]) == 1
    assert retriever.settings not in retriever.trainable_variables
    assert len((await retriever(Query(question="capitals?"))).get("result")) == 3
    retriever.settings.assign({**retriever.settings.value, "k": 1, "search_type": "regex"})
    script[0] = {"tables": ["Document"], "search": ["^Rome"]}
    assert [row["id"] for row in (await retriever(Query(question="Rome?"))).get("result")] == ["r"]
    with pytest.raises(ValueError, match="`k` must be a positive integer"):
        retriever.settings.assign({**retriever.settings.value, "k": 0})
    with pytest.raises(ValueError, match="`k_rank` must be a positive integer, got True"):
        retriever.settings.assign({**retriever.settings.value, "k_rank": True})


async def test_retrieve_knowledge_saves_and_loads_with_its_knowledge_base(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)
    lm = ScriptedLanguageModel(responses=[{"tables": ["Document"], "search": ["Paris"]}])
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.RetrieveKnowledge(knowledge_base=kb, language_model=lm, search_type="hybrid",
                                                k=1, name="retriever")(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="retrieval")
    path = tmp_path / "program.json"
    program.save(str(path))
    kb.close()
    loaded = synalinks.Program.load(str(path))
    retriever = loaded.get_module("retriever")
    assert retriever.search_type == "hybrid_fts" and retriever.k == 1
    assert retriever.knowledge_base.sql_adapter.uri == str(tmp_path / "kb.db")


def test_bad_search_type_is_refused(tmp_path: Path) -> None:
    kb = synalinks.KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Document])
    with pytest.raises(ValueError, match="search_type"):
        synalinks.RetrieveKnowledge(knowledge_base=kb, language_model=ScriptedLanguageModel(responses=[{}]),
                                    search_type="nearest")


async def test_text2sql_runs_the_lm_select_read_only(tmp_path: Path) -> None:
    kb = await stored_kb(tmp_path)
    answers = iter([{"sql_query": "SELECT id FROM Document WHERE text LIKE '%Italy%'"},
                    {"sql_query": "DELETE FROM Document"}])
    lm = ScriptedLanguageModel(respond=lambda request: next(answers))
    module = synalinks.Text2SQL(knowledge_base=kb, language_model=lm, k=5)
    first = await module(Query(question="Which document is about Italy?"))
    assert first.get("result") == [{"id": "r"}]
    schema_shown = last_user_json(lm.requests[0])["database_schema"]
    assert "Table: Document" in schema_shown and "text (string): The content" in schema_shown
    module.k = None  # the statement as the LM wrote it: refused by the parser check, not by the LIMIT wrapper
    refused = await module(Query(question="delete everything"))
    assert "only permits SELECT" in refused.get("result")[0]["error"]
    assert await kb.count(table_name="Document") == 3


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_an_optimizer_trains_the_query_writer(tmp_path: Path) -> None:
    """The query writer finds Germany's document only once it has a demonstration: training gives it one."""
    kb = await stored_kb(tmp_path)
    countries = {"France": "Paris", "Germany": "Berlin", "Italy": "Rome"}

    def respond(request):
        user = last_user_json(request)
        if "result" in user:
            return {"answer": user["result"][0]["text"].split()[0] if user["result"] else "none"}
        country = user["question"].split()[-1].rstrip("?")
        shown = len(request.messages) > 2  # demonstrations are turns before the input
        return {"tables": ["Document"], "search": [f"capital {country}" if shown or country == "France" else "zzz"]}

    lm = ScriptedLanguageModel(respond=respond)
    inputs = synalinks.Input(data_model=Query)
    found = await synalinks.RetrieveKnowledge(knowledge_base=kb, language_model=lm, search_type="fulltext", k=1,
                                              name="retriever")(inputs)
    answer = await synalinks.Generator(data_model=Answer, language_model=lm, name="answerer")(found)
    program = synalinks.Program(inputs=inputs, outputs=answer, name="rag")
    x = np.array([Query(question=f"What is the capital of {country}?") for country in countries] * 2, dtype=object)
    y = np.array([Answer(answer=city) for city in countries.values()] * 2, dtype=object)
    program.compile(reward=synalinks.rewards.ExactMatch(), optimizer=synalinks.optimizers.RandomFewShot(nb_max_examples=1))
    before = (await program.evaluate(x, y, verbose=0))["reward"]
    await program.fit(x, y, validation_data=(x, y), epochs=2, batch_size=6, verbose=0)
    after = (await program.evaluate(x, y, verbose=0))["reward"]
    retriever = program.get_module("retriever")
    assert before == pytest.approx(1 / 3)
    assert retriever.search_query_generator.state.value["examples"], "the query writer got no demonstration"
    assert after == 1.0


@pytest.mark.parametrize("query", [SearchQuery, HybridRegexSearchQuery])
def test_the_query_writer_bounds_its_lists_so_a_small_model_cannot_list_queries_until_max_tokens(query):
    # Qwen 0.5B at temperature 0 listed "X instrument", "X instrument playing", ... until the JSON was cut, and
    # repeated it on every retry: the bound closes the list in the embedded grammar (and a server's schema)
    schema = query.get_schema()
    lists = [name for name in ("search", "patterns") if name in schema["properties"]]
    for name in lists:
        assert schema["properties"][name]["maxItems"] == MAX_QUERIES
        assert schema["properties"][name]["items"]["maxLength"] == 120
    grammar = json_schema_gbnf(json.dumps(schema))
    rule = next(line for line in grammar.splitlines() if line.startswith("search ::="))
    assert rule.count("search-item") == MAX_QUERIES and "*" not in rule
