"""Rules across records (derivaudit/log/history.py) that depend on when things happened in the
conversation, not on where they sit in the file."""

from __future__ import annotations

import json

import pytest

from derivaudit.log.io import check_log, check_rows
from derivaudit.log.spill import SpilledLog

TURNS = [{"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i, "speaker": "Ana",
          "text": f"Turn {i} about the kitchen."} for i in range(1, 11)]
WRITE = {"type": "write", "write_id": "w", "conversation_id": "c", "text": "Ana paints the kitchen.",
         "citations": ["t1"], "last_seen_turn": "t1"}
LATER = {"type": "write", "write_id": "w2", "conversation_id": "c", "text": "Ana painted it blue.",
         "citations": ["t3"], "last_seen_turn": "t3"}
INVALIDATE = {"type": "operation", "operation_id": "inv", "conversation_id": "c", "kind": "invalidate",
              "target": "w", "last_seen_turn": "t4", "successor": "w2"}
DELETE = {"type": "operation", "operation_id": "del", "conversation_id": "c", "kind": "delete", "target": "w",
          "last_seen_turn": "t9"}


@pytest.mark.parametrize("order", ["as_happened", "delete_listed_first"])
def test_operations_are_read_in_the_order_of_their_points_not_their_lines(tmp_path, order):
    ops = [INVALIDATE, DELETE] if order == "as_happened" else [DELETE, INVALIDATE]
    rows = [*TURNS, WRITE, LATER, *ops]
    log, problems = check_rows("ops.jsonl", rows)
    assert problems == [] and sorted(o.operation_id for o in log.operations) == ["del", "inv"]
    f = tmp_path / "ops.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spilled = SpilledLog([f], keep_text=False)  # validate's reader: the same rule
    try:
        assert spilled.problems == [] and spilled.n_operations == 2
    finally:
        spilled.close()


def test_what_came_first_in_the_conversation_stands_whatever_the_line_order(tmp_path):
    """Two deletions of one write: the one at the earlier point is kept, the later one refused."""
    early = {**DELETE, "operation_id": "early", "last_seen_turn": "t5"}
    rows = [*TURNS, WRITE, DELETE, early]  # the later deletion is listed first
    log, problems = check_rows("ops.jsonl", rows)
    assert [o.operation_id for o in log.operations] == ["early"]
    assert [(p.line, p.code) for p in problems] == [(12, "target_deleted_twice")]
    f = tmp_path / "ops.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [(p.line, p.code) for p in check_log([f])[1]] == [(12, "target_deleted_twice")]
