"""One readable line per trainer event."""

from promptgym.cli.render import describe


def test_a_scored_candidate_says_its_lead_and_where_it_was_measured():
    line = describe({"event": "candidate_scored", "candidate": 3, "incumbent": 0, "lead": -1.0, "examples": 10,
                     "where": "10 val examples"})
    assert line == "  candidate 3 vs incumbent 0: lead -1 on 10 val examples"


def test_events_without_a_line_are_skipped():
    assert describe({"event": "step", "epoch": 0, "step": 0, "global_step": 1, "reward": 0.5}) is None


def test_records_of_unknown_kinds_or_missing_fields_are_skipped():
    assert describe({"event": "from_a_newer_version", "x": 1}) is None
    assert describe({"event": "candidate_scored", "candidate": 3}) is None
