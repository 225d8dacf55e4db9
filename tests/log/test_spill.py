"""The on-disk checker must say exactly what the in-memory loader says, on every bad fixture."""

from __future__ import annotations

import pytest

from derivaudit.log.io import LogError, check_log
from derivaudit.log.spill import SpilledLog


def _inputs(fixtures):
    return [*sorted((fixtures / "bad").glob("*.jsonl*")),
            *(fixtures / n for n in ("memories.jsonl", "controls.jsonl", "hostile.jsonl", "malformed.jsonl",
                                     "drift.jsonl", "demo.jsonl", "padding.jsonl", "echo.jsonl"))]


@pytest.mark.parametrize("keep_text", [True, False])
def test_spilled_checks_equal_the_loaders_on_every_fixture(fixtures, keep_text):
    compared = 0
    for path in _inputs(fixtures):
        try:
            log, problems = check_log([path])
        except LogError as e:
            with pytest.raises(LogError) as got:
                SpilledLog([path], keep_text=keep_text)
            assert got.value.problems == e.problems
            continue
        with SpilledLog([path], keep_text=keep_text) as s:
            assert s.problems == problems, path.name
            assert s.warnings == log.warnings, path.name
            assert (s.n_conversations, s.n_turns) == (len(log.conversations), log.n_turns), path.name
            assert s.write_ids == [w.write_id for w in log.writes], path.name
            assert s.n_reads == len(log.reads), path.name
            compared += 1
    assert compared >= 10


def test_a_write_id_is_claimed_across_conversations_in_input_order(tmp_path):
    """Acceptance is decided in input order even though conversations are checked one at a time:
    a rejected write (bad citation, conversation b) does not claim its id, the later valid write
    with that id (conversation a) is kept, and a third one is a duplicate."""
    rows = [
        '{"type":"turn","conversation_id":"a","turn_id":"t1","order":0,"speaker":"x","text":"hi"}',
        '{"type":"turn","conversation_id":"b","turn_id":"t1","order":0,"speaker":"x","text":"hi"}',
        '{"type":"write","write_id":"w","conversation_id":"b","text":"m","citations":["nope"],"last_seen_turn":"t1"}',
        '{"type":"write","write_id":"w","conversation_id":"a","text":"m","citations":["t1"],"last_seen_turn":"t1"}',
        '{"type":"write","write_id":"w","conversation_id":"b","text":"m","citations":["t1"],"last_seen_turn":"t1"}',
        '{"type":"write","write_id":"v","conversation_id":"c","text":"m","citations":["t1"],"last_seen_turn":"t1"}',
    ]
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(rows) + "\n")
    with SpilledLog([p]) as s:
        assert [(x.line, x.code) for x in s.problems] == [
            (3, "unknown_citation"), (5, "duplicate_write_id"), (6, "conversation_without_turns")]
        assert s.write_ids == ["w"]
        assert list(s.each(lambda conv: lambda w: (conv.conversation_id, w.source.line))) == [("a", 4)]
    assert check_log([p])[1] == s.problems
