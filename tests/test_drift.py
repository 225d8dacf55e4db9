"""Drift over rewriting rounds: lineage from parent_id / source_id / round, rates per round, the
command end to end on the hand-written fixture."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from derivaudit import load_log
from derivaudit.cli import app
from derivaudit.drift import drift, lineage, rates
from derivaudit.io import check_rows
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
    rep = drift(log, KnownDrift(log), reps=200)
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
    assert all(isinstance(x["temporal_logodds"], float) for x in rep["rows"])
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
    from derivaudit.report.built import drift_html

    log = load_log(fixtures / "drift.jsonl")
    rep = drift(log, KnownDrift(log), reps=50)
    rep["examples"]["temporal"][0]["later"] = "<script>alert(1)</script>"
    page = drift_html(rep).decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<svg" in page and "Content-Security-Policy" in page and "script-src" not in page
    assert page.count("<tr>") >= 1 + len(rep["rounds"])
