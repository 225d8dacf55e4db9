"""The JSONL line readers shared by every input file."""

from __future__ import annotations

from derivaudit.log.lines import identified_objects


def test_identified_objects_keep_the_first_of_each_id_and_name_every_other_line(tmp_path):
    p = tmp_path / "items.jsonl"
    p.write_bytes(b'{"item_id": "a", "x": 1}\n\n{"item_id": "b"}\n{"item_id": "a", "x": 2}\n'
                  b'{"x": 3}\n{"item_id": " "}\n[1, 2]\n{"item_id": "c"')
    problems = []
    got = identified_objects(p, "item_id", problems)
    assert [(n, d["item_id"]) for n, d in got] == [(1, "a"), (3, "b")]
    assert [(x.line, x.field, x.code) for x in problems[:3]] == [
        (4, "item_id", "duplicate_id"), (5, "item_id", "missing_field"), (6, "item_id", "missing_field")]
    assert "line 1" in problems[0].message
    assert {x.line for x in problems[3:]} == {7, 8}  # not an object; a cut-off last line
