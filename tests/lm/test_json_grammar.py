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
