"""Overlap bands and MemTrim on fixtures/overlap.jsonl, which holds the seed's three cases (a changed
club, a conflict between two stored highway states, a changed task) and reads in each band."""

from __future__ import annotations

import pytest

from derivaudit import load_log
from derivaudit.readpath.memtrim import EvidenceIndex, Structured, Unit, trim
from derivaudit.readpath.overlap import audit_overlap, correct, jaccard, words


@pytest.fixture
def doc(fixtures):
    return audit_overlap(load_log(fixtures / "overlap.jsonl"))


def test_overlap_is_content_word_jaccard_without_the_stored_answer(doc):
    q = {"lionel", "messi", "plays", "inter", "miami", "country", "club", "based"}  # "now", "which"... are stop words
    m = {"lionel", "messi", "plays", "paris", "saint", "germain", "country", "club", "based", "answer"}  # not "france"
    assert words("Lionel Messi now plays for Inter Miami. Which country is his club based in?") == q
    reads = {r["read_id"]: r for r in doc["reads"]}
    assert reads["q1"]["overlap"] == [pytest.approx(len(q & m) / len(q | m))] == [0.5]
    assert [reads[i]["band"] for i in ("q1", "q2", "q3", "q4", "q5")] == ["middle", "middle", "middle", "high", "low"]
    assert doc["metrics"]["overlap.risky"] == pytest.approx(3 / 5)
    assert jaccard(set(), set()) == 0.0


def test_ta_and_td_dup_split_where_answers_are_logged(doc):
    reads = {r["read_id"]: r for r in doc["reads"]}
    assert [reads[i].get("case") for i in ("q1", "q2", "q3", "q4", "q5")] == ["TD-Dup", "TD-Dup", "TD-Dup", "TA", None]
    m = doc["metrics"]
    assert (m["overlap.ta"], m["overlap.td_dup"]) == (1, 3)
    assert m["overlap.accuracy.ta"] == 1.0 and m["overlap.accuracy.td_dup"] == pytest.approx(1 / 3)
    assert m["overlap.adopted_stale"] == pytest.approx(2 / 3)  # q1 said France, q2 repeated the stale route
    assert correct("The United States.", "united states") and not correct("France", "United States")


def test_memtrim_follows_the_stored_outcome_rule(doc):
    reads = {r["read_id"]: r["memtrim"] for r in doc["reads"]}
    # a supporting unit (the club) conflicts with the query: the stored answer is suppressed
    assert reads["q1"]["outcomes"] == {"m1": "suppress"}
    assert reads["q1"]["context"] == [["position", "forward"]]
    assert reads["q1"]["shared"]["m1"] == [["person", "lionel messi"]]
    # two retrieved memories disagree on a key the query does not settle: withheld
    assert reads["q2"]["withheld"] == ["highway5_status"]
    assert reads["q2"]["outcomes"] == {"m2": "keep", "m3": "none"}
    assert ["answer", "take highway 5"] in reads["q2"]["context"]
    # the task changed: the earlier answer becomes a unit labelled by its task
    assert reads["q3"]["outcomes"] == {"m4": "convert"} and reads["q3"]["context"] == [["validity", "yes"]]
    assert reads["q4"] is None  # no evidence units on the read


def test_trim_settles_a_conflict_by_time_only_when_asked():
    q = Structured("q", frozenset({Unit.of("destination", "B")}), task="route")
    old = Structured("a", frozenset({Unit.of("road", "open")}), time="2025-06-04")
    new = Structured("b", frozenset({Unit.of("road", "closed")}), time="2025-06-05")
    assert trim(q, [old, new]).withheld == ["road"]
    assert trim(q, [old, new], by_time=True).context == [Unit("road", "closed")]
    idx = EvidenceIndex()
    for m in (old, new):
        idx.add(m)
    assert idx.values("road") == {"open": {"a"}, "closed": {"b"}}
    assert idx.values("road", among=["b"]) == {"closed": {"b"}}


def test_a_bad_band_is_refused(fixtures):
    with pytest.raises(ValueError):
        audit_overlap(load_log(fixtures / "overlap.jsonl"), band=(0.6, 0.2))
