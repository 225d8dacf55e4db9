"""Drift over rewriting rounds: lineage from parent_id / source_id / round, rates per round, the
command end to end on the hand-written fixture."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from derivaudit import load_log
from derivaudit.built.drift import drift, lineage, rates, why
from derivaudit.cli import app
from derivaudit.log.io import check_rows
from derivaudit.models.base import Score, Usage

runner = CliRunner()


class KnownDrift:
    """Answers each drift question from the fixture's meta.drift (found by the later text), so the
    rates are known in advance."""

    name = "known"

    def __init__(self, log):
        self.truth = {w.text: (w.meta or {}).get("drift", {}) for w in log.writes}
        self.usage = Usage()

    def identity(self):
        return {"backend": self.name, "model": "known"}

    def score(self, prompts, k=100):
        out = []
        for p in prompts:
            later = p.shared.split("Later version of the same memory:\n", 1)[1].strip()
            later = later.removeprefix("<later>").removesuffix("</later>")
            kind = "temporal" if "when the event happens" in p.task else "modality"
            out.append(Score(3.0 if self.truth[later].get(kind) else -3.0))
        return out


def test_lineage_pairs_each_rewrite_with_its_root_or_parent(fixtures):
    log = load_log(fixtures / "drift.jsonl")
    pairs, notes = lineage(log)
    assert not notes and len(pairs) == 24
    by = {p.write.write_id: p for p in pairs}
    assert by["lisbon-r3"].earlier_id == "lisbon-r0" and by["lisbon-r3"].round == 3
    assert by["lisbon-r0"].earlier_id == "turns:trip-t1,trip-t3" and "Maya: I'm thinking" in by["lisbon-r0"].earlier
    parents, _ = lineage(log, "parent")
    assert {p.write.write_id: p.earlier_id for p in parents}["lisbon-r3"] == "lisbon-r2"


def test_lineage_by_source_id_and_what_cannot_be_placed():
    turns = [{"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "A", "text": "hi"}]
    w = {"type": "write", "conversation_id": "c", "citations": ["t1"], "last_seen_turn": "t1"}
    rows = turns + [
        {**w, "write_id": "a0", "text": "x", "source_id": "s", "round": 0},
        {**w, "write_id": "a2", "text": "y", "source_id": "s", "round": 2},  # no parent_id: found by source
        {**w, "write_id": "b1", "text": "z", "source_id": "other", "round": 1},  # no round-0 write
        {**w, "write_id": "n", "text": "n"},  # no round at all
    ]
    log, problems = check_rows("m", rows)
    assert not problems
    pairs, notes = lineage(log)
    assert {p.write.write_id: p.earlier_id for p in pairs} == {"a0": "turns:t1", "a2": "a0"}
    assert any(n.startswith("b1: no round-0 ancestor") for n in notes) and any(n.startswith("n: no round") for n in
                                                                                notes)
    with pytest.raises(ValueError, match="--against"):
        lineage(log, "grandparent")


def test_rates_per_round_match_the_known_drift(fixtures):
    log = load_log(fixtures / "drift.jsonl")
    rep = drift(log, KnownDrift(log), method="pair", reps=200)
    assert rep["expected"] == {"temporal": {"n": 24, "agreement": 1.0}, "modality": {"n": 24, "agreement": 1.0}}
    r3 = rep["rounds"]["3"]
    assert r3["pairs"] == 6 and r3["temporal"]["drifted"] == 5 and r3["modality"]["drifted"] == 5
    # balanced: mean over conversations of each conversation's rate (trip 1/2, course 2/2, house 2/2)
    assert r3["temporal"]["balanced"] == pytest.approx((1 / 2 + 1 + 1) / 3)
    assert rep["rounds"]["0"]["temporal"]["drifted"] == 0
    lo, hi = r3["temporal"]["ci"]
    assert lo <= r3["temporal"]["balanced"] <= hi
    assert rep["examples"]["temporal"] and all(e["round"] > 0 for e in rep["examples"]["temporal"])
    one = rates([{"round": 1, "conversation_id": "c", "temporal": True, "modality": None}])
    assert one["1"]["temporal"]["ci"] == [None, None] and one["1"]["modality"]["judged"] == 0


@pytest.mark.slow
def test_drift_command_end_to_end_on_the_embedded_model(fixtures, tmp_path):
    r = runner.invoke(app, ["drift", str(fixtures / "drift.jsonl"), "-o", str(tmp_path / "d.json"),
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["pairs"] == 24 and set(rep["rounds"]) == {"0", "1", "2", "3"}
    assert rep["method"] == "versions"
    assert all(x["later_time"] and x["later_status"] in ("done", "planned", "possible", None) for x in rep["rows"])
    assert json.loads((tmp_path / "d.json").read_text())["pairs"] == 24
    bad = runner.invoke(app, ["drift", str(fixtures / "padding.jsonl")])  # turns only: no write to compare
    assert bad.exit_code == 2 and "nothing to compare" in bad.output


def test_mem0_update_chains_are_lineages(fixtures, tmp_path):
    from derivaudit.importers import run_import

    run_import("mem0", fixtures / "mem0_history.json", tmp_path / "m.jsonl")
    pairs, notes = lineage(load_log(tmp_path / "m.jsonl"))
    rewrites = [(p.write.write_id, p.round, p.earlier_id) for p in pairs if p.round]
    assert rewrites == [("h3", 1, "h1")] and not notes  # the UPDATE of h1's memory, against the ADD


def test_drift_html_page_is_inert_and_complete(fixtures):
    from derivaudit.report.pages import drift_html

    log = load_log(fixtures / "drift.jsonl")
    rep = drift(log, KnownDrift(log), method="pair", reps=50)
    rep["examples"]["temporal"][0]["later"] = "<script>alert(1)</script>"
    page = drift_html(rep).decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<svg" in page and "Content-Security-Policy" in page and "script-src" not in page
    assert page.count("<tr>") >= 1 + len(rep["rounds"])


@pytest.mark.parametrize(("earlier_time", "later_time", "earlier_text", "changed"), [
    ("october", "october", "I might go in October.", False),
    ("none", "october", "Maya: maybe the second week of October.", False),  # written in the earlier text
    ("march 3", "april", "I start on March 3.", True),
    ("june 1", "june", "The lease starts June 1.", False),  # less precise but written there: not counted
    ("march 3", "none", "I start on March 3.", False),  # a dropped time is not a changed time
    ("none", "last year", "My sister lives in Lisbon.", True),  # a time the earlier version never gave
])
def test_time_changed(earlier_time, later_time, earlier_text, changed):
    from derivaudit.built.drift import time_changed

    assert time_changed(earlier_time, later_time, earlier_text) is changed


class ReadsEachVersion:
    """Answers drift_status by keyword (might -> C, plan -> B, else A) and drift_when with the month
    the text names, so that the versions method's comparisons are known in advance."""

    name = "reads"

    def __init__(self):
        self.usage = Usage()

    def identity(self):
        return {"backend": self.name, "model": "reads"}

    @staticmethod
    def _text(p):
        return p.task.split("<record>", 1)[1].split("</record>", 1)[0]

    def score(self, prompts, k=100):
        out = []
        for p in prompts:
            t = self._text(p).lower()
            status = "C" if "might" in t else "B" if "plan" in t else "A"
            out.append(Score(4.0 if p.verdict[0] == (status,) else -4.0))
        return out

    def generate(self, prompts, max_new_tokens=256, json_schema=None, stop=()):
        import re

        months = "january february march april may june july august september october november december"
        return [next((w for w in re.findall(r"\w+", self._text(p).lower()) if w in months.split()), "none")
                for p in prompts]


def test_the_versions_method_compares_each_versions_time_and_status():
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "Ana",
             "text": "I might paint the kitchen in May."},
            {"type": "write", "write_id": "w0", "conversation_id": "c", "text": "Ana might paint the kitchen in May.",
             "citations": ["t1"], "last_seen_turn": "t1", "round": 0, "source_id": "s"},
            {"type": "write", "write_id": "w1", "conversation_id": "c",
             "text": "Ana plans to paint the kitchen in May.", "citations": ["t1"], "last_seen_turn": "t1",
             "round": 1, "parent_id": "w0", "source_id": "s"},
            {"type": "write", "write_id": "w2", "conversation_id": "c", "text": "Ana painted the kitchen in June.",
             "citations": ["t1"], "last_seen_turn": "t1", "round": 2, "parent_id": "w1", "source_id": "s"}]
    log, problems = check_rows("v.jsonl", rows)
    assert not problems
    rep = drift(log, ReadsEachVersion(), reps=50)
    got = {r["write_id"]: (r["temporal"], r["modality"], r["earlier_status"], r["later_status"]) for r in rep["rows"]}
    assert got == {"w0": (False, False, "possible", "possible"),  # extraction kept "might ... May"
                   "w1": (False, True, "possible", "planned"),  # against the root w0
                   "w2": (True, True, "possible", "done")}
    assert rep["examples"]["modality"][0]["write_id"] in ("w1", "w2")
    assert "status: possible -> done" in {why(e, "modality")
                                          for e in rep["examples"]["modality"]}
