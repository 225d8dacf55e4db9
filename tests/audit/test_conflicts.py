"""Value conflicts by arithmetic: dates and counts an obligation asserts against its event's passages."""

from __future__ import annotations

import pytest

from derivaudit.audit.conflicts import Passage, apply, conflict, counts, dates
from derivaudit.audit.labels import obligation_label
from derivaudit.audit.scan import settled

FRI = "7:31 pm on 21 January, 2022"  # a Friday


def test_dates_become_calendar_intervals():
    got = {d.said: (d.start.isoformat(), d.end.isoformat()) for d in
           dates("I won it last week, printed it on 17 January 2022, moved in 2019 and met her in March", FRI)}
    assert got == {"last week": ("2022-01-10", "2022-01-16"),  # the ISO week of 14 January
                   "17 January 2022": ("2022-01-17", "2022-01-17"),
                   "in 2019": ("2019-01-01", "2019-12-31"),
                   "March": ("2021-03-01", "2021-03-31")}  # a month without a year: the last one before
    assert dates("we went last weekend, a few days ago, at 3 pm, last summer", FRI) == ()  # unresolved: left alone
    assert dates("last week", None) == ()  # no time to resolve against


@pytest.mark.parametrize(("obligation", "passage", "slot"), [
    ("Nate won his first tournament in December 2021.", "I won my first tournament last week!", "time"),
    ("Joanna printed her screenplay on 17 January 2022.", "I printed it last Friday!", "time"),
    ("Joanna first watched it ten years ago.", "I first watched it three years ago.", "time"),
    ("James got five strikes.", "I got two strikes in a row!", "quantity"),
    ("Evan has worked on his health for 10 years.", "I've been working on it for two years now.", "quantity"),
    ("James got five strikes last week.", "Last week I got two strikes in a row!", "quantity"),  # same week
])
def test_a_different_date_or_count_for_the_event_is_a_conflict(obligation, passage, slot):
    c = conflict(obligation, FRI, [Passage("t1", passage, FRI)])
    assert c is not None and c.slot == slot and c.passages == ("t1",)
    assert "t1" in c.note()


@pytest.mark.parametrize(("obligation", "passages"), [
    ("The tournament was last week.", ["I won my first tournament last week!"]),  # same week
    ("Nate won it in January 2022.", ["I won my first tournament last week!"]),  # the week is in January
    ("Melanie painted it last year.", ["I painted that lake sunrise last year!"]),
    ("She moved in 2019.", ["We moved last weekend.", "Back in 2019 we moved here."]),  # one passage agrees
    ("Melanie has three kids.", ["My kids, all three of them, love it."]),  # no count on 'kids'
    ("He has worked there for ten years.", ["I've been there about two years."]),  # approximate: not read
    ("He went there last summer.", ["I went in 2019."]),  # the obligation's time cannot be resolved
    ("He won the final in December 2021.", []),  # no passage about the event: nothing decided
])
def test_no_conflict_without_a_stated_different_value(obligation, passages):
    assert conflict(obligation, FRI, [Passage(f"t{i}", p, FRI) for i, p in enumerate(passages)]) is None


JAN = "10:00 am on 3 January, 2022"
PLAN = Passage("t1", "My sister Ana is visiting in February!", JAN)
MOVED = Passage("t2", "Ana had to push her visit back to March, she could not get the days off.", FRI)


def test_a_later_value_is_an_update_not_a_contradiction():
    """Seed 004: a passage refutes only about the same subject, event and time; a later change is an
    update. The memory may follow the change or what held before it; neither is contradicted."""
    # the passage that gives another month announces the change: the memory holds the earlier plan
    assert conflict("Ana is visiting in February.", FRI, [MOVED]) is None
    # the judge found the event on the first plan only; a later turn of the view states the memory's month
    later = Passage("t2", "Her visit is in March now.", FRI)
    assert conflict("Ana is visiting in March.", FRI, [PLAN], [PLAN, later]) is None
    # counts: an earlier count of the same thing, then the memory's count
    dogs = [Passage("t1", "We have two dogs at home.", JAN), Passage("t2", "I got my third dog, three dogs now!", FRI)]
    assert conflict("Sam has three dogs.", FRI, dogs[:1], dogs) is None
    # without the later turn, the same memory and passage are the same event at the same time
    assert conflict("Ana is visiting in March.", FRI, [PLAN], [PLAN]).slot == "time"


@pytest.mark.parametrize("other", [
    "Ana's birthday is on 3 February.",  # the memory's date, but another event (no event word shared)
    "We moved to Boston on 3 February.",  # "moved" of a person, not of the event's date
    "I got a new bike on 3 February.",  # a light verb is not an event
])
def test_a_same_time_different_date_is_a_contradiction(other):
    came = Passage("t1", "Ana came over for dinner on 5 February.", FRI)
    c = conflict("Ana came over for dinner on 3 February.", FRI, [came], [came, Passage("t0", other, FRI)])
    assert c is not None and c.passages == ("t1",)
    assert conflict("We moved to Boston in June 2021.", FRI, [Passage("t1", "We moved to Boston in May 2021.", FRI)])


def test_apply_reads_the_whole_view_for_a_later_value():
    turns = {"t1": PLAN, "t2": Passage("t2", "Her visit is in March now.", FRI), "t3": Passage("t3", "Nice!", FRI)}
    texts = {"w#o1": "Ana is visiting in March."}
    rows = [_row("w#o1", ["t1", "t2", "t3"], e=True, e_subset=[1])]
    assert apply(rows, texts, FRI, turns) == rows  # update: left to the judge's own answers
    rows = [_row("w#o1", ["t1", "t3"], e=True, e_subset=[1])]
    assert apply(rows, texts, FRI, turns)[0]["label"] == "contradicted"


def test_later_value_is_the_turns_that_move_the_value_since_it_was_last_stated():
    from derivaudit.audit.conflicts import later_value

    ob, june = "Ana is visiting in February.", Passage("new", "Ana is visiting in March.", FRI)
    found = later_value(ob, JAN, [Passage("t1", "Lovely weather.", FRI), MOVED], june)
    assert found.slot == "time" and found.passages == ("t2",)
    assert later_value(ob, JAN, [MOVED, Passage("t3", "Her visit is in February after all.", FRI)], june) is None
    assert later_value(ob, JAN, [MOVED], Passage("new", "Ana is visiting in April.", FRI)) is None
    assert later_value(ob, JAN, [MOVED]).passages == ("t2",)  # no replacement: the change is announced
    both = Passage("t4", "Ana pushed her visit from February to March.", FRI)  # the old month named in the change
    assert later_value(ob, JAN, [both], june).passages == ("t4",) == later_value(ob, JAN, [both]).passages
    assert later_value(ob, JAN, [Passage("t2", "Ana's visit in March is her second.", FRI)]) is None
    dogs = later_value("Sam has two dogs.", JAN, [Passage("t2", "We have three dogs since Friday.", FRI)],
                       Passage("new", "Sam has three dogs.", FRI))
    assert dogs.slot == "quantity" and dogs.stated == ("three dogs",)


def test_counts_skip_pronouns_and_approximations():
    text = "I have 3 dogs, one of them old, about ten years of work and a few days off"
    assert counts(text) == ((3, "dog", "3 dogs"),)


def _row(oid, passages, e=False, e_subset=(), r=False, view="expanded"):
    a = {"d": True, "e": e, "r": r, "e_subset": list(e_subset), "r_subset": []}
    return {"obligation_id": oid, "write_id": "w", "conversation_id": "c", "view": view, "passages": passages,
            "A": a, "adjudicator": None, "label": obligation_label(True, e, r)}


TURNS = {"t1": Passage("t1", "Hey, how are you?", FRI),
         "t2": Passage("t2", "I won my first video game tournament last week!", FRI),
         "t3": Passage("t3", "It was Counter-Strike.", FRI)}
TEXTS = {"w#o1": "Nate won his first video game tournament.", "w#o2": "The tournament was in December 2021."}


def test_apply_refutes_a_date_on_the_passage_its_sibling_fact_was_found_in():
    rows = [_row("w#o1", ["t1", "t2", "t3"], e=True, e_subset=[2]), _row("w#o2", ["t1", "t2", "t3"])]
    out = apply(rows, TEXTS, FRI, TURNS)
    assert out[0] == rows[0]
    assert out[1]["label"] == "contradicted" and out[1]["label_own"] == "insufficient"
    assert out[1]["settled"]["r_subset"] == [2] and out[1]["conflict"]["passages"] == ["t2"]
    # the judge's own E yes on the passage that gives another date is not a proof of this date
    rows[1] = _row("w#o2", ["t1", "t2", "t3"], e=True, e_subset=[2])
    out = apply(rows, TEXTS, FRI, TURNS)
    assert out[1]["label"] == "contradicted" and out[1]["settled"]["e"] is False


def test_settled_refutes_by_arithmetic_then_carries_the_refutation_across_views():
    """The citation view found the fact on t2, so its date is checked there and refuted; the
    expanded view lost the fact among more passages (no event passage, no check of its own), and
    takes the refutation on t2, which it holds. A judge's E yes is not carried (see labels)."""
    rows = [_row("w#o1", ["t2"], e=True, e_subset=[1], view="citation_only"),
            _row("w#o2", ["t2"], view="citation_only"),
            _row("w#o1", ["t1", "t2", "t3"]), _row("w#o2", ["t1", "t2", "t3"])]
    out = settled(rows, TEXTS, {"w": FRI}, {("c", k): v for k, v in TURNS.items()})
    assert [r["label"] for r in out] == ["supported", "contradicted", "insufficient", "contradicted"]
    assert out[1]["conflict"]["slot"] == "time" and "conflict" not in out[3]
    assert out[3]["carried"]["r"] == {"from": "citation_only", "passages": ["t2"]}
    assert out[3]["settled"]["r_subset"] == [2]
    off = settled(rows, TEXTS, {"w": FRI}, {("c", k): v for k, v in TURNS.items()}, carry=False, values=False)
    assert off == rows
