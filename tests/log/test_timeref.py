"""Relative time in passages resolved against the turn's own time (timeref)."""

from __future__ import annotations

import pytest

from derivaudit.admission.views import passage_line
from derivaudit.audit.evidence import passage_dict
from derivaudit.log import timeref
from derivaudit.log.records import Turn


@pytest.mark.parametrize(("text", "when", "shown"), [
    ("I painted it last year.", "2023-01-03T10:00:00Z", ["2022"]),  # "last year" in January
    ("I painted it last year.", "1:56 pm on 8 May, 2023", ["2022"]),  # LoCoMo's session time
    ("We're camping next Friday.", "2023-05-08T12:00:00Z", ["12 May 2023"]),  # Monday 8 May
    ("I went yesterday and loved it.", "7:55 pm on 9 June, 2023", ["8 June 2023"]),
    ("The race was last Saturday; I signed up two weeks ago.", "2023-05-08", ["6 May 2023",
                                                                            "the week of 24 April 2023"]),
    ("We moved last month, see you tomorrow.", "2023-03-01T09:00:00+01:00", ["February 2023", "2 March 2023"]),
])
def test_expressions_resolve_against_the_turn_time(text, when, shown):
    assert [r.shown for r in timeref.resolve(text, when)] == shown
    annotated = timeref.annotate(text, when)
    for r in timeref.resolve(text, when):
        assert f"{r.expression} [{r.shown}]" in annotated


@pytest.mark.parametrize("text", [
    "We might go last weekend or a few days ago.",  # dateparser cannot resolve these: left as written
    "I may go in May.",  # the modal verb is not a month
    "I've been doing this for 4 years now.",  # a duration, not a date
    "Time flies, feels like just yesterday I put this dress on.",  # an idiom
    "Nothing about time here.",
])
def test_what_cannot_be_resolved_is_left_as_written(text):
    assert timeref.resolve(text, "2023-05-08") == ()
    assert timeref.annotate(text, "2023-05-08") == text


def test_no_time_or_an_unreadable_time_changes_nothing():
    assert timeref.annotate("I went yesterday.", None) == "I went yesterday."
    assert timeref.annotate("I went yesterday.", "the day the music died") == "I went yesterday."


def test_the_evidence_block_and_views_record_the_resolution():
    t = Turn("c", "t1", 0, "Ana", "I went to the support group  yesterday.", time="1:56 pm on 8 May, 2023")
    assert passage_line(1, t) == "[1] (1:56 pm on 8 May, 2023) Ana: I went to the support group yesterday [7 May 2023]."
    d = passage_dict(t)
    assert d["text"] == t.text  # the turn itself is unchanged
    assert d["time_refs"] == [{"expression": "yesterday", "date": "2023-05-07", "period": "day", "shown": "7 May 2023"}]
    assert "time_refs" not in passage_dict(Turn("c", "t2", 1, "Ana", "Hello.", time="1:56 pm on 8 May, 2023"))
