"""The lifecycle audit on crafted logs: a rule judge that reads the words, so every label rule is
exercised end to end (items, two annotators, subsets, adjudication, the label) and checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from derivaudit.audit import lifecycle, lifecycle_calibration
from derivaudit.audit.annotate import Annotator
from derivaudit.audit.decompose import Obligation
from derivaudit.log.io import load_log
from derivaudit.log.records import MAX_PASSAGES
from derivaudit.models.base import Score
from derivaudit.report.lifecycle import flat, summarize
from tests.rule_backend import RuleBackend, words

YES, NO = Score(4.0, -0.1, -4.1), Score(-4.0, -4.1, -0.1)


class LifecycleRule(RuleBackend):
    """The rule judge, also answering the lifecycle questions: U yes when the later passages hold
    the record's words and say it changed; F yes when they hold all its words and ask to forget (not
"don't forget"). Its E
    reads the latest passage holding the statement's words: no when that one says it changed."""

    def score(self, prompts, k=100):
        out = super().score(prompts, k)
        for i, p in enumerate(prompts):
            e = re.search(r"^(?:Statement|Claim|Obligation): (?!It is no longer true|Someone asks to forget)(.*)$",
                          p.task, re.M)
            if e and out[i].logodds > 0 and p.verdict[0] == ("yes",):
                st = words(e.group(1))
                lines = [w for line in p.shared.splitlines() if st <= (w := words(line))]
                if lines and ("changed" in lines[-1] or "longer" in lines[-1]):
                    out[i] = NO
            f = re.search(r"^(?:Statement|Claim|Obligation): Someone asks to forget that (.*)\.$", p.task, re.M)
            u = re.search(r"^(?:Statement|Claim|Obligation): It is no longer true that (.*)\.$", p.task, re.M)
            if not (f or u) or not p.shared:
                continue
            st, ev = words((f or u).group(1)), words(p.shared)
            about = bool(st) and len(st & ev) >= max(1, len(st) - 1)
            if f:
                out[i] = YES if st <= ev and re.search(r"(?<!don't )forget", p.shared, re.I) else NO
            else:
                replaced = "memory" in ev and not st <= ev  # a successor stating another value
                out[i] = YES if about and ("changed" in ev or "longer" in ev or replaced) else NO
        return out


def _erin(texts, first=0):
    """A header and one conversation "c" of Erin's turns t<first>, t<first+1>, ... (crafted logs)."""
    return [{"type": "header", "schema_version": 1}] + [
        {"type": "turn", "conversation_id": "c", "turn_id": f"t{i + first}", "order": i, "speaker": "Erin", "text": x}
        for i, x in enumerate(texts)]


def _load(tmp_path, rows, name="log.jsonl"):
    """Write crafted log rows as JSONL and load them the way `scan` does."""
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_log(p)


def _log(tmp_path):
    turns = [
        ("t1", "Erin: I am allergic to peanuts."),
        ("t2", "Erin: I work night shifts at the hospital."),
        ("t3", "Erin: I have a cat named Tom."),
        ("t4", "Erin: Please forget that I am allergic to peanuts, it was a joke."),
        ("t5", "Erin: That changed, I no longer work night shifts; I work day shifts now."),
        ("t6", "Erin: Nice weather today."),
    ]
    rows = [{"type": "header", "schema_version": 1}]
    rows += [{"type": "turn", "conversation_id": "c", "turn_id": t, "order": i, "speaker": "Erin",
              "text": x.split(": ", 1)[1]} for i, (t, x) in enumerate(turns)]
    rows += [
        {"type": "write", "write_id": "w1", "conversation_id": "c", "text": "Erin is allergic to peanuts",
         "citations": ["t1"], "last_seen_turn": "t1"},
        {"type": "write", "write_id": "w2", "conversation_id": "c", "text": "Erin works night shifts",
         "citations": ["t2"], "last_seen_turn": "t2"},
        {"type": "write", "write_id": "w3", "conversation_id": "c", "text": "Erin has a cat named Tom",
         "citations": ["t3"], "last_seen_turn": "t3"},
        {"type": "write", "write_id": "w4", "conversation_id": "c", "text": "Erin works day shifts now",
         "citations": ["t5"], "last_seen_turn": "t5"},
        {"type": "write", "write_id": "w5", "conversation_id": "c", "text": "Erin has a cat",
         "citations": ["t3"], "last_seen_turn": "t6", "parent_id": "w3", "source_id": "w3"},
        {"type": "write", "write_id": "w6", "conversation_id": "c", "text": "Erin is allergic to peanuts",
         "citations": ["t1"], "last_seen_turn": "t2"},
        {"type": "write", "write_id": "w7", "conversation_id": "c", "text": "Erin works night shifts",
         "citations": ["t2"], "last_seen_turn": "t3"},
        {"type": "operation", "operation_id": "o1", "conversation_id": "c", "kind": "delete", "target": "w1",
         "last_seen_turn": "t6", "meta": {"gold": "justified"}},
        {"type": "operation", "operation_id": "o2", "conversation_id": "c", "kind": "delete", "target": "w2",
         "last_seen_turn": "t6", "meta": {"gold": "justified"}},
        {"type": "operation", "operation_id": "o3", "conversation_id": "c", "kind": "delete", "target": "w3",
         "last_seen_turn": "t6", "meta": {"gold": "unjustified"}},
        {"type": "operation", "operation_id": "o4", "conversation_id": "c", "kind": "invalidate", "target": "w6",
         "last_seen_turn": "t6", "successor": "w4", "meta": {"gold": "unjustified"}},
        {"type": "operation", "operation_id": "o5", "conversation_id": "c", "kind": "invalidate", "target": "w7",
         "last_seen_turn": "t6", "successor": "w4", "origin": "api", "meta": {"gold": "justified"}},
    ]
    return _load(tmp_path, rows)


def _obligations(log):
    return {w.write_id: [Obligation(f"{w.write_id}.1", w.write_id, "fact", None, w.text)] for w in log.writes}


def test_every_rule_end_to_end_on_a_crafted_log(tmp_path):
    log = _log(tmp_path)
    cs = lifecycle.cases(log)
    assert [c.case_id for c in cs] == ["o1", "o2", "o3", "o4", "o5", "update:w5"]
    be = LifecycleRule()
    a, b, adj = Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")
    res = lifecycle.judge(log, cs, _obligations(log), a, b, adj, write_labels={"w4": "supported"})
    got = {r.case.case_id: (r.label, r.why) for r in res}
    assert got["o1"][0] == "justified" and "forget" in got["o1"][1]
    assert got["o2"][0] == "justified" and "supersedes" in got["o2"][1]
    assert got["o3"][0] == "unjustified"  # collateral: nothing after the cat says it changed
    assert got["o4"] == ("unjustified", lifecycle.label(cs[3], res[3].rows, "supported")[1])
    assert "another subject" in got["o4"][1]  # day shifts do not replace the peanut allergy
    assert got["o5"][0] == "justified"  # day shifts replace night shifts, and the successor is supported
    assert got["update:w5"][0] == "unjustified" and "named Tom" in got["update:w5"][1]
    by = {r.case.case_id: r for r in res}
    assert "t5" in by["o2"].deciding and "t4" in by["o1"].deciding  # the checked subsets name them
    # the after view: only turns after the target's write point, up to the operation point
    assert [t.turn_id for t in lifecycle.after_turns(log, cs[0])] == ["t2", "t3", "t4", "t5", "t6"]
    rep = summarize([r.to_dict() for r in res])
    assert rep["outside_conversation"] == 1  # o5, made through the API, reported apart
    assert rep["rates"]["unjustified_deletion"]["weighted"] == 1 / 3
    assert rep["rates"]["justified_invalidation"]["n_writes"] == 1  # o4 only: o5 is apart
    assert flat(rep)["lifecycle.unjustified_update"] == 1.0
    assert rep["gold"]["n"] == 5 and rep["gold"]["accuracy"] == 1.0 and rep["gold"]["unjustified_recall"] == 1.0
    assert [u["case_id"] for u in rep["unjustified"]] == ["o3", "o4", "update:w5"]


def test_a_successor_is_judged_on_the_turns_it_cites_after_its_target(tmp_path):
    log = _log(tmp_path)
    cs = {c.case_id: c for c in lifecycle.cases(log)}
    # w4 cites t5, after w7's write point (t3) and up to the operation point (t6)
    assert [t.turn_id for t in lifecycle.successor_turns(log, cs["o5"])] == ["t5"]
    items = lifecycle.items_for(log, cs["o5"], _obligations(log)["w7"])
    assert [t.turn_id for t in items["successor"][0].passages] == ["t5"]
    # a successor citing only turns before the target's write point is read from its own text
    early = lifecycle.Case("x", "invalidate", cs["o5"].target, "t6", successor=log.writes[0])
    (p,) = lifecycle.successor_turns(log, early)
    assert p.turn_id == "w1" and p.speaker == "memory" and p.text == "Erin is allergic to peanuts"


def test_a_fact_said_to_hold_again_after_it_changed_is_not_superseded(tmp_path):
    turns = ["I am allergic to shellfish.", "That changed, I am no longer allergic to shellfish.",
             "Actually I am allergic to shellfish after all, the test was wrong.", "Nice weather today."]
    rows = _erin(turns, first=1)
    for w in ("w1", "w2"):
        rows.append({"type": "write", "write_id": w, "conversation_id": "c", "text": "Erin is allergic to shellfish",
                     "citations": ["t1"], "last_seen_turn": "t1"})
    rows += [{"type": "operation", "operation_id": "late", "conversation_id": "c", "kind": "delete", "target": "w1",
              "last_seen_turn": "t4"},
             {"type": "operation", "operation_id": "early", "conversation_id": "c", "kind": "delete", "target": "w2",
              "last_seen_turn": "t2"}]
    log = _load(tmp_path, rows)
    be = LifecycleRule()
    a, b, adj = Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")
    res = {r.case.case_id: r for r in lifecycle.judge(log, lifecycle.cases(log), _obligations(log), a, b, adj)}
    late, early = res["late"], res["early"]
    # both see t2 say it changed (U yes on [t2]); the write audit over t2 and after: only the later
    # operation saw t3 say it holds again
    assert late.rows["after"][0]["u"] and late.rows["after"][0]["held"] is True
    assert late.rows["after"][0]["held_turns"] == ["t2", "t3", "t4"]
    assert late.label == "unjustified" and "say it holds" in late.why and "t3" in late.why
    assert early.rows["after"][0]["held"] is False and early.rows["after"][0]["held_turns"] == ["t2"]
    assert early.label == "justified"


def _row(d=True, u=False, f=False, oid="x.1", written=None):
    return {"obligation_id": oid, "obligation": "text", "passages": ["t9"], "d": d, "u": u, "f": f,
            "u_subset": [1] if u else [], "f_subset": [1] if f else [], "written": written}


def test_the_label_rule_table(tmp_path):
    log = _log(tmp_path)
    c = lifecycle.cases(log)
    plain, succ, upd = c[0], c[3], c[5]
    assert lifecycle.label(plain, {"after": [_row(u=True)]})[0] == "justified"
    asked = {"after": [_row()], "forget": [_row(f=True)]}  # F is read from the request turns' rows
    assert lifecycle.label(plain, asked) == ("justified", "a request to forget it", ["t9"])
    assert lifecycle.label(plain, {"after": [_row(f=True)]})[0] == "unjustified"  # F over the after view: unasked
    assert lifecycle.label(plain, {"after": [_row()]})[0] == "unjustified"
    assert lifecycle.label(plain, {"after": [_row(d=False, u=True)]})[0] == "ambiguous"  # not determinate
    assert lifecycle.label(plain, {"after": []})[0] == "ambiguous"
    s = {"after": [_row()], "successor": [_row(u=True)]}
    assert lifecycle.label(succ, s, "supported")[0] == "justified"
    assert lifecycle.label(succ, s, "contradicted")[0] == "unjustified"
    assert lifecycle.label(succ, s, None)[0] == "ambiguous"
    assert lifecycle.label(succ, {"after": [_row(u=True)], "successor": [_row()]}, "supported")[0] == "unjustified"
    # the after view's U names the turn the successor cites (t5): what ended the target is what it derives from
    named = {"after": [{**_row(u=True), "passages": ["t4", "t5"], "u_subset": [2]}], "successor": [_row()]}
    assert lifecycle.label(succ, named, "supported")[0] == "justified"
    named["after"][0]["held"] = True  # ... unless the write audit says it holds again after that turn
    assert lifecycle.label(succ, named, "supported")[0] == "unjustified"
    kept = {"after": [_row()], "kept": [{"obligation_id": "x.1", "obligation": "Erin has a cat.", "e": True,
                                         "label": "supported"}]}
    assert lifecycle.label(upd, kept)[0] == "justified"  # keeps everything ("Erin has a cat")
    # kept says it in its own words: "named Tom" is gone from the new version, whatever E says, so the
    # history must supersede it
    kept["kept"][0]["obligation"] = "Erin has a cat named Tom."
    assert lifecycle.label(upd, kept)[0] == "unjustified"
    kept["after"] = [_row(u=True)]
    assert lifecycle.label(upd, kept)[0] == "justified"
    # kept means the new version supports it: E yes with R yes (ambiguous) is not kept
    both = {"after": [_row()], "kept": [{"obligation_id": "x.1", "obligation": "Erin has a cat.", "e": True,
                                         "label": "ambiguous"}]}
    assert lifecycle.label(upd, both)[0] == "unjustified"
    dropped = {"after": [_row()], "kept": [{"obligation_id": "x.1", "obligation": "x", "e": False,
                                                   "label": "insufficient"}]}
    assert lifecycle.label(upd, dropped)[0] == "unjustified"  # lost a detail that still held
    dropped["after"] = [_row(u=True)]
    assert lifecycle.label(upd, dropped)[0] == "justified"  # the history says it changed
    # the new version is the old one's successor: U yes over the turns it cites ends what it drops
    dropped["after"], dropped["successor"] = [_row()], [{**_row(u=True), "passages": ["t5"]}]
    assert lifecycle.label(upd, dropped) == (
        "justified", "every obligation it drops or changes is superseded by a later turn", ["t5"])
    dropped["successor"] = [_row(d=False, u=True)]  # ... when it is determinate there
    assert lifecycle.label(upd, dropped)[0] == "unjustified"


def test_an_update_is_judged_on_the_turns_its_new_version_cites_after_the_old(tmp_path):
    """An update's new version replaces the old one as a successor does: U over the turns it cites
    after the old version's write point (what the change derives from); none when it cites only
    earlier turns (w5 cites t3, the old version's own turn)."""
    rows = _erin(["I am dating Sam.", "Nice day.", "Sam and I got married last week!", "Rain again."])
    rows += [{"type": "write", "write_id": "w1", "conversation_id": "c", "text": "Erin is dating Sam",
              "citations": ["t0"], "last_seen_turn": "t0"},
             {"type": "write", "write_id": "w2", "conversation_id": "c", "text": "Erin married Sam",
              "citations": ["t0", "t2"], "last_seen_turn": "t3", "parent_id": "w1", "source_id": "w1"}]
    log = _load(tmp_path, rows)
    (case,) = lifecycle.cases(log)
    assert [t.turn_id for t in lifecycle.new_version_turns(log, case)] == ["t2"]
    items = lifecycle.items_for(log, case, _obligations(log)["w1"])
    assert [t.turn_id for t in items["successor"][0].passages] == ["t2"]
    assert [t.turn_id for t in items["after"][0].passages] == ["t1", "t2", "t3"]
    (tmp_path / "old").mkdir()
    old = _log(tmp_path / "old")
    upd = lifecycle.cases(old)[5]
    assert "successor" not in lifecycle.items_for(old, upd, _obligations(old)["w3"])


MARCH = "10:00 am on 2 March, 2026"


def _ana(tmp_path, later, new_text="Erin's sister Ana is visiting in June", kind="update"):
    """Erin's sister's visit in May (t0), then the turns `later`; the memory of t0, then an update (or
    a deletion) of it at the last turn."""
    rows = _erin(["My sister Ana is visiting in May!", *later])
    for r in rows[1:]:
        r["time"] = MARCH
    last = f"t{len(later)}"
    rows.append({"type": "write", "write_id": "w1", "conversation_id": "c", "citations": ["t0"],
                 "text": "Erin's sister Ana is visiting in May", "last_seen_turn": "t0"})
    if kind == "update":
        rows.append({"type": "write", "write_id": "w2", "conversation_id": "c", "text": new_text, "citations": [],
                     "last_seen_turn": last, "parent_id": "w1", "source_id": "w1"})
    else:
        rows.append({"type": "operation", "operation_id": "o", "conversation_id": "c", "kind": "delete",
                     "target": "w1", "last_seen_turn": last})
    log = _load(tmp_path, rows)
    be = LifecycleRule()
    a, b, adj = Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")
    (res,) = lifecycle.judge(log, lifecycle.cases(log), _obligations(log), a, b, adj)
    return res


def test_a_later_date_for_the_event_supersedes_the_old_one(tmp_path):
    """The write audit's update rule feeds U: a later turn giving the event the month the update moves
    it to ends the old month, though the judge's U (no "changed" or "no longer" here) says no."""
    moved = _ana(tmp_path, ["Nice day.", "Ana had to push her visit back to June.", "Rain again."])
    (row,) = moved.rows["after"]
    assert row["u"] is True and row["passages"][row["u_subset"][0] - 1] == "t2"
    assert row["value"]["slot"] == "time" and row["value"]["passages"] == ["t2"]
    assert moved.rows["kept"][0]["label"] == "contradicted"  # the new version gives the event another month
    assert moved.label == "justified" and moved.deciding == ["t2"]
    # the old month said again after the change: it holds, and the update lost it
    (tmp_path / "again").mkdir()
    again = _ana(tmp_path / "again", ["Ana had to push her visit back to June.", "No wait, Ana's visit is in May."])
    assert not again.rows["after"][0]["u"] and again.label == "unjustified"
    # the update moves it to a month no turn gives: nothing supersedes May
    (tmp_path / "july").mkdir()
    july = _ana(tmp_path / "july", ["Ana had to push her visit back to June."], "Erin's sister Ana is visiting in July")
    assert not july.rows["after"][0]["u"] and july.label == "unjustified"


def test_a_visit_moved_in_a_store_mem0_wrote_is_a_justified_update(tmp_path):
    """mem0ai 2.2.1's own store (fixtures/gen/mem0_store.py dates): the app edits "visiting in May"
    to June after Hana said the visit was pushed back to June."""
    from derivaudit.importers import run_import

    store = Path(__file__).resolve().parents[2] / "fixtures" / "mem0_dates"
    log, _ = run_import("mem0-db", store / "history.db", tmp_path / "m.jsonl")
    (case,) = lifecycle.cases(log)
    truth = json.loads((store / "truth.json").read_text())["memories"]
    assert case.new.text == "Sister Ana is visiting in June"
    assert next(v["lifecycle_gold"] for v in truth.values() if v["how"] == "update") == "justified"
    be = LifecycleRule()
    a, b, adj = Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")
    (res,) = lifecycle.judge(log, [case], _obligations(log), a, b, adj)
    pushed = next(t.turn_id for t in log.conversations[case.conversation_id].turns if "push her visit" in t.text)
    assert res.label == "justified" and res.deciding == [pushed]


def test_a_deletion_is_justified_by_an_announced_change_of_date_only(tmp_path):
    gone = _ana(tmp_path, ["Ana had to push her visit back to June."], kind="delete")
    assert gone.label == "justified" and gone.rows["after"][0]["value"]["passages"] == ["t1"]
    (tmp_path / "other").mkdir()
    other = _ana(tmp_path / "other", ["Ana's visit in June will be her second one."], kind="delete")
    assert other.label == "unjustified" and "value" not in other.rows["after"][0]


def test_a_target_the_write_audit_calls_ambiguous_is_not_determinate(tmp_path):
    """Seed 004's ambiguous (D no, or E and R both yes) is the write audit's word for an obligation
    whose claim is not settled: in every kind of operation it counts as not determinate, as D no
    over the after view does, and the rows keep that label ("written") beside the primitives."""
    log = _log(tmp_path)
    c = lifecycle.cases(log)
    plain, succ, upd = c[0], c[3], c[5]
    vague = _row(written="ambiguous")
    assert lifecycle.label(plain, {"after": [_row(written="supported")]})[0] == "unjustified"
    assert lifecycle.label(plain, {"after": [_row(written="insufficient")]})[0] == "unjustified"
    assert lifecycle.label(plain, {"after": [vague]})[:2] == (
        "ambiguous", "the target is not determinate (the write audit labels 'text' ambiguous)")
    assert lifecycle.label(plain, {"after": [_row(u=True, written="ambiguous")]})[0] == "ambiguous"
    asked = {"after": [vague], "forget": [_row(f=True, written="ambiguous")]}
    assert lifecycle.label(plain, asked)[0] == "ambiguous"
    # two obligations, one settled and superseded: the deletion is justified by that one
    two = {"after": [_row(u=True, oid="x.1"), _row(oid="x.2", written="ambiguous")]}
    assert lifecycle.label(plain, two)[0] == "justified"
    # a successor: no conflict with a target that is not determinate is ambiguous, not "another slot"
    assert lifecycle.label(succ, {"after": [vague], "successor": [_row(u=True, written="ambiguous")]},
                           "supported")[0] == "ambiguous"
    assert lifecycle.label(succ, {"after": [_row()], "successor": [_row()]}, "supported")[0] == "unjustified"
    dropped = {"after": [vague], "kept": [{"obligation_id": "x.1", "obligation": "x", "e": False,
                                                   "label": "insufficient"}]}
    assert lifecycle.label(upd, dropped)[0] == "ambiguous"
    # judge() puts the write audit's label of each target obligation into its rows
    be = LifecycleRule()
    a, b, adj = Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")
    (res,) = lifecycle.judge(log, [c[2]], _obligations(log), a, b, adj, obligation_labels={"w3.1": "ambiguous"})
    assert [r["written"] for r in res.rows["after"]] == ["ambiguous"]
    assert res.label == "ambiguous"  # o3 was collateral (unjustified) in the end-to-end test above
    (res,) = lifecycle.judge(log, [c[2]], _obligations(log), a, b, adj)
    assert res.rows["after"][0]["written"] is None and res.label == "unjustified"


def test_calibration_items_and_thresholds(tmp_path):
    from derivaudit.audit.calibrate import said

    rows = [{"type": "header", "schema_version": 1}]
    for c, topic in (("a", "garden"), ("b", "kitchen")):
        rows += [{"type": "turn", "conversation_id": c, "turn_id": f"{c}{i}", "order": i, "speaker": "Sam",
                  "text": f"On day {i} I planted {n} tulips in the {topic} by the old fence."}
                 for i, n in enumerate(("three", "four", "five", "six", "seven", "eight"))]
    log = _load(tmp_path, rows, "cal.jsonl")
    items = lifecycle_calibration.build_items(log, n=4, window=2)
    assert {(i.which, i.positive) for i in items} >= {("r", True), ("r", False), ("e", True), ("e", False)}
    # F meets a request alone and "Please forget that." after what it points at: both forms, both answers
    two = [i for i in items if i.which == "e" and len(i.passages) == 2]
    assert {i.positive for i in two} == {True, False}
    assert all(i.passages[1].text.startswith("Please forget that.") for i in two)
    assert all((i.statement == said(i.passages[0])) == i.positive for i in two)
    be = LifecycleRule()
    cals = lifecycle_calibration.calibrate(
        [(Annotator("A", be, "a"), False), (Annotator("adjudicator", be, "a"), True)], log, n=4)
    for c in cals:
        assert set(c["thresholds"]) == {"f", "u"}
        assert c["thresholds"]["u"].tpr == 1.0 and c["thresholds"]["f"].tpr == 1.0
    # where no case meets a request to forget, F is not calibrated: U's items are the same ones
    only_u = lifecycle_calibration.build_items(log, n=4, window=2, asked=("r",))
    assert only_u == [i for i in items if i.which == "r"] and len(only_u) < len(items)
    cals = lifecycle_calibration.calibrate([(Annotator("A", be, "a"), False)], log, n=4, asked=("r",))
    assert set(cals[0]["thresholds"]) == {"u"} and cals[0]["items"] == len(only_u)


def test_f_is_calibrated_only_where_some_case_meets_a_request_to_forget(tmp_path):
    log = _log(tmp_path)
    every = lifecycle.cases(log)
    assert lifecycle_calibration.asks_forget(log, every)  # o1: "Please forget that I am allergic to peanuts"
    asked = [c for c in every if c.successor is None and lifecycle.forget_evidence(log, c)]
    assert asked and not lifecycle_calibration.asks_forget(log, [c for c in every if c not in asked])


def test_not_said_negatives_are_the_same_people_two_windows_away(tmp_path):
    """U's "not said" negative (and F's request about another statement) is what an audit meets: a
    statement of the same conversation that the later turns do not contain, not another
    conversation's; a conversation too short for that borrows another's."""
    from derivaudit.audit.calibrate import said

    rows = [{"type": "header", "schema_version": 1}]
    sizes = {"long": 30, "short": 4}
    for c, size in sizes.items():
        rows += [{"type": "turn", "conversation_id": c, "turn_id": f"{c}{i}", "order": i, "speaker": "Sam",
                  "text": f"In {c} on day {i} I planted {i + 3} tulips by the old fence."} for i in range(size)]
    log = _load(tmp_path, rows, "cal.jsonl")
    where = {said(t): (c, k) for c, conv in log.conversations.items() for k, t in enumerate(conv.turns)}
    window = 3
    items = lifecycle_calibration.build_items(log, n=40, window=window, seed=2)
    seen = set()
    for it in items:
        if it.which != "r" or it.positive or it.statement in {said(t) for t in it.passages}:
            continue  # the "not said" negative: its statement is none of the later turns
        nconv, k = where[it.statement]
        pconv, first = where[said(it.passages[0])]
        p = first - 1  # the statement's own turn precedes its later turns
        if pconv == "long":
            assert nconv == "long" and abs(k - p) >= 2 * window
        else:
            assert nconv == "long"
        seen.add(pconv)
    assert seen == {"long", "short"}


def test_scan_writes_the_lifecycle_stage_and_the_report_gates_on_it(tmp_path):
    from derivaudit.audit.scan import ScanConfig, scan
    from derivaudit.report.build import build

    log = _log(tmp_path)
    be = LifecycleRule()
    anns = (Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a"))
    run = tmp_path / "run"
    scope = scan(log, run, anns, cfg=ScanConfig(calibrate=False))
    rows = [json.loads(x) for x in (run / "lifecycle.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in rows] == ["o1", "o2", "o3", "o4", "o5", "update:w5"]
    assert {r["case_id"]: r["label"] for r in rows}["o3"] == "unjustified"
    assert scope["lifecycle"]["operations"] == 6
    rep = build(run)
    assert rep["lifecycle"]["gold"]["n"] == 5
    assert rep["metrics"]["lifecycle.unjustified_deletion"] == 1 / 3
    # operations with meta.gold correct the lifecycle rates, with an interval
    c = rep["lifecycle"]["rates"]["unjustified_deletion"]["corrected"]
    assert c["labels"] > 0 and c["low"] <= c["corrected"] <= c["high"]
    assert rep["metrics"]["lifecycle.unjustified_deletion.upper"] == c["high"]
    # a rerun redoes nothing: the stage file is kept as it is
    before = (run / "lifecycle.jsonl").read_bytes()
    scan(log, run, anns, cfg=ScanConfig(calibrate=False))
    assert (run / "lifecycle.jsonl").read_bytes() == before


def test_cases_of_the_gold_fixture_in_input_order_and_by_conversation():
    """Operations in input order, then updates; `--conversation` (scan's `conversations`) keeps the
    chosen conversation's only."""
    log = load_log(Path(__file__).resolve().parents[2] / "fixtures" / "lifecycle.jsonl")
    leo = ["op-6", "op-7", "op-8", "op-9", "op-10", "op-11", "update:l-usedveg"]
    assert [c.case_id for c in lifecycle.cases(log, ["leo"])] == leo
    every = [c.case_id for c in lifecycle.cases(log)]
    assert len(every) == 13 and every[:5] == ["op-1", "op-2", "op-3", "op-4", "op-5"] and set(leo) < set(every)


@pytest.mark.slow
def test_the_cli_scan_judges_one_gold_operation_of_each_kind_on_a_real_model(tmp_path):
    """`derivaudit scan` on fixtures/lifecycle.jsonl's leo conversation, cut to one operation of each
    kind (a deletion asked for, an invalidation with a successor, an update) and the writes they
    name, on the suite's real model: each judged once, with a label, a reason and the primitives
    behind it; the report's lifecycle part and its gate. (All seven leo cases took about 350 s of CI's
    30 minutes; the label rule itself is tested on crafted rows above.)"""
    from typer.testing import CliRunner

    from derivaudit.cli import app

    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "lifecycle.jsonl"
    writes = {"l-veg2", "l-fish", "l-run", "l-veg10", "l-usedveg"}
    keep = []
    for x in fixture.read_text().splitlines(keepends=True):
        r = json.loads(x)
        if (r["type"] == "header" or (r["type"] == "turn" and r["conversation_id"] == "leo")
                or (r["type"] == "write" and r["write_id"] in writes)
                or (r["type"] == "operation" and r["operation_id"] in ("op-8", "op-10"))):
            keep.append(x)
    log = tmp_path / "leo.jsonl"
    log.write_text("".join(keep))
    run = tmp_path / "run"
    # calibrated on leo's own 8 turns (--calibrate-on FILE): calibrating on the whole two-conversation
    # log cost about 145 s on 2 AVX2 cores; 8 turns give the lifecycle 25 items per role and the write
    # audit none (argmax thresholds there), which is all a test of the plumbing needs
    turns = tmp_path / "leo-turns.jsonl"
    turns.write_text("".join(x for x in keep if json.loads(x)["type"] in ("header", "turn")))
    r = CliRunner().invoke(app, ["scan", str(log), "-o", str(run), "--format", "json", "--calibrate-on", str(turns)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (run / "lifecycle.jsonl").read_text().splitlines()]
    want = ["op-8", "op-10", "update:l-usedveg"]
    assert [x["case_id"] for x in rows] == want
    for x in rows:
        assert x["label"] in ("justified", "unjustified", "ambiguous") and x["why"]
        assert x["rows"]["after"] and all(o["passages"] for o in x["rows"]["after"])
    succ = [x for x in rows if x["successor"]]
    # the successor l-fish is judged on the turn it cites (leo-t5), not on its one-line text
    assert succ and all(x["rows"]["successor"][0]["passages"] == ["leo-t5"] for x in succ)
    assert json.loads(r.stdout)["lifecycle"]["gold"]["n"] == 3
    assert next(x for x in rows if x["case_id"] == "op-8")["rows"]["forget"][0]["passages"] == ["leo-t8"]
    rep = tmp_path / "rep.json"
    gate = CliRunner().invoke(app, ["report", str(run), "--format", "json", "-o", str(rep),
                                    "--fail-if", "lifecycle.unjustified_deletion>1.5"])
    assert gate.exit_code == 0, gate.output
    doc = json.loads(rep.read_text())
    assert doc["lifecycle"]["operations"] == 3 and "lifecycle.unjustified_deletion" in doc["metrics"]
    # the scan's own terminal table has the lifecycle part too (the finished run resumes: no model work)
    again = CliRunner().invoke(app, ["scan", str(log), "-o", str(run), "--calibrate-on", str(turns)])
    assert again.exit_code == 0, again.output
    assert "Lifecycle: 3 operations" in again.stdout and "Lifecycle against gold (3)" in again.stdout
    assert [x["label"] for x in map(json.loads, (run / "lifecycle.jsonl").read_text().splitlines())] == [
        x["label"] for x in rows]


def test_markdown_and_csv_carry_the_lifecycle_part_escaped(tmp_path):
    from derivaudit.audit.scan import ScanConfig, scan
    from derivaudit.report.build import build
    from derivaudit.report.text import to_csv, to_markdown

    log_path = tmp_path / "log.jsonl"
    _log(tmp_path)
    text = log_path.read_text().replace("Erin has a cat named Tom", "Erin has a cat named Tom | <b>*x*</b>")
    log_path.write_text(text)
    log = load_log(log_path)
    be = LifecycleRule()
    anns = (Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a"))
    scan(log, tmp_path / "run", anns, cfg=ScanConfig(calibrate=False))
    rep = build(tmp_path / "run")
    md = to_markdown(rep)
    assert "### Lifecycle" in md and "unjustified_deletion" in md and "`o3` (delete)" in md
    part = md.split("### Lifecycle")[1]
    assert "Tom \\| " in part and "\\*x\\*" in part and "*x*" not in part  # memory text cannot make table cells
    csv = to_csv(rep)
    assert "lifecycle,unjustified_deletion" in csv and "lifecycle_gold,accuracy" in csv


def test_terminal_and_html_show_the_lifecycle_part_escaped(tmp_path):
    import io

    from rich.console import Console

    from derivaudit.audit.scan import ScanConfig, scan
    from derivaudit.report.build import build
    from derivaudit.report.html import render
    from derivaudit.report.table import print_report

    _log(tmp_path)
    p = tmp_path / "log.jsonl"
    p.write_text(p.read_text().replace("Erin has a cat named Tom", "Erin has a cat named Tom [red]<script>x</script>"))
    be = LifecycleRule()
    anns = (Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a"))
    scan(load_log(p), tmp_path / "run", anns, cfg=ScanConfig(calibrate=False))
    rep = build(tmp_path / "run")
    buf = io.StringIO()
    print_report(Console(file=buf, width=200, color_system=None), rep)
    out = buf.getvalue()
    assert "Lifecycle:" in out and "unjustified_deletion" in out and "[red]<script>" in out  # markup shown, not run
    page = render(rep)
    assert "<h2>Lifecycle</h2>" in page and "<script>x</script>" not in page and "&lt;script&gt;x" in page


def test_u_and_f_are_the_e_question_about_a_statement_of_the_obligation():
    """U and F are asked in each annotator's E wording (yes/no) about "It is no longer true that
    <obligation>" and "Someone asks to forget that <obligation>": the clause keeps names as written
    and lowers a sentence-initial function word."""
    from derivaudit.audit.annotate import ask

    assert lifecycle.clause("Priya lives in Denver.") == "Priya lives in Denver"
    assert lifecycle.clause("The garden  has   roses!") == "the garden has roses"
    assert lifecycle.clause("I run 5k.") == "I run 5k"
    for v in ("a", "b"):
        for which, said in (("r", "It is no longer true that"), ("e", "Someone asks to forget that")):
            task, verdict = lifecycle.question(which, v, "The garden has roses.")
            e_task, e_verdict = ask(f"der_e_{v}", obligation=f"{said} the garden has roses.")
            assert task == e_task and verdict == e_verdict == (("yes",), ("no",))
    task, _ = lifecycle.adjudication("r", "Leo is vegetarian.", "x", "y")
    assert "Obligation: It is no longer true that Leo is vegetarian." in task
    task, _ = lifecycle.adjudication("e", "Leo is vegetarian.", "x", "y")
    assert "Obligation: Someone asks to forget that Leo is vegetarian." in task


def test_f_is_asked_over_the_turns_that_ask_to_forget_and_only_those(tmp_path):
    log = _log(tmp_path)
    cs = {c.case_id: c for c in lifecycle.cases(log)}
    assert [t.turn_id for t in lifecycle.forget_turns(log, cs["o1"])] == ["t4"]
    items = lifecycle.items_for(log, cs["o1"], _obligations(log)["w1"])
    assert [t.turn_id for t in items["forget"][0].passages] == ["t4"]
    assert "forget" not in lifecycle.items_for(log, cs["o4"], _obligations(log)["w6"])  # a successor: U only
    # t4 asks to forget the peanut allergy (after the cat turn): no reason to remove the night shifts
    assert lifecycle.forget_turns(log, cs["o2"]) == [] and "forget" not in lifecycle.items_for(
        log, cs["o2"], _obligations(log)["w2"])
    # a request: the verb as an imperative at a clause's start or after a request marker
    requests = ("Please forget what I said about my job.", "Can you delete that note?",
                "Don’t keep that in your memory.", "Stop storing my address.",
                "Please don't forget to delete my old address.", "Forget what I said about Boston.",
                "Actually, forget about my allergy.", "Could you please erase my old number?",
                "I'd like you to remove my address from memory.", "You can delete the note about my diet.",
                "Ok, wipe that.", "Please stop tracking my runs.", "I'd rather you not keep that.",
                "Nice weather.\nForget my old number.")
    # no request: a negated verb asks to remember ("Don't forget, you got this!", LoCoMo), and the
    # verbs in a statement ask nothing (LoCoMo: "a good way to forget the stresses of life")
    statements = ("I forgot my keys again.", "I don't remember his name.", "We removed the old fence.",
                  "I keep a diary.", "Don't forget my birthday!", "Don't forget, you got this!",
                  "Do not delete my notes.", "Please don’t ever forget it.", "I will never forget that day.",
                  "I forget a lot of things, but I remember.", "How could I forget?!",
                  "We need to remove the old fence.", "I don't keep a diary.",
                  "It's a good way to forget the stresses of life.", "This will help you not to forget anything!",
                  "Sometimes I get caught up in my studies and forget to prioritize self-care.")
    assert [t for t in requests if not lifecycle.FORGET.search(t)] == []
    assert [t for t in statements if lifecycle.FORGET.search(t)] == []
    # a request far back in a long after view, sharing no word with the target itself but following
    # the turn that does ("forget all that"), is still the F evidence, though BM25 would not pick it
    turns = ["I have a dog named Rex."] + ["Please forget all that, thanks."] + [f"Filler {i} about weather."
                                                                               for i in range(40)]
    rows = _erin(turns)
    rows += [{"type": "write", "write_id": "w", "conversation_id": "c", "text": "Erin has a dog named Rex",
              "citations": ["t0"], "last_seen_turn": "t0"},
             {"type": "operation", "operation_id": "o", "conversation_id": "c", "kind": "delete", "target": "w",
              "last_seen_turn": f"t{len(turns) - 1}"}]
    long = _load(tmp_path, rows, "long.jsonl")
    (case,) = lifecycle.cases(long)
    assert "t1" not in [t.turn_id for t in lifecycle.after_turns(long, case)]  # BM25 does not rank it
    assert [t.turn_id for t in lifecycle.forget_turns(long, case)] == ["t1"]
    # F reads it with the turn it points at: "all that" alone does not say what to forget
    assert [t.turn_id for t in lifecycle.forget_evidence(long, case)] == ["t0", "t1"]
    dog = [Obligation("w#0", "w", "FACT", None, "Erin has a dog named Rex")]
    (item,) = lifecycle.items_for(long, case, dog)["forget"]
    assert [t.turn_id for t in item.passages] == ["t0", "t1"]
    # a request that names the target is read alone (o1: t4 says what it asks to forget)
    assert [t.turn_id for t in lifecycle.forget_evidence(log, cs["o1"])] == ["t4"]


def test_a_long_after_view_keeps_the_turns_a_successor_cites(tmp_path):
    """The label reads the after view's checked subset for a turn the successor cites, so that turn is
    in the view even when BM25 (on the target's words) would leave it out."""
    turns = ["I live in Denver."] + [f"Filler {i} about weather." for i in range(30)] + ["We moved to Seattle."]
    turns += [f"More filler {i}, Denver mentioned." for i in range(20)]
    rows = _erin(turns)
    last = f"t{len(turns) - 1}"
    rows += [{"type": "write", "write_id": "w", "conversation_id": "c", "text": "Erin lives in Denver",
              "citations": ["t0"], "last_seen_turn": "t0"},
             {"type": "write", "write_id": "s", "conversation_id": "c", "text": "Erin moved to Seattle",
              "citations": ["t31"], "last_seen_turn": last},
             {"type": "operation", "operation_id": "o", "conversation_id": "c", "kind": "invalidate", "target": "w",
              "last_seen_turn": last, "successor": "s"},
             {"type": "operation", "operation_id": "d", "conversation_id": "c", "kind": "delete", "target": "w",
              "last_seen_turn": last}]
    log = _load(tmp_path, rows)
    cs = {c.case_id: c for c in lifecycle.cases(log)}
    with_successor = [t.turn_id for t in lifecycle.after_turns(log, cs["o"])]
    assert "t31" in with_successor and len(with_successor) == MAX_PASSAGES
    assert "t31" not in [t.turn_id for t in lifecycle.after_turns(log, cs["d"])]  # BM25 alone leaves it out


def test_a_long_after_view_stays_within_the_view_budget_when_the_citations_do_not_fit(tmp_path):
    """An operation's citations and its successor's can number more than a view holds (16 each are
    valid): the view keeps MAX_PASSAGES turns, the operation's own citations first, then the latest
    of the successor's, and a turn `keep` names before both."""
    n = 2 * MAX_PASSAGES + 8
    rows = _erin(["I live in Denver."] + [f"Note {i} about the move." for i in range(n)])
    last = f"t{n}"
    op_cited = [f"t{i}" for i in range(1, MAX_PASSAGES + 1)]  # t1..t16
    succ_cited = [f"t{i}" for i in range(MAX_PASSAGES + 1, 2 * MAX_PASSAGES + 1)]  # t17..t32
    rows += [{"type": "write", "write_id": "w", "conversation_id": "c", "text": "Erin lives in Denver",
              "citations": ["t0"], "last_seen_turn": "t0"},
             {"type": "write", "write_id": "w2", "conversation_id": "c", "text": "Erin lives in Denver",
              "citations": ["t0"], "last_seen_turn": "t0"},
             {"type": "write", "write_id": "s", "conversation_id": "c", "text": "Erin moved to Seattle",
              "citations": succ_cited, "last_seen_turn": last},
             {"type": "operation", "operation_id": "o", "conversation_id": "c", "kind": "invalidate", "target": "w",
              "last_seen_turn": last, "successor": "s", "citations": op_cited[:12]},
             {"type": "operation", "operation_id": "full", "conversation_id": "c", "kind": "invalidate",
              "target": "w2", "last_seen_turn": last, "successor": "s", "citations": op_cited}]
    log = _load(tmp_path, rows)
    cs = {c.case_id: c for c in lifecycle.cases(log)}
    view = [t.turn_id for t in lifecycle.after_turns(log, cs["o"])]
    assert len(view) == MAX_PASSAGES
    assert view == op_cited[:12] + succ_cited[-4:]  # in time order; the successor's latest four fill the rest
    assert [t.turn_id for t in lifecycle.after_turns(log, cs["full"])] == op_cited
    kept = [t.turn_id for t in lifecycle.after_turns(log, cs["full"], keep=("t40",))]
    assert kept == op_cited[1:] + ["t40"]  # keep first; the earliest citation gives way
