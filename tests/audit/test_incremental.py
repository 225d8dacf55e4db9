"""A store that grows: a second scan of the same run folder judges only what is new, keeps the old
labels, and never mixes another version of the log into an old run (derivaudit/audit/incremental.py)."""

from __future__ import annotations

import pytest

from derivaudit.audit import incremental
from derivaudit.audit.annotate import Annotator
from derivaudit.audit.evidence import build_views
from derivaudit.audit.scan import ScanConfig, scan
from derivaudit.log.io import check_rows
from derivaudit.runs import folder as runs

from ..rule_backend import RuleBackend


def _log(n_turns: int, n_writes: int, edit: str | None = None, extra_alpha: int = 0):
    """One conversation: filler turns, then writes every five turns, each citing its first turn.
    `edit` changes that write's text; `extra_alpha` appends turns that only say "alpha"."""
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i, "speaker": "Ann",
             "text": f"Ann saw the orchard {i} and the {['red', 'green', 'blue'][i % 3]} barn"} for i in range(n_turns)]
    rows += [{"type": "turn", "conversation_id": "c", "turn_id": f"x{i}", "order": 1000 + i, "speaker": "Ann",
              "text": f"alpha {i}"} for i in range(extra_alpha)]
    rows += [{"type": "write", "write_id": f"w{j}", "conversation_id": "c",
              "text": f"Ann saw the orchard {j * 5}" + (" twice" if edit == f"w{j}" else ""),
              "citations": [f"t{j * 5}"], "last_seen_turn": f"t{j * 5 + 2}"} for j in range(n_writes)]
    log, problems = check_rows("mem.jsonl", rows)
    assert not problems
    return log


def _annotators(be):
    return Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")


def test_a_grown_log_is_judged_only_where_it_is_new(tmp_path):
    run = tmp_path / "run"
    be = RuleBackend()
    notes: list[str] = []
    scan(_log(40, 6), run, _annotators(be), notify=notes.append)
    first = runs.read_rows(run, runs.LABELS)
    calls_first = len(be.seen)
    notes.clear()
    scan(_log(45, 8), run, _annotators(be), notify=notes.append)
    second = runs.read_rows(run, runs.LABELS)
    asked = be.seen[calls_first:]
    # the old writes' labels are the first scan's; the two new writes were judged
    assert second[:6] == first and [r["write_id"] for r in second] == [f"w{j}" for j in range(8)]
    assert runs.read_json(run, runs.META)["reused"] == {"obligations": 6, "primitives": 6}
    assert any("kept from this run's earlier scan" in n for n in notes)  # no second calibration
    assert any("6 of 8 writes" in n for n in notes)
    # every prompt of the second scan was about a new write: none repeats an old write's text
    old_texts = {f"Ann saw the orchard {j * 5}" for j in range(6)}
    assert asked and not any(f'"{t}"' in p.task or f"{t}\n" in p.task for p in asked for t in old_texts)
    assert len(asked) < calls_first / 3


def test_an_unchanged_log_is_reused_whole(tmp_path):
    run = tmp_path / "run"
    be = RuleBackend()
    scan(_log(40, 6), run, _annotators(be))
    n = len(be.seen)
    scan(_log(40, 6), run, _annotators(be))
    assert len(be.seen) == n  # nothing asked again: every stage done, calibration kept


def test_turns_appended_after_old_writes_never_change_their_evidence(tmp_path):
    """BM25's statistics are each write's pre-write history: turns appended later (here, ones that
    would make "alpha" common and reorder the alpha and beta turns) change no old view, so every
    old write is kept."""
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": f"f{i}", "order": i, "speaker": "Ann",
             "text": f"weather {i}"} for i in range(40)]
    rows += [{"type": "turn", "conversation_id": "c", "turn_id": f"a{i}", "order": 100 + i, "speaker": "Ann",
              "text": f"alpha {i}"} for i in range(12)]
    rows += [{"type": "turn", "conversation_id": "c", "turn_id": f"b{i}", "order": 200 + i, "speaker": "Ann",
              "text": f"beta {i}"} for i in range(13)]
    rows += [{"type": "turn", "conversation_id": "c", "turn_id": "g", "order": 300, "speaker": "Ann",
              "text": "gamma and delta"}]
    writes = [{"type": "write", "write_id": "w-ab", "conversation_id": "c", "text": "alpha beta gamma",
               "citations": ["g"], "last_seen_turn": "g"},
              {"type": "write", "write_id": "w-w", "conversation_id": "c", "text": "weather 3",
               "citations": ["f3"], "last_seen_turn": "f5"}]
    more = [{"type": "turn", "conversation_id": "c", "turn_id": f"z{i}", "order": 400 + i, "speaker": "Ann",
             "text": f"alpha {i}"} for i in range(12)]
    old, _ = check_rows("mem.jsonl", rows + writes)
    new, problems = check_rows("mem.jsonl", rows + more + writes)
    assert not problems
    before = {v.write.write_id: v.to_dict() for v in build_views(old)}
    after = {v.write.write_id: v.to_dict() for v in build_views(new)}
    assert before == after
    run = tmp_path / "run"
    be = RuleBackend()
    scan(old, run, _annotators(be))
    scan(new, run, _annotators(be))
    assert runs.read_json(run, runs.META)["reused"]["primitives"] == 2


def test_another_version_of_the_log_is_refused(tmp_path):
    run = tmp_path / "run"
    scan(_log(40, 6), run, _annotators(RuleBackend()))
    before = runs.read_rows(run, runs.LABELS)
    with pytest.raises(runs.RunError, match="another version of this log .*some of its first 6 writes differ"):
        scan(_log(40, 6, edit="w0"), run, _annotators(RuleBackend()))
    assert runs.read_rows(run, runs.LABELS) == before  # nothing of the old run touched


def test_growth_is_told_from_edits():
    old = incremental.digest(_log(40, 6))
    assert incremental.not_grown(old, _log(40, 6)) is None
    assert incremental.not_grown(old, _log(45, 8)) is None  # turns and writes appended
    assert "differ" in incremental.not_grown(old, _log(40, 6, edit="w3"))
    assert "has 5 writes where the earlier scan had 6" in incremental.not_grown(old, _log(40, 5))
    assert "has 30 turns" in incremental.not_grown(old, _log(30, 6))


def test_a_changed_setting_reuses_nothing_it_should_not(tmp_path):
    """Other judges: no row and no calibration is kept."""
    run = tmp_path / "run"
    scan(_log(40, 6), run, _annotators(RuleBackend("1")))

    class Other(RuleBackend):
        def identity(self):
            return {"backend": self.name, "model": "another rule"}

    notes: list[str] = []
    be = Other()
    scan(_log(45, 8), run, _annotators(be), notify=notes.append)
    assert runs.read_json(run, runs.META)["reused"] == {"obligations": 0, "primitives": 0}
    assert not any("kept" in n for n in notes)


def test_a_damaged_reuse_record_reuses_nothing_and_says_so(tmp_path):
    run = tmp_path / "run"
    scan(_log(40, 6), run, _annotators(RuleBackend()))
    p = run / runs.REUSE
    p.write_text(p.read_text().replace('"settings"', '"settingz"', 1))
    notes: list[str] = []
    scan(_log(45, 8), run, _annotators(RuleBackend()), cfg=ScanConfig(), notify=notes.append)
    assert any("nothing reused" in n and "reuse.json" in n for n in notes)
    assert runs.read_json(run, runs.META)["reused"] == {"obligations": 0, "primitives": 0}
