"""Typed events: every kind round-trips through its record, and reads like the dict it is written as."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from promptgym.core import events
from promptgym.core.events import EVENT_TYPES, CandidateAccepted, Evaluated, as_record, from_record

SAMPLES = {int: 3, float: 0.5, str: "text", bool: True}


def sample(cls):
    hints = typing.get_type_hints(cls)
    values = {}
    for item in dataclasses.fields(cls):
        hint = hints[item.name]
        origin = typing.get_origin(hint)
        if origin is dict:
            values[item.name] = {"key": 1}
        elif origin is list:
            values[item.name] = [1, 2]
        else:
            options = [t for t in (typing.get_args(hint) or (hint,)) if t is not type(None)]
            values[item.name] = SAMPLES.get(typing.get_origin(options[0]) or options[0], {"key": 1})
    return cls(**values)


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_every_event_round_trips_through_its_record(kind):
    event = sample(EVENT_TYPES[kind])
    record = as_record(event)
    assert record["event"] == kind
    assert from_record({"time": 1.0, **record}) == event


def test_an_event_reads_like_its_record():
    event = CandidateAccepted(candidate=3, parent=1, reason="ahead by 2")
    assert event["event"] == "candidate_accepted" and event["candidate"] == 3 and event.get("reason") == "ahead by 2"
    assert event.get("missing") is None and "parent" in event and dict(event) == as_record(event)


def test_evaluation_scores_sit_beside_the_other_keys():
    event = Evaluated(label="best", split="test", size=4, logs={"reward": 0.75, "f1_score": 0.5})
    assert as_record(event) == {"event": "evaluated", "label": "best", "split": "test", "size": 4, "reward": 0.75,
                                "f1_score": 0.5}
    assert from_record(as_record(event)) == event


def test_the_docs_list_every_event_kind():
    documented = set(re.findall(r"^\| `(\w+)` \|", (Path(__file__).parents[2] / "docs" / "events.md").read_text(),
                                re.MULTILINE))
    assert documented == set(EVENT_TYPES), set(EVENT_TYPES) ^ documented


def test_every_event_class_of_the_module_is_registered():
    classes = [value for value in vars(events).values()
               if isinstance(value, type) and issubclass(value, events.Event) and value is not events.Event]
    assert {cls.kind for cls in classes} == set(EVENT_TYPES)
