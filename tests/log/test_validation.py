"""validate's answer computed by the library: counts, problems, and the fatal rule."""

from __future__ import annotations

from derivaudit.log.validation import to_json, validate


def test_a_clean_log_is_ok_and_counted(fixtures):
    res = validate([fixtures / "memories.jsonl"])
    assert res["ok"] and res["read"] and not res["problems"]
    assert res["writes"] == 24 and res["conversations"] == 3 and res["turns"] > 0


def test_bad_records_are_fatal_unless_skipping_leaves_a_usable_log(fixtures, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text((fixtures / "memories.jsonl").read_text() + '{"type": "write", "write_id": 5}\nnot json\n')
    strict = validate([bad])
    assert not strict["ok"] and strict["bad_records"] == 2 and strict["skipped_records"] == 0
    skipping = validate([bad], skip_invalid=True)
    assert skipping["ok"] and skipping["skipped_records"] == 2 and skipping["writes"] == 24
    doc = to_json(skipping)
    assert list(doc) == ["ok", "files", "conversations", "turns", "writes", "reads", "operations", "skipped_records",
                         "problems", "warnings"]
    assert all({"file", "line"} <= set(p) for p in doc["problems"])


def test_a_log_with_nothing_left_is_fatal_even_when_skipping(tmp_path):
    only_bad = tmp_path / "x.jsonl"
    only_bad.write_text("not json\n")
    assert not validate([only_bad], skip_invalid=True)["ok"]
