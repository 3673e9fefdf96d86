"""Cheap rejection of degenerate instruction rewrites, before any validation call.

Small models asked to improve a prompt often return a label, a copy of the
prompt, an empty string or a loop of the same sentence (MODELS.md). Scoring
such a candidate on a validation minibatch wastes LM calls; these checks cost
nothing::

    instruction_problem("positive", parent="Classify the review.", labels={"positive"})
    # -> 'label-only: the text is an output label'
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Iterable

MIN_CHARACTERS = 8
MAX_REPEATED_TRIGRAMS = 0.3
META_PROSE = re.compile(
    r"^(to (fix|address|resolve|correct|solve) (this|the|these|that)\b[^.]{0,40}?\b(issue|problem|error|failure|bug|mistake)s?\b"
    r"|([^.]{0,80}?\b)?(we|i) (need|should|can|must|will|could) "
    r"|the (issue|problem|error|bug|mistake)s? (is|are|was|were|here|with|in)\b"
    r"|(modify|update|change|improve) (the|this) (current value|value|variable|instructions|[\w'\"]+/state)\b)")
"""The start of a text about the fix ("To fix this issue, we need to ...", "Modify the current value so
that ..."), not instructions for the model."""


def normalize_text(text: str) -> str:
    return " ".join(str(text).lower().split())


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _stems(text: str) -> set[str]:
    return {word[:-1] if len(word) > 3 and word.endswith("s") else word for word in _words(text)}


def is_rewording(text: str, parent: str) -> bool:
    """Whether ``text`` adds and drops at most one word of ``parent`` (plurals aside): the same instructions.

    >>> is_rewording("Read the input and answer with the expected outputs fields.",
    ...              "Read the input and answer with the output fields.")
    True
    """
    new, old = _stems(text), _stems(parent)
    return bool(old) and len(new - old) <= 1 and len(old - new) <= 1


def repeated_trigram_ratio(text: str) -> float:
    """Share of the word trigrams of ``text`` that repeat an earlier trigram (0 = no repetition)."""
    words = _words(text)
    trigrams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    if not trigrams:
        return 0.0
    return 1.0 - len(set(trigrams)) / len(trigrams)


def repeated_line(text: str) -> str | None:
    """A line (or sentence) that loops: a non-trivial one twice, or any one three times."""
    pieces = [normalize_text(p) for p in re.split(r"[\n.!?]+", text)]
    counts = Counter(p for p in pieces if p)
    for piece, count in counts.items():
        if count >= 3 or (count > 1 and len(piece) >= 12):
            return piece
    return None


def cut_repetition(text: object) -> object:
    """``text`` up to where it starts repeating a sentence; anything else unchanged.

    A small model often writes one useful sentence, then loops until it runs
    out of tokens; the part before the loop is worth checking on its own::

        cut_repetition("Write dates as DD.MM.YYYY. Be exact. Be exact. Be exact.")
        # -> 'Write dates as DD.MM.YYYY. Be exact.'
    """
    if not isinstance(text, str):
        return text
    seen: set[str] = set()
    for match in re.finditer(r"[^\n.!?]+[\n.!?]*", text):
        piece = normalize_text(match.group().strip(" \n.!?"))
        if not piece:
            continue
        if piece in seen or (len(piece) >= 12 and any(earlier.startswith(piece) for earlier in seen)):
            return text[: match.start()].rstrip()  # a repeat, or the start of one cut off by max_tokens
        seen.add(piece)
    return text


def instruction_problem(text: object, parent: str = "", labels: Iterable[str] = (), max_length: int = 800,
                        known: Iterable[str] = (), min_length: int = MIN_CHARACTERS, min_words: int = 2
                        ) -> str | None:
    """Why ``text`` is not worth validating as new instructions, or None when it looks fine.

    Rejected: not a string, empty or tiny, a copy of ``parent`` (or a
    rewording of it: one word added or dropped at most) or of a
    ``known`` text, one of the task's output ``labels`` (or a bare word, or a
    JSON object: an answer, not instructions), longer than ``max_length``,
    repetitive (a repeated line, or over 30% repeated word trigrams), or a
    discussion of the fix ("To fix this issue, we need to ...") that the
    model doing the task would read as its instructions.
    """
    if not isinstance(text, str):
        return f"not text: got {type(text).__name__}"
    norm = normalize_text(text)
    if not norm:
        return "empty"
    if norm == normalize_text(parent):
        return "copy of the parent"
    if parent and is_rewording(text, parent):
        return "copy of the parent, reworded (at most one word added or dropped)"
    if norm in {normalize_text(k) for k in known}:
        return "copy of an earlier candidate"
    label_set = {normalize_text(label) for label in labels if str(label).strip()}
    if norm in label_set or norm.strip(" .\"'") in label_set:
        return "label-only: the text is an output label"
    if len(norm) < min_length:
        return f"too short: {len(norm)} characters"
    words = len(_words(norm))
    if words < 2:
        return "label-only: a single word is not an instruction"
    if words < min_words:
        return f"too short: {words} words"
    if norm.startswith("{"):
        try:
            json.loads(text)
            return "label-only: the text is a JSON answer"
        except ValueError:
            pass
    if len(text) > max_length:
        return f"too long: {len(text)} characters > {max_length}"
    if META_PROSE.match(norm):
        return f"discusses the fix instead of instructing the model: {text.strip()[:40]!r}..."
    line = repeated_line(text)
    if line is not None:
        return f"repeated line: {line[:60]!r}"
    ratio = repeated_trigram_ratio(text)
    if ratio > MAX_REPEATED_TRIGRAMS:
        return f"repetitive: {ratio:.0%} repeated word trigrams"
    return None
