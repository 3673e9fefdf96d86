"""The llama.cpp grammar (GBNF) that makes the embedded engine write JSON matching a schema.

llama-cpp-python's schema converter lets a string hold raw control characters
(its ``char`` rule is ``[^"\\\\]``), which JSON forbids: a small model then
writes ``{"answer": "108 }`` followed by two newlines and a paragraph, and no
JSON parser takes it (the 15 ``502 model_error`` of the first embedded soak).
Here strings exclude them, as llama.cpp's own ``json.gbnf`` does, so what the
engine samples is always JSON: a newline inside a value is written ``\\n``.
"""

from __future__ import annotations

import re

_LOOSE_CHAR_RULE = re.compile(r'^(char\d*) ::= \[\^"\\\\\]', re.MULTILINE)
_STRICT_CHAR_CLASS = r'[^"\\\x7F\x00-\x1F]'


def json_schema_gbnf(schema_json: str) -> str:
    """The GBNF grammar of the JSON values matching ``schema_json``, strings without raw control characters.

    >>> grammar = json_schema_gbnf('{"type": "object", "properties": {"a": {"type": "string"}}}')
    >>> "x00-" in next(line for line in grammar.splitlines() if line.startswith("char ::="))
    True
    """
    # Deferred: llama_cpp is the optional `local` extra, and importing it loads the native library.
    from llama_cpp import llama_grammar

    gbnf = llama_grammar.json_schema_to_gbnf(schema_json)
    return _LOOSE_CHAR_RULE.sub(lambda match: f"{match.group(1)} ::= {_STRICT_CHAR_CLASS}", gbnf)
