"""Importers: LoCoMo counts on the real data, mem0 and graphiti on hand-written exports."""

from __future__ import annotations

import json

import pytest

from derivaudit import LogError, load_log
from derivaudit.importers import run_import


@pytest.mark.slow
def test_locomo_counts(locomo_path, tmp_path):
    out = tmp_path / "locomo.jsonl"
    log, _ = run_import("locomo", locomo_path, out)
    assert len(log.conversations) == 10
    assert log.n_turns == 5882
    assert len(log.writes) == 2541
    again = load_log(out)  # what was written loads clean
    assert len(again.writes) == 2541 and again.n_turns == 5882
    conv26 = again.conversations["conv-26"]
    assert conv26.turns[0].time == "1:56 pm on 8 May, 2023"
    assert sum(w.conversation_id == "conv-26" for w in again.writes) == 184
    # a comma-separated evidence string became three citations
    multi = [w for w in again.writes if w.citations == ("D26:14", "D26:34", "D26:42")]
    assert len(multi) == 1
    # the write point is the last turn of the observation's session
    w = again.write("conv-26:s1:o1")
    assert w.last_seen_turn == "D1:18" and w.citations == ("D1:3",)


def _locomo(evidence) -> list:
    return [{
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1 May 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"},
                          {"speaker": "B", "dia_id": "D1:2", "text": "hello", "blip_caption": "a cat"}],
        },
        "observation": {"session_1_observation": {"A": [["A greeted B.", evidence]]}},
    }]


@pytest.mark.parametrize("evidence", ["D1:1", ["D1:1", "D1:2"], "D1:1, D1:2"])
def test_locomo_evidence_forms(tmp_path, evidence):
    src = tmp_path / "l.json"
    src.write_text(json.dumps(_locomo(evidence)))
    log, _ = run_import("locomo", src, tmp_path / "o.jsonl")
    assert log.writes[0].citations[0] == "D1:1"
    assert log.conversations["s1"].turns[1].text == "hello [shares image: a cat]"


@pytest.mark.parametrize("evidence", ["D:11:26", "D1:9", "D8:6; D9:17", 7])
def test_locomo_malformed_evidence_is_reported_not_guessed(tmp_path, evidence):
    src = tmp_path / "l.json"
    src.write_text(json.dumps(_locomo(evidence)))
    out = tmp_path / "o.jsonl"
    with pytest.raises(LogError) as e:
        run_import("locomo", src, out)
    (p,) = e.value.problems
    assert p.code == "bad_id" and "observation.session_1_observation.A[0][1]" in p.field
    assert not out.exists()
    log, _ = run_import("locomo", src, out, skip_invalid=True)
    assert log.writes == [] and len(log.skipped) == 1


def test_mem0_history(fixtures, tmp_path):
    log, notes = run_import("mem0", fixtures / "mem0_history.json", tmp_path / "m.jsonl")
    assert notes["deleted_events"] == 1
    assert sorted(log.conversations) == ["alice", "bob"]
    assert [t.text for t in log.conversations["alice"].turns][0].startswith("I stopped eating meat")
    assert log.conversations["alice"].turns.__len__() == 3  # the shared add() call is not duplicated
    upd = log.write("h3")
    assert (upd.operation, upd.parent_id, upd.round, upd.source_id) == ("update", "h1", 1, "m-diet")
    assert upd.citations == ("t3",)
    assert log.write("h2").citations == ("t1", "t2")
    # the DELETE entry ("Forget where I live.") is a deletion made in bob's conversation, at its message
    (op,) = log.operations
    assert (op.kind, op.target, op.conversation_id, op.origin) == ("delete", "h4", "bob", "conversation")
    assert log.conversations["bob"].turns[-1].text == "Forget where I live." and op.last_seen_turn == "t2"
    assert op.citations == ("t2",)
    from derivaudit.audit import lifecycle

    case, update = lifecycle.cases(log)  # the lifecycle audit takes it, against the turn after the write
    assert case.case_id == "delete:h5" and update.case_id == "update:h3"
    assert [t.text for t in lifecycle.after_turns(log, case)] == ["Forget where I live."]


def _mem0_entry(i, event, mid, user="u", text="Likes tea", msgs=("I like tea.",), at=None):
    return {"id": f"h{i}", "memory_id": mid, "event": event, "new_memory": text if event != "DELETE" else None,
            "old_memory": text if event == "DELETE" else None, "user_id": user,
            "created_at": at or f"2025-03-0{i}T10:00:00Z", "input": [{"role": "user", "content": m} for m in msgs]}


def test_mem0_deletions(tmp_path):
    """A DELETE with no input is an API deletion at the last turn before it; one sharing its add()
    call with an ADD shares the call's turns; a DELETE of a memory never imported, or of one already
    deleted, is counted; one naming another user than its memory's is a problem."""
    same_call, said = "2025-03-03T10:00:00Z", ("My cat ran off, I have a dog now.",)
    entries = [_mem0_entry(1, "ADD", "m1"), _mem0_entry(2, "ADD", "m2", text="Has a cat", msgs=("I have a cat.",)),
               _mem0_entry(3, "ADD", "m3", text="Has a dog", msgs=said, at=same_call),
               _mem0_entry(4, "DELETE", "m2", text="Has a cat", msgs=said, at=same_call),
               _mem0_entry(5, "DELETE", "m1", msgs=()), _mem0_entry(6, "DELETE", "m1", msgs=()),
               _mem0_entry(7, "DELETE", "m-unknown", msgs=())]
    src = tmp_path / "h.json"
    src.write_text(json.dumps(entries))
    log, notes = run_import("mem0", src, tmp_path / "o.jsonl")
    assert [t.text for t in log.conversations["u"].turns] == ["I like tea.", "I have a cat.",
                                                              "My cat ran off, I have a dog now."]
    cat, tea = log.operations
    assert (cat.target, cat.origin, cat.last_seen_turn, cat.citations) == ("h2", "conversation", "t3", ("t3",))
    assert (tea.target, tea.origin, tea.last_seen_turn, tea.citations) == ("h1", "api", "t3", ())
    assert notes["deleted_events"] == 4 and notes["deletions_repeated"] == 1 and notes["deletions_not_imported"] == 1
    assert load_log(tmp_path / "o.jsonl").operations == log.operations  # what was written loads clean

    entries[3]["user_id"] = "someone-else"
    src.write_text(json.dumps(entries))
    with pytest.raises(LogError) as e:
        run_import("mem0", src, tmp_path / "o2.jsonl")
    (p,) = e.value.problems
    assert p.field == "[3].user_id" and "'m2'" in p.message and not (tmp_path / "o2.jsonl").exists()


def test_mem0_update_through_the_api(tmp_path):
    """An UPDATE with no input (client.update()) is an API edit: no citations, at the last turn before
    it, origin api (the lifecycle audit counts it apart); one with input was made in the conversation;
    an UPDATE with no input of a memory never imported is still a problem."""
    entries = [_mem0_entry(1, "ADD", "m1"), _mem0_entry(2, "UPDATE", "m1", text="Likes green tea", msgs=()),
               _mem0_entry(3, "UPDATE", "m1", text="Likes black tea", msgs=("Black tea now.",))]
    src = tmp_path / "h.json"
    src.write_text(json.dumps(entries))
    log, notes = run_import("mem0", src, tmp_path / "o.jsonl")
    api, said = log.write("h2"), log.write("h3")
    assert (api.citations, api.last_seen_turn, api.parent_id, api.meta["origin"]) == ((), "t1", "h1", "api")
    assert (said.citations, said.parent_id, said.meta["origin"]) == (("t2",), "h2", "conversation")
    assert notes["api_updates"] == 1
    from derivaudit.audit import lifecycle

    assert [(c.case_id, c.origin) for c in lifecycle.cases(log)] == [("update:h2", "api"),
                                                                    ("update:h3", "conversation")]
    src.write_text(json.dumps([_mem0_entry(1, "UPDATE", "m9", msgs=())]))
    with pytest.raises(LogError) as e:
        run_import("mem0", src, tmp_path / "o2.jsonl")
    assert e.value.problems[0].field == "[0].input"


def test_mem0_entry_without_input(tmp_path):
    src = tmp_path / "m.json"
    src.write_text(json.dumps([{"id": "x", "event": "ADD", "new_memory": "m", "user_id": "u"}]))
    with pytest.raises(LogError) as e:
        run_import("mem0", src, tmp_path / "o.jsonl")
    assert e.value.problems[0].field == "[0].input"


def test_graphiti_export(fixtures, tmp_path):
    log, _ = run_import("graphiti", fixtures / "graphiti_export.json", tmp_path / "g.jsonl")
    kate = log.conversations["kate"]
    assert [t.turn_id for t in kate.turns] == ["ep-1", "ep-2", "ep-3", "ep-4"]
    assert kate.turns[0].speaker == "Kate" and kate.turns[0].text.startswith("I joined")
    e1 = log.write("e-1")
    assert e1.citations == ("ep-1", "ep-2") and e1.last_seen_turn == "ep-2" and e1.valid is False
    assert log.write("e-4").valid is True


def test_graphiti_edge_with_unknown_episode(fixtures, tmp_path):
    data = json.loads((fixtures / "graphiti_export.json").read_text())
    data["edges"][1]["episodes"] = ["ep-404"]
    src = tmp_path / "g.json"
    src.write_text(json.dumps(data))
    with pytest.raises(LogError) as e:
        run_import("graphiti", src, tmp_path / "o.jsonl")
    assert e.value.problems[0].field == "edges[1].episodes"


def test_import_of_broken_json(tmp_path):
    src = tmp_path / "x.json"
    src.write_text("[1, 2")
    with pytest.raises(LogError) as e:
        run_import("locomo", src, tmp_path / "o.jsonl")
    assert e.value.problems[0].code == "invalid_json"


def test_graphiti_invalidation_becomes_a_correction(fixtures, tmp_path):
    """e-1 (Kate is in the club) was invalidated at the valid_at of e-3 (she left it): e-3 supersedes
    e-1 and the echo audit sees one correction; an invalidated edge without a successor is counted."""
    from derivaudit.readpath.echo import audit_echo

    log, notes = run_import("graphiti", fixtures / "graphiti_export.json", tmp_path / "g.jsonl")
    e3 = log.write("e-3")
    assert e3.supersedes == ("e-1",) and e3.verified_correction is True and notes["supersessions"] == 1
    res = audit_echo(load_log(tmp_path / "g.jsonl"))
    assert [c["write_id"] for c in res.corrections] == ["e-3"] and res.corrections[0]["old"] == ["e-1"]
    assert res.metrics["echo.rri_storage"] == 0.0  # e-1 is no longer valid in storage
    data = json.loads((fixtures / "graphiti_export.json").read_text())
    data["edges"] = [e for e in data["edges"] if e["uuid"] != "e-3"]
    src = tmp_path / "g2.json"
    src.write_text(json.dumps(data))
    _, notes = run_import("graphiti", src, tmp_path / "g2.jsonl")
    assert notes["invalidated_without_successor"] == 1 and notes["supersessions"] == 0


def test_mem0_history_db(fixtures, tmp_path):
    """A real SQLite file in mem0's schema: rows are placed in the add() call whose kept messages were
    saved at the same instant (Pacific vs UTC stamps); a row whose messages mem0 evicted is counted,
    not guessed; versions chain by memory id; deleted and superseded versions are not valid."""
    import sqlite3

    db = tmp_path / "history.db"
    con = sqlite3.connect(db)
    con.executescript((fixtures / "mem0_history.sql").read_text())
    con.close()
    log, notes = run_import("mem0-db", db, tmp_path / "m.jsonl")
    assert (notes["history_rows"], notes["unlinked"], notes["none_events"], notes["deleted"]) == (6, 1, 1, 1)
    assert notes["unlinked_reasons"] == {"no_call": 1}  # January: no call of that time is kept
    assert [w.write_id for w in log.writes] == ["h1", "h2", "h3"]
    h1, h2, h3 = log.writes
    assert h1.citations == ("m1", "m2", "m3") and h3.citations == ("m4",) and h3.last_seen_turn == "m4"
    assert (h3.parent_id, h3.round, h3.source_id, h3.operation) == ("h2", 1, "mem-job", "update")
    assert (h1.valid, h2.valid, h3.valid) == (False, False, True)
    assert list(log.conversations) == ["user_id=alice"]
    again = load_log(tmp_path / "m.jsonl")  # the written log reads back the same
    assert [w.write_id for w in again.writes] == ["h1", "h2", "h3"]


def test_mem0_history_db_refuses_other_files(tmp_path):
    import sqlite3

    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(LogError) as e:
        run_import("mem0-db", other, tmp_path / "o.jsonl")
    assert e.value.problems[0].code == "bad_format"
    text = tmp_path / "x.db"
    text.write_text("not sqlite at all")
    with pytest.raises(LogError) as e:
        run_import("mem0-db", text, tmp_path / "o.jsonl")
    assert e.value.problems[0].code in ("unreadable", "bad_format")


def test_letta_agent_file(fixtures, tmp_path):
    """Memory-tool calls become writes citing the user turn before them; a failed edit, heartbeats,
    logins and inner monologue are not imported; a replace names the write it rewrites."""
    log, notes = run_import("letta", fixtures / "letta_agent.af", tmp_path / "l.jsonl")
    conv = log.conversations["agent-0"]
    assert [(t.speaker, t.text[:12]) for t in conv.turns] == [
        ("user", "Hi, I'm Priy"), ("assistant", "Welcome to O"), ("user", "Actually it'"),
        ("assistant", "Glad to help")]
    assert [w.write_id for w in log.writes] == ["call-1", "call-3", "call-4"]
    c1, c3, c4 = log.writes
    assert (c1.citations, c1.last_seen_turn, c1.meta["label"]) == (("t1",), "t1", "human")
    assert (c3.parent_id, c3.operation, c3.citations) == ("call-1", "update", ("t3",))
    assert c4.meta["tool"] == "archival_memory_insert" and c4.citations == ("t3",)
    assert (notes["memory_edits"], notes["failed_edits"]) == (4, 1)
    (read,) = log.reads  # the archival search, matched to the archival write its results hold
    assert (read.read_id, read.query) == ("call-6", "Priya's tastes")
    assert (read.retrieved, read.last_seen_turn) == (("call-4",), "t3")


def test_letta_older_single_agent_form(fixtures, tmp_path):
    af = json.loads((fixtures / "letta_agent.af").read_text())["agents"][0]
    af.pop("id")
    src = tmp_path / "old.af"
    src.write_text(json.dumps(af))
    log, _ = run_import("letta", src, tmp_path / "o.jsonl")
    assert list(log.conversations) == ["priya_helper"] and len(log.writes) == 3


def test_openai_agents_session_is_the_turn_side(fixtures, tmp_path):
    """Turns only (the SDK stores no memory writes); a store's writes that cite them load with it."""
    import sqlite3

    db = tmp_path / "session.db"
    con = sqlite3.connect(db)
    con.executescript((fixtures / "openai_agents_session.sql").read_text())
    con.close()
    log, notes = run_import("openai-agents", db, tmp_path / "turns.jsonl")
    assert [t.turn_id for t in log.conversations["conv_ana"].turns] == ["m1", "m5", "m6", "m7"]
    assert log.conversations["conv_ana"].turns[1].text == "Noted: no peanuts in your recipes."
    assert log.writes == [] and notes["skipped function_call"] == 1 and notes["skipped system message"] == 1
    writes = tmp_path / "store.jsonl"
    writes.write_text(json.dumps({"type": "write", "write_id": "w1", "conversation_id": "conv_ana",
                                  "text": "Ana is allergic to peanuts.", "citations": ["m1"],
                                  "last_seen_turn": "m5"}) + "\n")
    paired = load_log([tmp_path / "turns.jsonl", writes])
    assert paired.write("w1").citations == ("m1",)


def test_langgraph_store_joined_by_time(fixtures, tmp_path):
    """Each item lands in the thread with the latest message before it (its last human message is
    the citation); an item older than every message is counted, not imported."""
    log, notes = run_import("langgraph", fixtures / "langgraph_export.json", tmp_path / "g.jsonl")
    by = {w.write_id: w for w in log.writes}
    assert by["memories/sam/diet"].conversation_id == "thread-1" and by["memories/sam/diet"].citations == ("t1",)
    assert by["memories/sam/trip"].conversation_id == "thread-2"  # updated after thread-2's messages
    assert by["profile/sam/profile"].text == "name: Sam; home: Leeds"
    assert (notes["unlinked"], notes["updated_items"]) == (1, 1)
    # the tool message is not a turn
    assert [t.text for t in log.conversations["thread-2"].turns][-1] == "Enjoy the trip!"


def _source(fixtures, tmp_path, name):
    import sqlite3

    sql = {"mem0-db": "mem0_history.sql", "openai-agents": "openai_agents_session.sql"}
    if name in sql:
        db = tmp_path / f"{name}.db"
        con = sqlite3.connect(db)
        con.executescript((fixtures / sql[name]).read_text())
        con.close()
        return db
    return fixtures / {"mem0": "mem0_history.json", "graphiti": "graphiti_export.json", "letta": "letta_agent.af",
                       "langgraph": "langgraph_export.json"}[name]


@pytest.mark.parametrize("name", ["mem0", "mem0-db", "graphiti", "letta", "langgraph", "openai-agents"])
def test_every_importer_round_trips(fixtures, tmp_path, name):
    """The written log loads back to the same records, and importing it twice writes the same bytes."""
    from derivaudit.log.io import read_to_dict, turn_to_dict, write_to_dict

    src = _source(fixtures, tmp_path, name)
    log, _ = run_import(name, src, tmp_path / "a.jsonl")
    back = load_log(tmp_path / "a.jsonl")
    assert [write_to_dict(w) for w in back.writes] == [write_to_dict(w) for w in log.writes]
    assert [read_to_dict(r) for r in back.reads] == [read_to_dict(r) for r in log.reads]
    assert [turn_to_dict(t) for c in back.conversations.values() for t in c.turns] == \
        [turn_to_dict(t) for c in log.conversations.values() for t in c.turns]
    run_import(name, src, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert back.conversations and (back.writes or name == "openai-agents")


def test_letta_archival_index_finds_what_a_scan_of_every_insert_finds():
    """The index (the import was quadratic) gives the same reads, in the same order, as
    matching every earlier insert against the search return, short texts and repeats included."""
    import random

    from derivaudit.importers.letta import _Inserts

    rng = random.Random(0)
    words = ["pot", "kiln", "glaze", "river", "Porto", "May", "tiles", "a", "blue"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(200)]
    idx = _Inserts()
    for i, t in enumerate(texts):
        idx.add(t, f"w{i}")
    for _ in range(50):
        ret = " | ".join(rng.sample(texts, 5))
        naive = sorted((ret.find(t), f"w{i}") for i, t in enumerate(texts) if t in ret)
        assert idx.found_in(ret) == naive


def _letta_variant(fixtures, tmp_path, change):
    af = json.loads((fixtures / "letta_agent.af").read_text())
    change(af["agents"][0]["messages"])
    src = tmp_path / "variant.af"
    src.write_text(json.dumps(af))
    return src


def _memory_calls(msgs):
    return [(i, c) for i, m in enumerate(msgs) for c in m.get("tool_calls") or []
            if c["function"]["name"] in ("core_memory_append", "core_memory_replace", "archival_memory_insert")]


def test_letta_tool_arguments_that_are_not_json_are_an_error_at_their_json_path(fixtures, tmp_path):
    def break_args(msgs):
        i, c = _memory_calls(msgs)[0]
        c["function"]["arguments"] = "{label: human, content: oops"

    src = _letta_variant(fixtures, tmp_path, break_args)
    with pytest.raises(LogError) as e:
        run_import("letta", src, tmp_path / "x.jsonl")
    (p,) = [p for p in e.value.problems if p.code == "invalid_json"]
    assert p.file == str(src) and p.field.startswith("agents[0].messages[") and p.field.endswith(
        "].tool_calls[0].function.arguments")


def test_letta_a_failed_edit_without_a_call_id_is_not_a_memory(fixtures, tmp_path):
    """The failed edit of the fixture, with the ids of its call and return removed: its return is
    the next tool message, which says it failed."""
    def drop_ids(msgs):
        for i, c in _memory_calls(msgs):
            nxt = next(m for m in msgs[i + 1:] if m.get("role") == "tool")
            if "fail" in json.dumps(nxt).lower():
                c.pop("id")
                nxt.pop("tool_call_id")

    log, notes = run_import("letta", _letta_variant(fixtures, tmp_path, drop_ids), tmp_path / "x.jsonl")
    assert notes["failed_edits"] == 1 and [w.write_id for w in log.writes] == ["call-1", "call-3", "call-4"]


def test_openai_agents_a_session_id_that_is_null_is_an_error_at_its_row(fixtures, tmp_path):
    import sqlite3

    db = tmp_path / "session.db"  # a table another writer made, without the SDK's NOT NULL
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT, "
                "created_at TEXT)")
    for rid, sid in ((1, "conv_ana"), (5, None)):
        con.execute("INSERT INTO agent_messages VALUES (?, ?, ?, ?)",
                    (rid, sid, json.dumps({"role": "user", "content": "hi there"}), "2025-01-01 10:00:00"))
    con.commit()
    con.close()
    with pytest.raises(LogError) as e:
        run_import("openai-agents", db, tmp_path / "turns.jsonl")
    assert [(p.field, p.code) for p in e.value.problems] == [("agent_messages[5].session_id", "wrong_type")]


def test_graphiti_edge_without_a_fact_is_named_at_its_json_path(fixtures, tmp_path):
    data = json.loads((fixtures / "graphiti_export.json").read_text())
    data["edges"][0].pop("fact")
    src = tmp_path / "g.json"
    src.write_text(json.dumps(data))
    with pytest.raises(LogError) as e:
        run_import("graphiti", src, tmp_path / "out.jsonl")
    assert [(p.file, p.field, p.code) for p in e.value.problems] == [(str(src), "edges[0].fact", "missing_field")]


def test_a_converted_record_that_fails_validation_is_named_in_the_input(fixtures, tmp_path):
    """1,001 archival search results: the problem names the Letta file and the message it came
    from, not a line of an output file that was never written, and says the reads' limit."""
    def many_results(msgs):
        for k in range(1001):  # after the last user turn, each insert answered by its tool return
            msgs.append({"role": "assistant", "tool_calls": [{"id": f"x{k}", "function": {
                "name": "archival_memory_insert", "arguments": json.dumps({"content": f"fact number {k}"})}}]})
            msgs.append({"role": "tool", "tool_call_id": f"x{k}", "content": "None"})
        hits = "; ".join(f"fact number {k}" for k in range(1001))
        msgs.append({"role": "assistant", "tool_calls": [{"id": "s1", "function": {
            "name": "archival_memory_search", "arguments": json.dumps({"query": "facts"})}}]})
        msgs.append({"role": "tool", "tool_call_id": "s1", "content": hits})

    src = _letta_variant(fixtures, tmp_path, many_results)
    out = tmp_path / "out.jsonl"
    with pytest.raises(LogError) as e:
        run_import("letta", src, out)
    (p,) = e.value.problems
    assert p.file == str(src) and p.line is None and p.code == "too_many_retrieved"
    assert p.field.startswith("agents[0].messages[") and p.field.endswith("(retrieved)")
    assert "at most 1000" in p.message and not out.exists()


def _replace_with(old: str):
    def change(msgs):
        call = msgs[8]["tool_calls"][0]["function"]
        call["arguments"] = json.dumps({"label": "human", "old_content": old, "new_content": ""})
    return change


def test_letta_a_replace_by_nothing_removes_the_memory_or_leaves_its_rest(fixtures, tmp_path):
    """Letta's core_memory_replace is `value.replace(old, new)`: with an empty new text the old text
    is removed. The whole of an earlier write removed is a deletion of it; part of it leaves the
    rest as its new version."""
    src = _letta_variant(fixtures, tmp_path, _replace_with("Name: Priya. Moved to Oslo to work at the aquarium."))
    log, notes = run_import("letta", src, tmp_path / "d.jsonl")
    assert [w.write_id for w in log.writes] == ["call-1", "call-4"]
    (op,) = log.operations
    assert (op.kind, op.target, op.last_seen_turn, op.origin) == ("delete", "call-1", "t3", "conversation")
    assert notes["removals"] == 1
    log, notes = run_import("letta", _letta_variant(fixtures, tmp_path, _replace_with(" to work at the aquarium")),
                            tmp_path / "p.jsonl")
    c3 = log.write("call-3")
    assert (c3.text, c3.parent_id, c3.operation, c3.citations) == ("Name: Priya. Moved to Oslo", "call-1", "update",
                                                                   ("t3",))
    assert not log.operations and notes["partial_removals"] == 1
    log, notes = run_import("letta", _letta_variant(fixtures, tmp_path, _replace_with("no such text")),
                            tmp_path / "u.jsonl")
    assert notes["removals_unmatched"] == 1 and not log.operations


def _letta_tool_agent(calls):
    """An agent file whose user says one thing before each memory-tool call (OK returns)."""
    msgs = []
    for k, (said, name, args) in enumerate(calls):
        t = k + 1
        msgs.append({"created_at": f"2025-05-02T10:{t:02d}:00+00:00", "role": "user",
                     "content": [{"type": "text", "text": said}], "id": f"u{k}"})
        msgs.append({"created_at": f"2025-05-02T10:{t:02d}:30+00:00", "role": "assistant", "content": [],
                     "tool_calls": [{"id": f"call-{k + 1}", "type": "function",
                                     "function": {"name": name, "arguments": json.dumps(args)}}], "id": f"a{k}"})
        msgs.append({"created_at": f"2025-05-02T10:{t:02d}:40+00:00", "role": "tool", "tool_call_id": f"call-{k + 1}",
                     "content": [{"type": "text", "text": '{"status": "OK"}'}], "id": f"r{k}"})
    return {"agents": [{"id": "agent-1", "messages": msgs}]}


def test_letta_memory_tool_commands(tmp_path):
    """Letta's `memory` tool (core_tool_executor.py): create / str_replace (`old_string`, `new_string`) /
    insert write to the block its `path` names; delete detaches the block, a deletion of each memory
    still on it; rename moves them; memory_apply_patch is counted; rethink_memory names its block
    `target_block_label`."""
    af = _letta_tool_agent([
        ("I live in Oslo.", "memory", {"command": "create", "path": "/memories/human", "description": "the user",
                                       "file_text": "Lives in Oslo."}),
        ("I moved to Bergen.", "memory", {"command": "str_replace", "path": "/memories/human",
                                          "old_string": "Oslo", "new_string": "Bergen"}),
        ("I have a cat.", "memory", {"command": "insert", "path": "/memories/human", "insert_text": "Has a cat."}),
        ("Call that block me.", "memory", {"command": "rename", "old_path": "/memories/human",
                                           "new_path": "/memories/me"}),
        ("I like tea.", "memory_apply_patch", {"label": "me", "patch": "+Likes tea."}),
        ("Summarise.", "rethink_memory", {"target_block_label": "notes", "new_memory": "Talks about moving."}),
        ("Forget all that about me.", "memory", {"command": "delete", "path": "/memories/me"}),
        ("Forget the notes too.", "memory", {"command": "delete", "path": "/memories/nothing-here"}),
    ])
    src = tmp_path / "a.af"
    src.write_text(json.dumps(af))
    log, notes = run_import("letta", src, tmp_path / "l.jsonl")
    assert [(w.write_id, w.text, w.parent_id, w.operation) for w in log.writes] == [
        ("call-1", "Lives in Oslo.", None, "add"), ("call-2", "Bergen", "call-1", "update"),
        ("call-3", "Has a cat.", None, "add"), ("call-6", "Talks about moving.", None, "consolidate")]
    assert log.write("call-2").meta["label"] == "human" and log.write("call-6").meta["label"] == "notes"
    # the block renamed to "me" is deleted: its latest versions, not the replaced one
    assert [(o.operation_id, o.target, o.last_seen_turn, o.origin) for o in log.operations] == [
        ("call-7:1", "call-2", "t7", "conversation"), ("call-7:2", "call-3", "t7", "conversation")]
    assert notes["patch_edits_not_imported"] == 1 and notes["block_deletions"] == 1
    assert notes["block_deletions_unmatched"] == 1
    assert load_log(tmp_path / "l.jsonl").operations == log.operations
    # str_replace by nothing removes the text: the whole memory is a deletion of it
    af = _letta_tool_agent([
        ("I live in Oslo.", "memory", {"command": "create", "path": "/memories/human", "description": "the user",
                                       "file_text": "Lives in Oslo."}),
        ("Forget where I live.", "memory", {"command": "str_replace", "path": "/memories/human",
                                            "old_string": "Lives in Oslo.", "new_string": ""})])
    src.write_text(json.dumps(af))
    log, notes = run_import("letta", src, tmp_path / "r.jsonl")
    assert [(o.target, o.kind, o.last_seen_turn) for o in log.operations] == [("call-1", "delete", "t2")]


@pytest.mark.parametrize("source", ["letta", "graphiti", "mem0", "locomo", "langgraph", "mem0-db", "openai-agents"])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_or_random_input_is_refused_at_once(tmp_path, source, device):
    with pytest.raises(LogError) as e:
        run_import(source, device, tmp_path / "out.jsonl")
    assert e.value.problems[0].file == device and e.value.problems[0].code in ("invalid_json", "bad_format", "utf8")
    assert not (tmp_path / "out.jsonl").exists()


def test_a_document_over_the_size_limit_is_refused_before_it_is_read(tmp_path, fixtures, monkeypatch):
    monkeypatch.setenv("MAX_DOCUMENT_BYTES", "1000")
    with pytest.raises(LogError) as e:
        run_import("letta", fixtures / "letta_agent.af", tmp_path / "out.jsonl")
    assert e.value.problems[0].code == "too_large" and "MAX_DOCUMENT_BYTES" in e.value.problems[0].message
    monkeypatch.setenv("MAX_DOCUMENT_BYTES", str(10**9))
    assert run_import("letta", fixtures / "letta_agent.af", tmp_path / "out.jsonl")[0].writes


def _args_of(i: int, args: dict):
    def change(msgs):
        msgs[i]["tool_calls"][0]["function"]["arguments"] = json.dumps(args)
    return change


def _set(i: int, key: str, value):
    def change(msgs):
        msgs[i][key] = value
    return change


def _drop_return(msgs):
    del msgs[11]  # the tool return of call-4 (archival_memory_insert)


@pytest.mark.parametrize(("change", "field", "code"), [
    (_args_of(3, {"label": "human"}), "agents[0].messages[3].tool_calls[0].function.arguments.content",
     "missing_field"),
    (_args_of(3, {"label": "human", "content": 5}), "agents[0].messages[3].tool_calls[0].function.arguments.content",
     "wrong_type"),
    (_set(5, "tool_calls", "send_message"), "agents[0].messages[5].tool_calls", "wrong_type"),
    (_set(7, "role", 7), "agents[0].messages[7].role", "wrong_type"),
    (lambda msgs: msgs.__setitem__(7, "Actually it's the science museum"), "agents[0].messages[7]", "wrong_type"),
])
def test_a_damaged_letta_file_is_an_error_at_its_place_never_a_silent_loss(fixtures, tmp_path, change, field, code):
    with pytest.raises(LogError) as e:
        run_import("letta", _letta_variant(fixtures, tmp_path, change), tmp_path / "out.jsonl")
    assert [(p.field, p.code) for p in e.value.problems] == [(field, code)]


def test_a_letta_edit_without_its_tool_return_is_not_imported_as_made(fixtures, tmp_path):
    clean, _ = run_import("letta", fixtures / "letta_agent.af", tmp_path / "a.jsonl")
    log, notes = run_import("letta", _letta_variant(fixtures, tmp_path, _drop_return), tmp_path / "b.jsonl")
    assert "call-4" in {w.write_id for w in clean.writes} and "call-4" not in {w.write_id for w in log.writes}
    assert notes["edits_without_return"] == 1


def _graphiti_variant(fixtures, tmp_path, table: str, i: int, **fields):
    doc = json.loads((fixtures / "graphiti_export.json").read_text())
    doc[table][i].update(fields)
    src = tmp_path / "g.json"
    src.write_text(json.dumps(doc))
    return src


@pytest.mark.parametrize(("table", "fields", "field", "code"), [
    ("episodes", {"valid_at": "not a date"}, "episodes[0].valid_at", "bad_value"),
    ("episodes", {"valid_at": "2026-02-30T09:00:00Z"}, "episodes[0].valid_at", "bad_value"),
    ("episodes", {"valid_at": None, "created_at": None}, "episodes[0].valid_at", "missing_field"),
    ("episodes", {"content": ["a"]}, "episodes[0].content", "wrong_type"),
    ("edges", {"invalid_at": "garbage"}, "edges[0].invalid_at", "bad_value"),
    ("edges", {"expired_at": 5}, "edges[0].expired_at", "wrong_type"),
])
def test_a_damaged_graphiti_export_is_an_error_at_its_json_path(fixtures, tmp_path, table, fields, field, code):
    src = _graphiti_variant(fixtures, tmp_path, table, 0, **fields)
    with pytest.raises(LogError) as e:
        run_import("graphiti", src, tmp_path / "out.jsonl")
    assert [(p.field, p.code) for p in e.value.problems][:1] == [(field, code)], e.value.problems
