"""Loader and validator: every bad-input case gets its own clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from derivaudit import LogError, check_log, load_log
from derivaudit.log.io import atomic_writer, schema

TURNS = [
    {"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i, "speaker": "A", "text": f"turn {i}"}
    for i in range(1, 4)
]


def write(path: Path, rows: list[dict] | list[str], raw_tail: bytes = b"") -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_bytes(("\n".join(lines) + "\n").encode() + raw_tail)
    return path


def wr(**kw) -> dict:
    base = {"type": "write", "write_id": "w1", "conversation_id": "c", "text": "memory",
            "citations": ["t1"], "last_seen_turn": "t2"}
    base.update(kw)
    return base


def problems_of(path: Path) -> list:
    _, problems = check_log([path])
    return problems


def only(path: Path):
    ps = problems_of(path)
    assert len(ps) == 1, [str(p) for p in ps]
    return ps[0]


def test_valid_fixture_loads(fixtures):
    log = load_log(fixtures / "memories.jsonl")
    assert len(log.conversations) == 3
    assert len(log.writes) == 24
    assert log.skipped == []
    boston = log.conversations["boston"]
    assert [t.order for t in boston.turns] == sorted(t.order for t in boston.turns)


@pytest.mark.parametrize(
    ("rows", "line", "field", "code"),
    [
        ([*TURNS, '{"type": "write", "write_id": '], 4, None, "invalid_json"),
        ([*TURNS, {k: v for k, v in wr().items() if k != "text"}], 4, "text", "missing_field"),
        ([*TURNS, wr(citations="t1")], 4, "citations", "wrong_type"),
        ([*TURNS, {**TURNS[0], "turn_id": "t9", "order": "9"}], 4, "order", "wrong_type"),
        ([*TURNS, wr(text="   ")], 4, "text", "empty_text"),
        ([*TURNS, wr(text="")], 4, "text", "empty_text"),
        ([*TURNS, {**TURNS[0], "order": 7}], 4, "turn_id", "duplicate_turn_id"),
        ([*TURNS, {**TURNS[0], "turn_id": "t7"}], 4, "order", "duplicate_order"),
        ([*TURNS, wr(), wr(text="again")], 5, "write_id", "duplicate_write_id"),
        ([*TURNS, wr(citations=["t1", "t9"])], 4, "citations[1]", "unknown_citation"),
        ([*TURNS, wr(citations=["t3"])], 4, "citations[0]", "citation_after_write"),
        ([*TURNS, wr(last_seen_turn="t9")], 4, "last_seen_turn", "unknown_write_point"),
        ([*TURNS, wr(conversation_id="other")], 4, "conversation_id", "conversation_without_turns"),
        ([*TURNS, wr(citaton=["t1"])], 4, "citaton", "unknown_field"),
        ([*TURNS, wr(operation="merge")], 4, "operation", "bad_value"),
        ([*TURNS, wr(citations=["t1", "t1"])], 4, "citations", "duplicate_citation"),
        ([*TURNS, {"type": "memory"}], 4, "type", "bad_value"),
        ([*TURNS, {"text": "no type"}], 4, "type", "missing_field"),
        ([*TURNS, "[1, 2]"], 4, None, "not_object"),
        ([{"type": "header", "schema_version": 2}, *TURNS], 1, "schema_version", "unsupported_version"),
    ],
)
def test_each_problem_is_named(tmp_path, rows, line, field, code):
    p = only(write(tmp_path / "log.jsonl", rows))
    assert (p.line, p.field, p.code) == (line, field, code)
    assert p.file.endswith("log.jsonl")
    assert p.message


def test_truncated_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(json.dumps(t).encode() for t in TURNS) + b'\n{"type": "write", "wri')
    p = only(path)
    assert (p.line, p.code) == (4, "truncated_line")
    assert "cut off" in p.message


def test_valid_last_line_without_newline_is_fine(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(json.dumps(t).encode() for t in [*TURNS, wr()]))
    assert problems_of(path) == []


def test_invalid_utf8(tmp_path):
    path = write(tmp_path / "log.jsonl", TURNS, raw_tail=b'{"type": "turn", "text": "caf\xe9"}\n')
    p = only(path)
    assert (p.line, p.code) == (4, "utf8")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(LogError) as e:
        load_log(tmp_path / "nope.jsonl")
    assert e.value.problems[0].code == "file_not_found"
    with pytest.raises(LogError) as e:
        load_log(tmp_path)
    assert e.value.problems[0].code == "unreadable"


def test_malformed_fixture_reports_every_line(fixtures):
    _, problems = check_log([fixtures / "malformed.jsonl"])
    codes = {p.line: p.code for p in problems}
    assert codes == {
        4: "invalid_json", 5: "missing_field", 6: "wrong_type", 7: "empty_text", 8: "duplicate_turn_id",
        10: "duplicate_write_id", 11: "unknown_citation", 12: "citation_after_write",
        13: "unknown_write_point", 14: "conversation_without_turns", 15: "utf8", 16: "truncated_line",
    }


def test_strict_raises_and_skip_invalid_counts(fixtures):
    with pytest.raises(LogError) as e:
        load_log(fixtures / "malformed.jsonl")
    assert len(e.value.problems) == 12
    log = load_log(fixtures / "malformed.jsonl", skip_invalid=True)
    assert [w.write_id for w in log.writes] == ["w2"]
    assert len(log.skipped) == 12
    assert {t.turn_id for t in log.conversations["c"].turns} == {"t1", "t2", "t3"}


def test_turns_and_writes_in_two_files(tmp_path):
    hist = write(tmp_path / "history.jsonl", TURNS)
    mem = write(tmp_path / "writes.jsonl", [wr(), wr(write_id="w2", citations=["t1", "t2"])])
    with pytest.raises(LogError):
        load_log(mem)
    log = load_log([hist, mem])
    assert [w.citations for w in log.writes] == [("t1",), ("t1", "t2")]


def test_schema_file_is_valid_json_schema():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema())
    v = Draft202012Validator(schema())
    assert v.is_valid(TURNS[0])
    assert v.is_valid(wr())
    assert not v.is_valid(wr(text=""))


def test_atomic_writer_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as fh:
        fh.write(b"partial")
        raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert list(tmp_path.iterdir()) == [target]


def test_gold_category_is_validated(tmp_path):
    lines = ['{"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "A", "text": "hi"}',
             '{"type": "write", "write_id": "w1", "conversation_id": "c", "text": "A said hi.", "citations": ["t1"], '
             '"last_seen_turn": "t1", "meta": {"gold": "citation-supported", "note": "free"}}',
             '{"type": "write", "write_id": "w2", "conversation_id": "c", "text": "A said hi.", "citations": ["t1"], '
             '"last_seen_turn": "t1", "meta": {"gold": "probably"}}']
    p = tmp_path / "g.jsonl"
    p.write_text("\n".join(lines) + "\n")
    log, problems = check_log([p])
    assert [(x.line, x.field, x.code) for x in problems] == [(3, "meta.gold", "bad_value")]
    assert log.writes[0].meta["gold"] == "citation-supported"


# ---------------------------------------------------------------- hardening: fixtures/bad/

BAD = Path(__file__).resolve().parents[2] / "fixtures" / "bad"


def _codes(name: str) -> list[tuple[int | None, str | None, str]]:
    _, problems = check_log([BAD / name])
    return [(p.line, p.field, p.code) for p in problems]


def test_nesting_is_capped_before_the_schema_sees_it():
    assert _codes("deep.jsonl") == [(4, None, "too_deep")]


def test_orders_are_integers_in_a_documented_range():
    assert _codes("orders.jsonl") == [(3, "order", "out_of_range"), (4, "order", "out_of_range"),
                                      (5, "order", "wrong_type"), (6, "order", "wrong_type"),
                                      (7, "order", "out_of_range")]


def test_duplicate_keys_are_rejected_but_quoted_colons_in_text_are_not():
    log, problems = check_log([BAD / "dup_key.jsonl"])
    assert [(p.line, p.field, p.code) for p in problems] == [(4, "text", "duplicate_key")]
    assert [w.write_id for w in log.writes] == ["w2"]  # 'He said "x": fine' is one key


def test_a_header_only_on_the_first_line():
    assert _codes("headers.jsonl") == [(3, "type", "misplaced_header")]


def test_parent_ids_name_another_write_without_cycles():
    log, problems = check_log([BAD / "parents.jsonl"])
    assert [(p.line, p.code) for p in problems] == [(4, "unknown_parent"), (5, "self_parent"),
                                                    (6, "parent_cycle"), (7, "parent_cycle")]
    assert [w.write_id for w in log.writes] == ["w5", "w6"]


def test_invisible_only_text_and_ids_are_blank():
    assert _codes("blank_text.jsonl") == [(4, "text", "empty_text"), (5, "write_id", "empty_id"),
                                          (6, "text", "empty_text")]


def test_ids_compare_after_nfc_and_misreadable_ids_warn_or_fail_under_strict():
    log, problems = check_log([BAD / "confusable.jsonl"])
    assert problems == []
    assert log.write("w1").citations == ("caf\u00e9",)  # the NFD citation resolved to the NFC turn
    assert sorted((w.line, w.code) for w in log.warnings) == [(5, "mixed_script_id"), (7, "invisible_in_id"),
                                                              (8, "invisible_in_id"), (9, "confusable_id")]
    with pytest.raises(LogError, match="confusable_id"):
        load_log(BAD / "confusable.jsonl", strict=True)


def test_only_accepted_records_claim_ids():
    log = load_log(BAD / "skip_claim.jsonl", skip_invalid=True)
    assert [(w.write_id, w.citations) for w in log.writes] == [("w1", ("t1",))]
    assert {(p.line, p.code) for p in log.skipped} == {(4, "unknown_citation"), (6, "empty_text"),
                                                       (6, "duplicate_citation")}


def test_gzip_is_read_transparently():
    log = load_log(BAD / "compressed.jsonl.gz")
    assert len(log.writes) == 1 and log.n_turns == 2


def test_damaged_gzip_names_the_file(tmp_path):
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes((BAD / "compressed.jsonl.gz").read_bytes()[:40])
    with pytest.raises(LogError, match="gzip-compressed but damaged"):
        load_log(p)


def test_read_events_are_validated_naming_line_and_field(fixtures):
    """Reads: a memory must be an accepted write of the same conversation stored by the read point;
    ranks number the list 1..n; a memory is listed once; read ids are unique; ranked objects are
    put in rank order."""
    from derivaudit.log.io import check_log

    log, problems = check_log([fixtures / "bad" / "reads.jsonl"])
    got = [(p.line, p.field, p.code) for p in problems]
    assert got == [
        (8, "retrieved[0]", "read_before_write"),
        (9, "retrieved[0]", "unknown_memory"),
        (9, "retrieved[1]", "unknown_memory"),  # w3 belongs to conversation d
        (10, "retrieved", "rank_gap"),
        (11, "retrieved[1]", "duplicate_retrieved"),
        (12, "read_id", "duplicate_read_id"),
        (13, "last_seen_turn", "unknown_read_point"),
    ]
    assert [r.read_id for r in log.reads] == ["r1", "r7"]
    r1, r7 = log.reads
    assert r1.retrieved == ("w1", "w2") and r1.scores == (None, 0.2)
    assert r7.retrieved == ("w1", "w2") and (r7.answer, r7.expected) == ("Porto", "Porto")


# ---------------------------------------------------------------- input limits


def test_a_line_over_the_limit_is_refused_with_its_number(tmp_path, monkeypatch):
    from derivaudit.log.io import LogError, load_log

    log = tmp_path / "long.jsonl"
    log.write_bytes(b'{"type": "header", "schema_version": 1}\n' + b'{"x": "' + b"a" * 5000 + b'"}\n')
    monkeypatch.setenv("MAX_LINE_BYTES", "1000")
    with pytest.raises(LogError) as e:
        load_log(log)
    (p,) = e.value.problems
    assert (p.line, p.code) == (2, "line_too_long") and "1,000 bytes" in p.message and "MAX_LINE_BYTES" in p.message
    monkeypatch.setenv("MAX_LINE_BYTES", "0")
    with pytest.raises(LogError, match="positive integer"):
        load_log(log)


def test_a_gzip_bomb_is_refused_early(tmp_path, monkeypatch):
    """2 MB of newlines compress ~1000x: refused on the ratio once 1 MB is inflated, and a stream
    of zeros with no newline on the line limit, before either fills memory."""
    import gzip

    from derivaudit.log.io import LogError, load_log

    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 2_000_000, 9))
    monkeypatch.setenv("GZIP_RATIO_FROM", "1000000")
    with pytest.raises(LogError) as e:
        load_log(bomb)
    assert e.value.problems[0].code == "too_large" and "decompression bomb" in e.value.problems[0].message
    zeros = tmp_path / "zeros.jsonl.gz"
    zeros.write_bytes(gzip.compress(b"\0" * 3_000_000, 9))
    monkeypatch.setenv("MAX_LINE_BYTES", "1000000")
    with pytest.raises(LogError) as e:
        load_log(zeros)
    assert e.value.problems[0].code == "line_too_long"
    monkeypatch.setenv("MAX_INFLATED_BYTES", "100")
    monkeypatch.setenv("GZIP_RATIO_FROM", str(2**40))
    small = tmp_path / "ok.jsonl.gz"
    small.write_bytes(gzip.compress(b'{"type": "header", "schema_version": 1}\n' * 10))
    with pytest.raises(LogError, match="MAX_INFLATED_BYTES"):
        load_log(small)


def _sup_log(tmp_path, *writes):
    import orjson

    rows = [{"type": "turn", "conversation_id": c, "turn_id": "t1", "order": 0, "speaker": "A", "text": "hello there"}
            for c in ("c", "d")]
    base = {"type": "write", "conversation_id": "c", "citations": ["t1"], "last_seen_turn": "t1"}
    rows += [{**base, **w} for w in writes]
    p = tmp_path / "sup.jsonl"
    p.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return p


@pytest.mark.parametrize("writes, code", [
    ([{"write_id": "a", "text": "x", "source_id": "fa"},
      {"write_id": "b", "text": "y", "verified_correction": True, "supersedes": ["fz"]}], "unknown_superseded"),
    ([{"write_id": "a", "text": "x", "source_id": "fa", "verified_correction": True, "supersedes": ["fa"]}],
     "self_supersedes"),
    ([{"write_id": "a", "text": "x", "source_id": "fa", "supersedes": ["fb"]},
      {"write_id": "b", "text": "y", "source_id": "fb", "supersedes": ["fa"]}], "supersedes_cycle"),
    ([{"write_id": "a", "text": "x", "source_id": "fa"},
      {"write_id": "b", "text": "y", "conversation_id": "d", "supersedes": ["fa"]}], "unknown_superseded"),
])
def test_supersedes_must_name_another_family_of_the_conversation(tmp_path, writes, code):
    """A typo in `supersedes` once let the echo gate pass on 0 instead of failing: an error, in
    load_log and in validate (which reads the log through the spill)."""
    from typer.testing import CliRunner

    from derivaudit.cli import app
    from derivaudit.log.io import LogError, load_log

    log = _sup_log(tmp_path, *writes)
    with pytest.raises(LogError) as e:
        load_log(log)
    assert code in {p.code for p in e.value.problems}
    assert all(p.field == "supersedes" and p.line for p in e.value.problems if p.code == code)
    r = CliRunner().invoke(app, ["validate", str(log)])
    assert r.exit_code == 2 and code in r.output


def test_supersedes_naming_a_family_by_its_first_write_is_accepted(tmp_path):
    from derivaudit.log.io import load_log

    log = _sup_log(tmp_path, {"write_id": "a", "text": "x"},
                   {"write_id": "b", "text": "y", "verified_correction": True, "supersedes": ["a"]})
    assert [w.write_id for w in load_log(log).writes] == ["a", "b"]


def test_atomic_dir_puts_a_folder_in_place_only_when_done_and_keeps_a_winner(tmp_path):
    from derivaudit.log.io import atomic_dir

    target = tmp_path / "models" / "converted"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "config.json").write_text("{}")
        raise RuntimeError("conversion failed")
    assert not target.exists() and not list(target.parent.iterdir())  # nothing half-made is left
    with atomic_dir(target) as tmp:
        (tmp / "config.json").write_text('{"mine": 1}')
    assert (target / "config.json").read_text() == '{"mine": 1}'
    with atomic_dir(target) as tmp:  # another process finished first: its folder stays
        (tmp / "config.json").write_text('{"late": 1}')
    assert (target / "config.json").read_text() == '{"mine": 1}' and len(list(target.parent.iterdir())) == 1


def op(**kw) -> dict:
    base = {"type": "operation", "operation_id": "o1", "conversation_id": "c", "kind": "delete", "target": "w1",
            "last_seen_turn": "t3"}
    base.update(kw)
    return base


@pytest.mark.parametrize(
    ("rows", "line", "field", "code"),
    [
        ([*TURNS, wr(), op(target="w9")], 5, "target", "unknown_target"),
        ([*TURNS, wr(citations=["t9"]), op()], 5, "target", "unknown_target"),  # its target was rejected
        ([*TURNS, wr(), op(last_seen_turn="t1")], 5, "target", "operation_before_target"),
        ([*TURNS, wr(), op(), op(operation_id="o2")], 6, "target", "target_deleted_twice"),
        ([*TURNS, wr(), op(), op(operation_id="o2", kind="invalidate")], 6, "target", "target_deleted_twice"),
        ([*TURNS, wr(), op(kind="invalidate"), op(operation_id="o2", kind="invalidate")], 6, "target",
         "target_invalidated_twice"),
        ([*TURNS, wr(), op(), op()], 6, "operation_id", "duplicate_operation_id"),
        ([*TURNS, wr(), op(kind="erase")], 5, "kind", "bad_value"),
        ([*TURNS, wr(), op(last_seen_turn="t9")], 5, "last_seen_turn", "unknown_operation_point"),
        ([*TURNS, wr(), op(last_seen_turn="t2", citations=["t3"])], 5, "citations[0]", "citation_after_operation"),
        ([*TURNS, wr(), op(successor="w1")], 5, "successor", "self_successor"),
        ([*TURNS, wr(), wr(write_id="w2", last_seen_turn="t3"), op(last_seen_turn="t2", successor="w2")], 6,
         "successor", "successor_after_operation"),
        ([*TURNS, {**TURNS[0], "conversation_id": "d"}, wr(), wr(write_id="w2", conversation_id="d",
                                                               last_seen_turn="t1", citations=[]),
          op(target="w2")], 7, "target", "cross_conversation_target"),
        ([*TURNS, wr(), op(origin="email")], 5, "origin", "bad_value"),
        ([*TURNS, wr(), op(meta={"gold": "fine"})], 5, "meta.gold", "bad_value"),
    ],
)
def test_each_operation_problem_is_named(tmp_path, rows, line, field, code):
    p = next(p for p in problems_of(write(tmp_path / "log.jsonl", rows)) if p.code == code)
    assert (p.line, p.field) == (line, field), str(p)


def test_operations_load_and_the_validator_on_disk_finds_the_same(tmp_path):
    from derivaudit.log.io import operation_to_dict
    from derivaudit.log.validation import validate

    rows = [*TURNS, wr(), wr(write_id="w2", last_seen_turn="t3"),
            op(kind="invalidate", successor="w2", citations=["t3"], origin="conversation", meta={"gold": "justified"}),
            op(operation_id="o2", target="w2", origin="api"), op(operation_id="o3", target="w2")]
    path = write(tmp_path / "log.jsonl", rows)
    log, problems = check_log([path])
    assert [o.operation_id for o in log.operations] == ["o1", "o2"] and [p.code for p in problems] == [
        "target_deleted_twice"]
    assert operation_to_dict(log.operations[0]) == rows[5]
    res = validate([path])
    assert res["operations"] == 2 and [p.code for p in res["problems"]] == ["target_deleted_twice"]
    assert validate([write(tmp_path / "ok.jsonl", rows[:-1])])["ok"]
