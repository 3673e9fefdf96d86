"""The acronym task itself, free of any framework: phrases from seeds, the question, the partial-credit score.

examples/rl_acronyms.py serves it as a task app; bench/rl/vs_trl.py gives the same functions to TRL.

>>> phrase(2)
('music table basket', 'MTB')
>>> round(score("The acronym is MTB.", "MTB"), 3), score("MTB", "MTB")
(0.333, 1.0)
"""

from __future__ import annotations

import difflib
import random
import re

WORDS = (
    "apple river silver mountain quick orange paper window garden yellow table music ocean simple winter forest "
    "golden cloud happy little market planet rocket summer travel bright castle dragon engine family kitchen lemon "
    "number office public question radio school student teacher under village water young zebra animal basket "
    "candle doctor energy flower guitar honey island jacket kettle ladder mirror needle object pencil quiet rabbit "
    "system tiger unit violet wagon yard zone active better cotton digital early future global health internal "
    "junior kind local modern natural open personal quality rapid social total urban visual weekly national"
).split()
INSTRUCTIONS = "You write acronyms."


def phrase(seed: int) -> tuple[str, str]:
    """(the phrase, its acronym) of a seed: 3 or 4 common words."""
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(rng.choice((3, 4)))]
    return " ".join(words), "".join(word[0] for word in words).upper()


def question(text: str) -> str:
    return f'What is the acronym of "{text}"? Answer with the capital letters only.'


def score(reply: str, acronym: str) -> float:
    """Similarity of the reply's letters (upper-cased) to the acronym, from 0 to 1 (difflib's ratio)."""
    letters = re.sub(r"[^A-Z]", "", reply.upper())
    return difflib.SequenceMatcher(None, letters, acronym).ratio()
