"""The data model: problems that say where, conversations in time order."""

import pytest

from derivaudit.log.records import Conversation, MemoryLog, Problem, Turn, Write


def _turn(tid, order):
    return Turn("c", tid, order, "Ann", f"text {tid}")


def test_problem_says_file_line_field_and_code():
    p = Problem("log.jsonl", 12, "citations[0]", "unknown_citation", "cites turn 'x'")
    assert str(p) == "log.jsonl:12: citations[0]: cites turn 'x' [unknown_citation]"
    assert str(Problem("log.jsonl", None, None, "file_not_found", "missing")) == "log.jsonl: missing [file_not_found]"
    assert p.to_dict()["line"] == 12


def test_conversation_sorts_turns_by_order_and_indexes_them():
    c = Conversation("c", [_turn("t2", 5), _turn("t1", 1)])
    assert [t.turn_id for t in c.turns] == ["t1", "t2"] and c.position == {"t1": 0, "t2": 1}


def test_memory_log_lookups():
    w = Write("w1", "c", "Ann writes.", ("t1",), "t2")
    log = MemoryLog({"c": Conversation("c", [_turn("t1", 0), _turn("t2", 1)])}, [w])
    assert log.write("w1") is w and log.n_turns == 2
    with pytest.raises(KeyError):
        log.write("nope")
