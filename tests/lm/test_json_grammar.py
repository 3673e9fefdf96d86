"""The embedded engine's grammar: JSON strings without raw control characters (llama.cpp's converter allows them)."""

from __future__ import annotations

import json

import pytest

from promptgym.lm.json_grammar import json_schema_gbnf

llama_cpp = pytest.importorskip("llama_cpp")

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 3},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["answer"]}


def test_strings_exclude_control_characters_and_the_grammar_compiles():
    loose = llama_cpp.llama_grammar.json_schema_to_gbnf(json.dumps(SCHEMA))
    assert 'char ::= [^"\\\\] |' in loose  # the converter's rule: a raw newline inside a string is allowed
    strict = json_schema_gbnf(json.dumps(SCHEMA))
    char_rules = [line for line in strict.splitlines() if line.startswith("char")]
    assert char_rules == ['char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] '
                          '[0-9a-fA-F] [0-9a-fA-F])']
    others = [line for line in strict.splitlines() if not line.startswith("char")]
    assert others == [line for line in loose.splitlines() if not line.startswith("char")]  # nothing else changes
    llama_cpp.LlamaGrammar.from_string(strict, verbose=False)  # llama.cpp parses it


def test_the_embedded_engine_compiles_its_grammar_from_the_strict_rule(monkeypatch):
    from promptgym.lm.local_engine import LlamaCppEngine

    compiled: list[str] = []
    def from_string(cls: type, text: str, verbose: bool = True) -> str:
        compiled.append(text)
        return text

    monkeypatch.setattr(llama_cpp.LlamaGrammar, "from_string", classmethod(from_string))
    engine = LlamaCppEngine("unused.gguf")
    assert engine._grammar(SCHEMA) == engine._grammar(dict(reversed(SCHEMA.items())))  # one compile per schema
    assert len(compiled) == 1 and "\\x00-\\x1F" in compiled[0]


def test_the_grammar_cache_is_bounded_and_keeps_the_most_recent(monkeypatch):
    from promptgym.lm import local_engine

    compiled: list[str] = []

    def from_string(cls: type, text: str, verbose: bool = True) -> str:
        compiled.append(text)
        return text

    monkeypatch.setattr(llama_cpp.LlamaGrammar, "from_string", classmethod(from_string))
    monkeypatch.setattr(local_engine, "MAX_CACHED_GRAMMARS", 4)
    engine = local_engine.LlamaCppEngine("unused.gguf")
    schemas = [{"type": "object", "properties": {f"field_{index}": {"type": "string"}}} for index in range(6)]
    for schema in schemas:
        engine._grammar(schema)
    engine._grammar(schemas[2])  # used again: now the most recent, not compiled again
    assert len(compiled) == 6 and len(engine._grammars) == 4
    engine._grammar(schemas[0])  # pushed out: compiled again
    assert len(compiled) == 7 and len(engine._grammars) == 4
    kept = [json.loads(key)["properties"].popitem()[0] for key in engine._grammars]
    assert kept == ["field_4", "field_5", "field_2", "field_0"]  # least recently used first out
