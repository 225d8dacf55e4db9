"""Importers on stores written by the real libraries' own code (fixtures/gen/, with truth.json).

Each test asserts the placement of every memory — owner, cited turns, validity — against what the
generator knows happened, so the fixtures are the real format, not our reading of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from derivaudit import LogError, load_log
from derivaudit.importers import run_import

ROOT = Path(__file__).resolve().parents[2] / "fixtures"


def _truth(name: str) -> dict:
    return json.loads((ROOT / name / "truth.json").read_text())


def _cited(log, w) -> list[str]:
    conv = log.conversations[w.conversation_id]
    return [conv.turns[conv.position[c]].text for c in w.citations]


def _mem0(tmp_path, **options):
    return run_import("mem0-db", ROOT / "mem0" / "history.db", tmp_path / "m.jsonl", options=options)


def test_mem0_db_never_places_a_memory_in_another_users_conversation(tmp_path):
    """mem0ai 2.2.1's own store: an evicted call next to another user's, two overlapping calls, an
    update() next to another user's call. Without pins every imported memory is in its owner's
    conversation citing its own call, and every row it cannot place for certain is counted."""
    truth = _truth("mem0")["memories"]
    log, notes = _mem0(tmp_path)
    for w in log.writes:
        key = w.source_id + ("@update" if w.operation == "update" else "")
        t = truth[key]
        assert w.conversation_id == t["scope"], (t["text"], w.conversation_id)
        assert _cited(log, w) == t["call"]
    placed = {w.text for w in log.writes}
    assert placed == {"Waters the ferns on Sundays", "Sister Ana is visiting in May", "Has a sister named Ana",
                      "Sister Ana visited in May"}
    # Alice (evicted) and Bob 30 s later; Carol and Dave overlapping; Erin and Frank 40 s apart
    assert notes["unlinked_reasons"] == {"ambiguous_scope": 6, "infer_false": 1, "scope_unknown": 1}
    assert notes["unlinked"] == 8 and notes["system_messages"] == 1
    assert all(t.speaker != "system" for c in log.conversations.values() for t in c.turns)
    assert "last 10 messages" in notes["note"]


def test_mem0_db_scopes_from_get_all_pin_every_memory_it_lists(tmp_path):
    """With Memory.get_all() output each listed memory id is placed in its own scope; an update()
    (no messages saved) is imported without citations and the version it replaced is not valid."""
    truth = _truth("mem0")["memories"]
    log, notes = _mem0(tmp_path, scopes=ROOT / "mem0" / "get_all.json")
    by_text = {w.text: w for w in log.writes}
    for w in log.writes:
        t = truth[w.source_id + ("@update" if w.operation == "update" else "")]
        assert (w.conversation_id, _cited(log, w), bool(w.valid)) == (t["scope"], t["call"], t["current"])
    assert {k for k, t in truth.items() if t["text"] not in by_text} == {
        k for k, t in truth.items() if t["text"] in ("Name is Alice", "Allergic to peanuts", "Prefers aisle seats")}
    # evicted; deleted (so not in get_all) next to Frank's call; infer=False
    assert notes["unlinked_reasons"] == {"ambiguous_scope": 1, "infer_false": 1, "messages_evicted": 1}
    night, day = by_text["Works mostly night shifts"], by_text["Works day shifts since March"]
    assert (night.valid, day.valid, day.parent_id, day.citations) == (False, True, night.write_id, ())
    assert day.last_seen_turn == night.last_seen_turn  # Bob's last kept turn before the edit
    assert "API edit" in day.meta["mem0"]
    # Carol's and Dave's overlapping calls: each cites her/his own messages
    assert _cited(log, by_text["Moved to Lisbon last month"])[0] == "I moved to Lisbon last month."
    assert _cited(log, by_text["Adopted a greyhound named Pixel"])[0].startswith("I just adopted")


def test_mem0_db_unplaced_update_still_retires_the_old_version(tmp_path):
    """An update() whose scope is unknown is counted, and the version it replaced is not valid."""
    import shutil
    import sqlite3

    db = tmp_path / "history.db"
    shutil.copy(ROOT / "mem0" / "history.db", db)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM messages WHERE session_scope = 'user_id=bob' AND created_at < '2026-03-02T09:30'")
    con.commit()
    con.close()
    log, notes = run_import("mem0-db", db, tmp_path / "m.jsonl", options={"scopes": ROOT / "mem0" / "get_all.json"})
    assert "Works mostly night shifts" not in {w.text for w in log.writes}
    ana = next(w for w in log.writes if w.text == "Sister Ana is visiting in May")
    assert ana.valid is False  # replaced by the API edit at 10:06
    assert notes["unlinked_reasons"]["no_call"] >= 1


def test_mem0_db_scopes_file_is_checked(tmp_path):
    bad = tmp_path / "scopes.json"
    bad.write_text(json.dumps([{"id": "x", "memory": "no owner"}]))
    with pytest.raises(LogError) as e:
        _mem0(tmp_path, scopes=bad)
    assert e.value.problems[0].field == "[0]" and str(bad) in e.value.problems[0].file
    with pytest.raises(LogError) as e:
        run_import("letta", ROOT / "letta_examples" / "loop.af", tmp_path / "o.jsonl", options={"scopes": bad})
    assert "takes no --scopes" in e.value.problems[0].message


def test_mem0_db_wrong_column_types_are_errors(tmp_path):
    import shutil
    import sqlite3

    db = tmp_path / "history.db"
    shutil.copy(ROOT / "mem0" / "history.db", db)
    con = sqlite3.connect(db)
    rid = con.execute("SELECT id FROM history WHERE new_memory = 'Has a sister named Ana'").fetchone()[0]
    con.execute("UPDATE history SET created_at = 1772442000, is_deleted = 'yes' WHERE id = ?", (rid,))
    con.commit()
    con.close()
    with pytest.raises(LogError) as e:
        run_import("mem0-db", db, tmp_path / "m.jsonl")
    assert sorted(p.field for p in e.value.problems) == [f"history[{rid}].created_at", f"history[{rid}].is_deleted"]
    assert not (tmp_path / "m.jsonl").exists()


def test_graphiti_orders_episodes_as_instants(tmp_path):
    """graphiti-core 0.31.2 models: 09:30+01:00 is before 09:00Z; write points and the invalidation
    chain (graphiti's own resolve_edge_contradictions) come out as the generator recorded them."""
    truth = _truth("graphiti")
    log, notes = run_import("graphiti", ROOT / "graphiti" / "export.json", tmp_path / "g.jsonl")
    for group, order in truth["turn_order"].items():
        assert [t.turn_id for t in log.conversations[group].turns] == order
    for uid, t in truth["edges"].items():
        w = log.write(uid)
        assert (w.conversation_id, w.last_seen_turn, bool(w.valid)) == (t["group"], t["last_seen_turn"], t["valid"])
        assert sorted(w.citations) == sorted(t["citations"])
        assert list(w.supersedes or ()) == t["supersedes"]
    assert notes["supersessions"] == 1


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_langgraph_real_stores(tmp_path, store):
    """langgraph 1.2.22 InMemoryStore/SqliteStore with their checkpointers, exported with the README
    snippet: each item in its thread citing the message it came from (SqliteStore stamps items to
    the second, before the message's sub-second checkpoint); no store keeps created_at across a put,
    so no item is reported as updated."""
    truth = _truth("langgraph")["items"]
    log, notes = run_import("langgraph", ROOT / "langgraph" / f"{store}_export.json", tmp_path / "l.jsonl")
    for wid, t in truth.items():
        w = next(x for x in log.writes if x.write_id == wid)
        if t["thread"] is not None:
            assert (w.conversation_id, _cited(log, w)) == (t["thread"], [t["cites"]])
    assert notes["updated_items"] == 0 and "reset created_at" in notes["note"]
    if store == "sqlite":
        assert notes["same_second_ties"] >= 2


def test_langgraph_same_second_in_two_threads_is_not_guessed(tmp_path):
    data = json.loads((ROOT / "langgraph" / "sqlite_export.json").read_text())
    trip = next(it for it in data["items"] if it["key"] == "trip")
    t1 = data["threads"][0]["checkpoints"][0]
    t1["ts"] = trip["updated_at"] + ".500000+00:00"  # thread-1's last message in the item's second too
    src = tmp_path / "e.json"
    src.write_text(json.dumps(data))
    log, notes = run_import("langgraph", src, tmp_path / "l.jsonl")
    assert "memories/sam/trip" not in {w.write_id for w in log.writes}
    assert notes["unlinked_reasons"] == {"same_second_threads": 1}


def test_openai_agents_real_session(tmp_path):
    truth = _truth("openai_agents")["sessions"]
    log, notes = run_import("openai-agents", ROOT / "openai_agents" / "session.db", tmp_path / "a.jsonl")
    assert {c: [t.text for t in conv.turns] for c, conv in log.conversations.items()} == truth
    assert notes["skipped system message"] == 1 and notes["skipped function_call"] == 1


LETTA = sorted((ROOT / "letta_examples").glob("*.af"))


@pytest.mark.parametrize("af", LETTA, ids=[p.name for p in LETTA])
def test_every_official_letta_example_loads_or_says_what_it_holds(tmp_path, af):
    """The 12 example agent files of letta-ai/agent-file: one holds memory-tool calls and imports;
    the rest hold no write provenance and fail with exit-2 problems that name their blocks — never
    a silent empty log, never a format error for the JSON-string-encoded ones."""
    raw = json.loads(af.read_text())
    data = json.loads(raw) if isinstance(raw, str) else raw
    labels = [b["label"] for b in data.get("blocks") or []]
    try:
        log, notes = run_import("letta", af, tmp_path / "o.jsonl")
    except LogError as e:
        (p,) = e.problems
        assert p.code == "no_writes" and p.file == str(af)
        assert all(f"{lab} (" in p.message for lab in labels)
        assert "no write provenance" in p.message if labels else "no memory blocks" in p.message
        assert not (tmp_path / "o.jsonl").exists()
        log, notes = run_import("letta", af, tmp_path / "o.jsonl", allow_empty=True)
        assert log.writes == []
    else:
        assert af.name == "lettabot-builder.af" and len(log.writes) == 3
        assert all(w.meta["tool"] == "memory_replace" for w in log.writes)
    if isinstance(raw, str):
        assert "JSON string" in notes["encoding"]


def test_letta_messages_in_time_order(tmp_path):
    """A summary Letta inserted at the head of the context, written later, is not before what it follows."""
    af = json.loads((ROOT / "letta_agent.af").read_text())
    msgs = af["agents"][0]["messages"]
    msgs.insert(0, msgs.pop())  # the file lists the last message first
    src = tmp_path / "a.af"
    src.write_text(json.dumps(af))
    a, _ = run_import("letta", ROOT / "letta_agent.af", tmp_path / "a.jsonl")
    b, _ = run_import("letta", src, tmp_path / "b.jsonl")
    assert [t.text for t in b.conversations["agent-0"].turns] == [t.text for t in a.conversations["agent-0"].turns]


def test_parent_in_another_conversation_is_rejected(tmp_path):
    rows = [{"type": "turn", "conversation_id": c, "turn_id": "t1", "order": 0, "speaker": "u", "text": "hi"}
            for c in ("a", "b")]
    rows += [{"type": "write", "write_id": "w1", "conversation_id": "a", "text": "x", "citations": ["t1"],
              "last_seen_turn": "t1"},
             {"type": "write", "write_id": "w2", "conversation_id": "b", "text": "y", "citations": ["t1"],
              "last_seen_turn": "t1", "parent_id": "w1"}]
    src = tmp_path / "log.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(LogError) as e:
        load_log(src)
    (p,) = e.value.problems
    assert (p.line, p.field, p.code) == (4, "parent_id", "cross_conversation_parent")


def test_mem0_db_notes_say_when_a_call_was_truncated(tmp_path):
    """mem0 keeps 10 messages per scope: a call of more than 10 keeps only 10 of them, and the notes say so."""
    import shutil
    import sqlite3

    db = tmp_path / "history.db"
    shutil.copy(ROOT / "mem0" / "history.db", db)
    con = sqlite3.connect(db)
    con.executemany("INSERT INTO messages VALUES (?, 'user_id=zed', 'user', ?, NULL, '2026-03-02T11:00:00+00:00')",
                    [(f"z{i}", f"line {i}") for i in range(10)])
    con.commit()
    con.close()
    _, notes = run_import("mem0-db", db, tmp_path / "m.jsonl", options={"scopes": ROOT / "mem0" / "get_all.json"})
    assert notes["truncated_calls"] == 1 and "kept only 10" in notes["note"]
    # and without pins zed, at the limit, may have lost a call at any earlier time: nothing is placed by time
    with pytest.raises(LogError):
        run_import("mem0-db", db, tmp_path / "m.jsonl")


def _cited_texts(log):
    """Each write as (conversation, text, the texts of its cited turns, its write point's text)."""
    out = {}
    for w in log.writes:
        turns = {t.turn_id: t.text for t in log.conversations[w.conversation_id].turns}
        out[w.write_id] = (w.conversation_id, w.text, tuple(turns[c] for c in w.citations), turns[w.last_seen_turn])
    return out


THIRD = "WHERE rowid = (SELECT MIN(rowid) FROM messages) + 2"


@pytest.mark.parametrize(("sql", "where"), [
    ("UPDATE messages SET created_at = 'yesterday' " + THIRD, "messages[2].created_at"),
    ("UPDATE messages SET created_at = 7 " + THIRD, "messages[2].created_at"),
    ("UPDATE messages SET created_at = NULL " + THIRD, "messages[2].created_at"),
    ("UPDATE messages SET session_scope = NULL " + THIRD, "messages[2].session_scope"),
    ("UPDATE messages SET role = NULL " + THIRD, "messages[2].role"),
    ("UPDATE history SET memory_id = NULL WHERE rowid = 1", "history[{id}].memory_id"),
    ("UPDATE history SET memory_id = X'07' WHERE rowid = 1", "history[{id}].memory_id"),
])
def test_a_damaged_mem0_db_is_an_error_naming_table_row_and_column_never_a_guess(tmp_path, sql, where):
    """A row mem0 would not have written is refused where it is; with --skip-invalid it is left out
    and every write imported still cites the very turns it cites in the undamaged store."""
    import shutil
    import sqlite3

    scopes = {"scopes": ROOT / "mem0" / "get_all.json"}
    clean, _ = run_import("mem0-db", ROOT / "mem0" / "history.db", tmp_path / "clean.jsonl", options=scopes)
    db = tmp_path / "history.db"
    shutil.copy(ROOT / "mem0" / "history.db", db)
    con = sqlite3.connect(db)
    first_id = con.execute("SELECT id FROM history WHERE rowid = 1").fetchone()[0]
    con.execute(sql)
    con.commit()
    con.close()
    with pytest.raises(LogError) as e:
        run_import("mem0-db", db, tmp_path / "m.jsonl", options=scopes)
    assert [p.field for p in e.value.problems] == [where.format(id=first_id)], e.value.problems
    kept, _ = run_import("mem0-db", db, tmp_path / "m.jsonl", skip_invalid=True, options=scopes)
    before, after = _cited_texts(clean), _cited_texts(kept)
    assert after and all(after[w] == before[w] for w in after), [w for w in after if after[w] != before[w]]


def test_mem0_db_deletions_become_operations_with_their_origin(tmp_path):
    """fixtures/mem0 (mem0ai 2.2.1) deletes two memories through delete(): one that was imported (an
    operation on its last version, origin api: mem0 2.x's add() only adds, and no call of its scope
    is near), one that was not (counted, not dropped silently)."""
    truth = json.loads((ROOT / "mem0" / "truth.json").read_text())["memories"]
    deleted = {v["text"] for v in truth.values() if v.get("deleted")}
    for options in ({}, {"scopes": ROOT / "mem0" / "get_all.json"}):
        log, notes = _mem0(tmp_path, **options)
        assert notes["deleted"] == 2 and notes["deletions_not_imported"] == 1
        (op,) = log.operations
        target = log.write(op.target)
        assert op.kind == "delete" and op.origin == "api" and target.text in deleted
        assert target.valid is False and target.conversation_id == op.conversation_id
        # updates made through update() carry origin api too (the lifecycle report sets them apart)
        assert all((w.meta or {}).get("origin") == "api" for w in log.writes if w.parent_id)


def test_graphiti_invalidated_edges_become_invalidate_operations(tmp_path):
    """fixtures/graphiti (graphiti-core 0.31.2's own resolve_edge_contradictions): the one edge it
    invalidated is an invalidate operation naming its successor, at the successor's write point."""
    truth = _truth("graphiti")["edges"]
    log, notes = run_import("graphiti", ROOT / "graphiti" / "export.json", tmp_path / "g.jsonl")
    invalid = {k for k, v in truth.items() if not v["valid"]}
    assert {o.target for o in log.operations} == invalid and notes["invalidations"] == len(invalid)
    for o in log.operations:
        succ = next(k for k, v in truth.items() if o.target in v["supersedes"])
        assert o.kind == "invalidate" and o.successor == succ and o.origin == "conversation"
        assert o.last_seen_turn == truth[succ]["last_seen_turn"]
