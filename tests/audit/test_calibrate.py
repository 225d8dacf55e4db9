"""Primitive thresholds at FPR <= 0.10, on crafted score sets with a known answer."""

import math
from pathlib import Path

import pytest

from derivaudit import load_log
from derivaudit.audit.calibrate import MIN_WORDS, build_items, items_key, pick, said


def test_threshold_is_the_lowest_with_fpr_at_most_a_tenth():
    neg = [float(x) for x in range(20)]  # 0..19: two may be admitted (2/20 = 0.10)
    pos = [16.5, 18.5, 25.0, 30.0]
    t = pick(pos, neg)
    assert t.value == pytest.approx(math.nextafter(17.0, math.inf))  # admits 18 and 19 only
    assert t.fpr == pytest.approx(0.10) and t.tpr == pytest.approx(3 / 4)
    assert t.n_pos == 4 and t.n_neg == 20


def test_separable_scores_and_edge_cases():
    t = pick([5.0, 6.0], [-1.0, 0.0, 1.0])
    assert t.fpr == 0 and t.tpr == 1 and t.auc == 1 and 1.0 < t.value <= 5.0
    assert pick([1.0], []).value == -math.inf  # nothing to guard against: everything is yes
    inv = pick([-3.0], [1.0, 2.0, 3.0])
    assert inv.tpr == 0 and inv.auc == 0  # an annotator that cannot tell shows it


def test_items_are_built_from_the_log_deterministically(fixtures):
    log = load_log(fixtures / "memories.jsonl")
    items = build_items(log, n=6, window=4, seed=1)
    assert items == build_items(log, n=6, window=4, seed=1) and items_key(items) == items_key(build_items(
        log, n=6, window=4, seed=1))
    kinds = {(i.kind, i.positive) for i in items}
    assert kinds == {("e", True), ("e", False), ("r", True)}
    for pos, neg, rneg in zip(items[0::3], items[1::3], items[2::3], strict=True):
        ids = {t.turn_id for t in pos.passages}
        conv = pos.passages[0].conversation_id
        assert all(t.conversation_id == conv for t in pos.passages)
        quoted = pos.statement.split('said: "', 1)[1][:-1]
        assert any(" ".join(t.text.split()) == quoted for t in pos.passages)  # the passage is in the evidence
        assert not any(neg.statement.endswith(f'"{" ".join(t.text.split())}"') for t in pos.passages)
        assert rneg.statement.startswith("It is not true that") and rneg.passages == pos.passages
        assert ids == {t.turn_id for t in neg.passages}


def test_e_negatives_are_the_same_people_outside_the_evidence(fixtures):
    """A negative is what a scan meets: a statement of the same conversation that the shown turns do
    not contain (two windows away), not another conversation's (other names, rejected at any
    threshold); a conversation too short for that borrows another's."""
    log = load_log(fixtures / "memories.jsonl")
    window = 4
    where = {said(t): (c, k) for c, conv in log.conversations.items() for k, t in enumerate(conv.turns)}
    items = build_items(log, n=12, window=window, seed=3)
    same = 0
    for pos, neg in zip(items[0::3], items[1::3], strict=True):
        conv, first = where[said(pos.passages[0])]
        nconv, k = where[neg.statement]
        turns = log.conversations[conv].turns
        far = [j for j, t in enumerate(turns) if abs(j - first) >= 2 * window and len(t.text.split()) >= MIN_WORDS]
        if far:
            assert nconv == conv and abs(k - first) >= 2 * window
            same += 1
        else:
            assert nconv != conv
    assert 0 < same < len(items) // 3  # both cases occur on this log


def test_the_adjudicator_is_calibrated_on_its_own_question_after_a_disagreement(fixtures):
    from derivaudit.audit.calibrate import adjudicator_task, calibrate

    from ..rule_backend import RuleBackend

    log = load_log(fixtures / "memories.jsonl")
    be = RuleBackend()
    cal = calibrate(be, "a", log, n=6, task=adjudicator_task())
    asked = [p.task for p in be.seen]
    assert asked and all("They disagree" in t and "Assessment 1" in t for t in asked)
    for t in asked:  # one assessment says yes and the other no, on the primitive asked about
        a1 = t.split("Assessment 1: ", 1)[1].split("\n", 1)[0]
        a2 = t.split("Assessment 2: ", 1)[1].split("\n", 1)[0]
        assert a1 != a2
    r_prompts = [p for p in be.seen if p.verdict != (("yes",), ("no",))]
    assert r_prompts and all(p.verdict == (("B",), ("A", "C")) for p in r_prompts)
    # the rule verifier answers from the words alone, so the same items give the same thresholds
    assert cal["thresholds"] == calibrate(RuleBackend(), "a", log, n=6)["thresholds"]


def test_a_log_without_calibration_items_says_so_and_asks_nothing(fixtures):
    """The demo log (one 10-turn conversation) yields no items: argmax thresholds, no question asked,
    and a warning that names the cause instead of claiming the annotator cannot separate."""
    from rich.console import Console

    from derivaudit.audit.calibrate import calibrate, health_warning, usable
    from derivaudit.report.table import print_health

    from ..rule_backend import RuleBackend

    log = load_log(fixtures / "demo.jsonl")
    be = RuleBackend()
    cal = calibrate(be, "a", log)
    assert cal["items"] == 0 and not be.seen
    assert {k: usable(t) for k, t in cal["thresholds"].items()} == {"e": 0.0, "r": 0.0}
    warning = health_warning("A", cal)
    assert "not calibrated" in warning and "cannot separate" not in warning
    out = Console(record=True, width=300)
    h = {**cal, "thresholds": {k: t.to_dict() for k, t in cal["thresholds"].items()}, "warning": warning}
    print_health(out, {"A": h})
    text = out.export_text()
    assert "calibration (0 items): not calibrated" in text and "WARNING" in text and "-inf" not in text
    # a log with items keeps the separability check
    full = calibrate(RuleBackend(), "a", load_log(fixtures / "memories.jsonl"), n=6)
    assert full["items"] and "not calibrated" not in (health_warning("A", full) or "")


def test_calibrating_several_annotators_at_once_gives_each_its_own_thresholds(fixtures):
    from derivaudit.audit.calibrate import adjudicator_task, calibrate, calibrate_many

    from ..rule_backend import RuleBackend

    log = load_log(fixtures / "memories.jsonl")
    be = RuleBackend()
    together = calibrate_many([(be, "a", None), (be, "b", None), (be, "a", adjudicator_task())], log, n=6)
    alone = [calibrate(RuleBackend(), "a", log, n=6), calibrate(RuleBackend(), "b", log, n=6),
             calibrate(RuleBackend(), "a", log, n=6, task=adjudicator_task())]
    assert together == alone
    n_items = alone[0]["items"]  # E positives, E negatives, R positives in equal numbers
    n_slot = alone[0]["slot_items"]  # S on S items (a changed value, its own value, another event's)
    assert n_slot and n_slot % 3 == 0
    # E and R on E items, R on R items, S on S items
    assert len(be.seen) == 3 * (2 * (2 * n_items // 3) + n_items // 3 + n_slot)


def test_the_adjudicator_s_items_can_wait_until_the_slot_check_is_known_to_be_on(fixtures):
    """Scan scores the adjudicator's S items only when A and B turn the slot check on: leaving them
    out changes no other threshold, and scoring them later gives the threshold calibrating at once does."""
    from derivaudit.audit.calibrate import adjudicator_task, calibrate, calibrate_many, calibrate_slots

    from ..rule_backend import RuleBackend

    log = load_log(fixtures / "memories.jsonl")
    be = RuleBackend()
    roles = [(be, "a", None), (be, "b", None), (be, "a", adjudicator_task())]
    whole = calibrate_many(roles, log, n=6)
    seen = len(be.seen)
    be.seen.clear()
    part = calibrate_many(roles, log, n=6, with_slots=(True, True, False))
    assert part[:2] == whole[:2]
    assert "s" not in part[2]["thresholds"] and part[2]["slot_items"] == 0
    assert {k: v for k, v in part[2]["thresholds"].items()} == {k: v for k, v in whole[2]["thresholds"].items()
                                                                  if k != "s"}
    assert len(be.seen) == seen - whole[2]["slot_items"]
    alone = calibrate(RuleBackend(), "a", log, n=6, task=adjudicator_task())
    assert calibrate_slots(RuleBackend(), "a", log, n=6, task=adjudicator_task()) == alone["thresholds"]["s"]


def test_b_and_adjudicator_s_items_are_scored_only_once_the_roles_before_them_separate_theirs(fixtures):
    """The slot check needs both annotators, so scan scores B's S items only when A separates its
    own, and the adjudicator's only when B does too: the same thresholds as scoring all of them at
    once when A can, and none of B's or the adjudicator's S prompts when A cannot."""
    import re

    from derivaudit.audit.calibrate import add_slots, adjudicator_task, build_slot_items, calibrate_many
    from derivaudit.models.base import Score

    from ..rule_backend import RuleBackend

    slot_q = re.compile(r"^(?:Its|The) (time|place|quantity|person)(?: it states)?: ", re.M)

    log = load_log(fixtures / "memories.jsonl")
    changed = {it.statement for it in build_slot_items(log, n=6) if it.positive}

    class SlotSeer(RuleBackend):  # knows which slot statements were changed: AUC 1
        def score(self, prompts, k=100):
            out = super().score(prompts, k)
            return [(Score(4.0, -0.1, -4.1) if any(c in p.task for c in changed) else Score(-4.0, -4.1, -0.1))
                    if slot_q.search(p.task) else s for p, s in zip(prompts, out, strict=True)]

    class SlotBlind(RuleBackend):  # answers every slot question the same: AUC 0.5
        def score(self, prompts, k=100):
            out = super().score(prompts, k)
            return [Score(0.0, -0.7, -0.7) if slot_q.search(p.task) else s for p, s in zip(prompts, out, strict=True)]

    be = SlotSeer()
    roles = [(be, "a", None), (be, "b", None), (be, "a", adjudicator_task())]
    whole = calibrate_many(roles, log, n=6)
    cals = calibrate_many(roles, log, n=6, with_slots=(True, False, False))
    assert add_slots(cals, roles[1:], log, n=6) is None
    assert [c["thresholds"] for c in cals] == [c["thresholds"] for c in whole]
    assert [c["slot_items"] for c in cals] == [c["slot_items"] for c in whole]

    blind, b = SlotBlind(), SlotSeer()
    roles = [(blind, "a", None), (b, "b", None), (b, "a", adjudicator_task())]
    cals = calibrate_many(roles, log, n=6, with_slots=(True, False, False))
    why = add_slots(cals, roles[1:], log, n=6)
    assert why and "annotator A cannot separate" in why
    assert b.seen and not any(slot_q.search(p.task) for p in b.seen)
    assert "s" not in cals[1]["thresholds"] and "s" not in cals[2]["thresholds"]


def test_slot_items_change_the_value_of_a_passage_and_keep_it_for_the_negatives(fixtures):
    from derivaudit.audit.calibrate import build_slot_items

    log = load_log(fixtures / "memories.jsonl")
    items = build_slot_items(log, n=4)
    assert items and len(items) % 3 == 0 and items == build_slot_items(log, n=4)  # deterministic
    for pos, same, other in zip(items[::3], items[1::3], items[2::3], strict=True):
        assert (pos.positive, same.positive, other.positive) == (True, False, False)
        assert pos.passages == same.passages == other.passages and len(pos.passages) == 1
        (t,) = pos.passages
        assert same.slot.value in t.text and pos.slot.value not in t.text  # its own value / a changed one
        assert pos.statement == same.statement.replace(same.slot.value, pos.slot.value, 1)
        assert pos.slot.name == same.slot.name and t.text not in other.statement


def test_the_slot_check_is_used_only_when_both_annotators_separate_their_s_items():
    from derivaudit.audit.calibrate import Threshold, slot_check_off

    good, weak = Threshold(0.4, 0.1, 0.5, 0.8, 24, 48), Threshold(0.3, 0.1, 0.1, 0.39, 24, 48)

    def cal(s):
        return {"thresholds": {"e": good, "r": good, **({"s": s} if s else {})}, "target_fpr": 0.1}

    assert slot_check_off([cal(good), cal(good)]) is None
    assert "annotator B cannot separate" in slot_check_off([cal(good), cal(weak)]) and "AUC 0.39" in \
        slot_check_off([cal(good), cal(weak)])
    assert "no calibration items" in slot_check_off([cal(None), cal(good)])
    no_tp = Threshold(0.9, 0.0, 0.0, 0.7, 24, 48)
    assert "annotator A" in slot_check_off([cal(no_tp), cal(good)])


def test_the_packaged_corpus_gives_a_full_item_set_the_same_for_every_log(fixtures):
    from derivaudit.audit.calibrate import PACKAGED, build_slot_items, corpus, corpus_name

    memories, demo = load_log(fixtures / "memories.jsonl"), load_log(fixtures / "demo.jsonl")
    packaged = corpus("packaged", memories)
    assert packaged is corpus("packaged", demo) and corpus("log", demo) is demo
    assert packaged.n_turns == 96 and not any(c in packaged.conversations for c in memories.conversations)
    items, s_items = build_items(packaged), build_slot_items(packaged)
    assert len(items) == 72 and len(s_items) == 72  # 24 E positives (each an E negative, an R positive); 24 S
    assert sum(it.positive for it in s_items) == 24
    # fewer items on a small log's own turns: why the packaged corpus is the default
    assert len(build_items(memories)) < len(items)
    assert corpus_name("packaged") == "packaged" and corpus_name(str(PACKAGED)).startswith("calibration.jsonl@")


def test_a_calibration_file_of_the_users_own_is_validated_like_any_log(tmp_path):
    from derivaudit.audit.calibrate import corpus
    from derivaudit.log.io import LogError

    bad = tmp_path / "cal.jsonl"
    bad.write_text('{"type": "turn", "conversation_id": "c", "turn_id": "t1", "speaker": "A"}\n')
    with pytest.raises(LogError, match="cal.jsonl"):
        corpus(str(bad), load_log(Path(__file__).resolve().parents[2] / "fixtures" / "demo.jsonl"))


def test_thresholds_from_the_packaged_corpus_belong_to_the_judge_not_the_log(fixtures, tmp_path):
    from derivaudit.audit.scan import ScanConfig, scan

    from ..rule_backend import RuleBackend

    found = []
    for name in ("memories.jsonl", "demo.jsonl"):
        from derivaudit.audit.annotate import Annotator

        be = RuleBackend()
        anns = [Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")]
        report = scan(load_log(fixtures / name), tmp_path / name, anns, cfg=ScanConfig(limit=1, use_cache=False,
                                                                                  calibrate_on="packaged"))
        found.append(report["calibration"])
    assert found[0] == found[1] and found[0]["A"]["corpus"] == "packaged" and found[0]["A"]["items"] == 72
    # the default is the log's own turns, and a run made before the option resumes on them
    assert ScanConfig.from_dict({}).calibrate_on == "log" and ScanConfig().calibrate_on == "log"
