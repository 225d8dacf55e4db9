"""The answer replay's rules on fixtures/echo_answers.jsonl with a scripted generator and judge
(tests/readpath/scripted.py): contexts per method, FPA's authority check, old-answer adoption, DCE,
skipped reads and empty answers. Hand-computed expectations in the comments."""

from __future__ import annotations

import pytest

from derivaudit import load_log
from derivaudit.readpath.answers import ECHO_METHODS, OVERLAP_METHODS, answer_metrics, replay_answers
from derivaudit.readpath.intervals import wilson

from .scripted import Scripted

KETO = dict(conflict=lambda rec, cor: "keto" in rec,
            adopt=lambda answer, claim: "keto" in answer.lower() and "protein" not in answer.lower())


@pytest.fixture
def log(fixtures):
    return load_log(fixtures / "echo_answers.jsonl")


def run(log, be, methods=ECHO_METHODS):
    res = replay_answers(log, be, be, methods=methods)
    return res, {r["read_id"]: r for r in res["rows"]}


def test_contexts_answers_and_metrics_equal_hand_computation(log):
    res, rows = run(log, Scripted(**KETO))
    assert res["reads"] == 4 and res["skipped_no_expected"] == 1  # r5 logs no expected answer
    # the historical claim after the correction is the record it corrects; before it there is none
    assert rows["r1"]["historical"] is None
    assert {rows[r]["historical"] for r in ("r2", "r3", "r4")} == {"Maya snacks on keto bars every afternoon."}
    assert rows["r3"]["contexts"]["budget"] == ["w3", "w2", "w4", "w5", "c1"]
    assert rows["r3"]["contexts"]["fpa"] == ["c1", "w4", "w5"]  # w4 does not conflict: eligible
    assert rows["r2"]["contexts"]["control"] == ["c1", "w5"]  # the pool without the keto family
    m = res["methods"]
    # accuracy: none 0/4; budget r1, r4; FPA r1 (w1), r2 (c1), r4
    assert (m["none"]["accuracy"], m["budget"]["accuracy"], m["fpa"]["accuracy"]) == (0, 0.5, 0.75)
    assert m["budget"]["accuracy_ci"] == pytest.approx(list(wilson(2, 4)))
    assert m["budget"]["delta_none"] == 0.5 and m["budget"]["wrong_to_right_none"] == 2
    assert m["budget"]["right_to_wrong_none"] == 0
    assert m["fpa"]["delta_budget"] == 0.25
    # adoption over r2..r4: budget answers keto on r2 and r3; FPA never
    assert m["budget"]["adoption"] == pytest.approx(2 / 3) and m["fpa"]["adoption"] == 0
    # DCE: the control (no keto records) never adopts, so budget 2/3 and FPA 0
    assert m["budget"]["dce"] == pytest.approx(2 / 3) and m["fpa"]["dce"] == 0 and m["budget"]["dce_reads"] == 3
    lo, hi = m["budget"]["dce_ci"]
    assert 0 <= lo <= 2 / 3 <= hi <= 1
    assert "dce" not in m["none"] or m["none"]["dce"] is None
    metrics = answer_metrics("echo", res)
    assert metrics["echo.answers.accuracy.fpa"] == 0.75 and metrics["echo.answers.skipped"] == 1


def test_fpa_keeps_the_raw_answer_and_answers_again_where_the_authority_contradicts_it(log):
    be = Scripted(**KETO, stale={"snack": "keto bars"}, topic={"keto", "bars", "snack", "snacks"})
    res, rows = run(log, be)
    r2 = rows["r2"]["answers"]
    # served [c1, w5], but a generator repeating its old answer says keto bars; the authority (c1)
    # contradicts it, so the constrained answer is given from c1 alone
    assert r2["fpa_raw"]["answer"] == "keto bars" and not r2["fpa_raw"]["accurate"]
    assert rows["r2"]["authority_consistent"] is False and rows["r2"]["contexts"]["fpa"] == ["c1"]
    assert "protein bars with oats" in r2["fpa"]["answer"] and r2["fpa"]["accurate"]
    # r3 (the marathon): the authority does not contradict the raw answer, which stands
    assert rows["r3"]["authority_consistent"] is True
    assert rows["r3"]["answers"]["fpa"]["answer"] == rows["r3"]["answers"]["fpa_raw"]["answer"]
    assert rows["r1"]["authority_consistent"] is None  # nothing verified served before the correction
    assert (res["methods"]["fpa_raw"]["accuracy"], res["methods"]["fpa"]["accuracy"]) == (0.5, 0.75)


def test_an_empty_answer_is_a_counted_scoring_error(log):
    res, rows = run(log, Scripted(**KETO, empty="marathon"))
    for m in ("none", "budget", "fpa"):
        assert res["methods"][m]["errors"] == 1 and res["methods"][m]["reads"] == 3
    assert rows["r3"]["answers"]["budget"]["error"] == "empty answer"


def test_memtrim_answers_from_logged_units(fixtures):
    log = load_log(fixtures / "overlap.jsonl")
    res, rows = run(log, Scripted(), OVERLAP_METHODS)
    # q1 (Messi at Inter Miami): the club changed, the stored answer France is suppressed, only the
    # memory-only unit is passed on (the MemTrim paper's case 1)
    assert rows["q1"]["contexts"]["memtrim"] == ["position: forward"]
    assert rows["q1"]["memtrim"]["outcomes"] == {"m1": "suppress"}
    assert rows["q1"]["answers"]["budget"]["answer"].startswith("Lionel Messi plays for Paris")
    assert res["memtrim"]["parse"]["parsed"] == 0  # every unit came from the log
    assert set(res["overlap"]) == {"band", "budget", "memtrim"}
    assert res["overlap"]["budget"]["reads"] == res["methods"]["budget"]["reads"]


def test_unknown_methods_are_refused(log):
    with pytest.raises(ValueError, match="unknown answer method"):
        replay_answers(log, Scripted(), Scripted(), methods=("none", "crag"))
