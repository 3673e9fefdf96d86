"""A generated corpus of fictional people, with near-duplicate names and shared attributes, and questions
whose short answers are in exactly one profile (a closed-book model can't know them: every value is made up).

    people = profiles(2000, seed=0)
    asked = questions(people, 60, seed=1)     # [Question(text, answer, gold_id), ...], one per person at most

Distractors by construction: names are drawn from small syllable sets, so "Orlan Vesk", "Orlan Vesko" and
"Orla Vesk" all exist; towns, trades and instruments repeat across profiles, so a retrieved passage about a
similar name usually carries a plausible wrong answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FIRST = ["Orlan", "Orla", "Bren", "Brena", "Tovik", "Tova", "Malen", "Mael", "Sarith", "Sara", "Jorun", "Jora",
         "Elvar", "Elva", "Kesten", "Kessa", "Liam", "Lio", "Dara", "Daro"]
LAST = ["Vesk", "Vesko", "Tamber", "Tambry", "Holm", "Holmer", "Quist", "Quiston", "Marrow", "Marlow", "Fenn",
        "Fennick", "Oduya", "Oduyo", "Pellam", "Pellan"]
TOWNS = ["Tarvel", "Quenby", "Ostrikar", "Mellowdown", "Varnhollow", "Siltmere", "Corrabin", "Dunshallow",
         "Pexley", "Ravenmoor", "Ulthane", "Brisk Harbor", "Gallowmere", "Ketterby", "Ninefold", "Wexhampton"]
TRADES = ["glassblower", "cartographer", "beekeeper", "clockmaker", "ferry pilot", "bookbinder", "lamplighter",
          "salt trader", "rope maker", "tile painter", "herbalist", "bell founder"]
INSTRUMENTS = ["oboe", "hurdy-gurdy", "zither", "bassoon", "lute", "harmonium", "cornet", "dulcimer"]
PETS = ["heron", "ferret", "tortoise", "goat", "raven", "otter"]
PET_NAMES = ["Pim", "Dorrit", "Quill", "Mosk", "Tibb", "Zell", "Arvo", "Nib", "Fesk", "Lump", "Ollo", "Wend"]

ASKED = {
    "town": "In which town was {name} born?",
    "trade": "What is the trade of {name}?",
    "instrument": "Which instrument does {name} play?",
    "pet_name": "What is the name of {name}'s pet?",
}


@dataclass(frozen=True)
class Profile:
    id: str
    name: str
    facts: dict[str, str]

    @property
    def text(self) -> str:
        facts = self.facts
        return (f"{self.name} is a {facts['trade']} born in {facts['town']}. {self.name} plays the "
                f"{facts['instrument']} and keeps a {facts['pet']} named {facts['pet_name']}.")


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    gold_id: str


def profiles(count: int, seed: int = 0) -> list[Profile]:
    """``count`` people with distinct full names (middle initials once the plain names run out)."""
    rng = random.Random(seed)
    people, names = [], set()
    while len(people) < count:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if name in names:
            name = f"{name.split()[0]} {rng.choice('ABCDEFGHJKLMNPRSTVW')}. {name.split()[1]}"
        if name in names:
            continue
        names.add(name)
        facts = {"town": rng.choice(TOWNS), "trade": rng.choice(TRADES), "instrument": rng.choice(INSTRUMENTS),
                 "pet": rng.choice(PETS), "pet_name": rng.choice(PET_NAMES)}
        people.append(Profile(id=f"p{len(people):05}", name=name, facts=facts))
    return people


def questions(people: list[Profile], count: int, seed: int = 1, skip: set[str] | None = None) -> list[Question]:
    """One question each about ``count`` people (not those in ``skip``), the attribute drawn at random."""
    rng = random.Random(seed)
    chosen = [person for person in people if person.id not in (skip or set())]
    rng.shuffle(chosen)
    asked = []
    for person in chosen[:count]:
        attribute = rng.choice(sorted(ASKED))
        asked.append(Question(ASKED[attribute].format(name=person.name), person.facts[attribute], person.id))
    return asked


def normalize(text: object) -> str:
    """Lower case, punctuation and a leading article dropped: "The Oboe." -> "oboe"."""
    words = "".join(ch.lower() if ch.isalnum() or ch in " -" else " " for ch in str(text or "")).split()
    if words and words[0] in ("a", "an", "the"):
        words = words[1:]
    return " ".join(words)


def correct(predicted: object, answer: str) -> bool:
    """The gold answer, as whole words, in a short prediction: "Tarvel", "born in Tarvel" (not a sentence
    that lists every town).

    >>> correct("The oboe.", "oboe"), correct("in Brisk Harbor", "Brisk Harbor"), correct("Tarvelton", "Tarvel")
    (True, True, False)
    """
    got, gold = normalize(predicted).split(), normalize(answer).split()
    if not gold or len(got) > len(gold) + 3:
        return False
    return any(got[start:start + len(gold)] == gold for start in range(len(got) - len(gold) + 1))
