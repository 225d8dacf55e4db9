"""Importers against stores written by the real libraries' own code (fixtures/gen/, fixtures/*/truth.json).

Usage: python benchmarks/bench_importers.py [--json] [--letta-scale 100000] [--letta-chain 33333]
For every generated store, imports it and compares each memory with what really happened (the
generator's truth.json): placed right (right conversation, the turns of the call that wrote it),
approximate (right user, not provably the right turns: LangGraph's time join), unlinked (counted by
the importer with a reason, not imported), wrong (imported into another conversation, or citing
turns it did not come from). Also: replaced versions left valid, turn order, and what each of the
official Letta example agent files gives. `wrong` must be 0; the other counts are what the stores
allow. `--letta-scale N`: import time of synthetic Letta agent files of 4,000 … N messages (a user
turn, an archival insert and its return, and every fifth time a search returning five earlier
inserts), with seconds per 1,000 messages: flat when the import is linear. `--letta-chain N`: one
memory rewritten N times by core_memory_replace (a parent chain N long), 3,333 … N edits: the
import and the log check of its output (`validate`'s rules), seconds per 1,000 edits. Run either on
an older checkout (PYTHONPATH=that/checkout) for the before figures.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from derivaudit import LogError
from derivaudit.importers import importers, run_import

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _import(source, path, out, **kw):
    fn = run_import
    if kw and not set(kw) <= set(inspect.signature(fn).parameters):
        return None, {"skipped": f"this checkout's run_import takes no {sorted(kw)}"}
    try:
        return run_import(source, path, out, **kw)
    except LogError as e:
        return None, {"error": str(e.problems[0])}


def mem0(tmp: Path, pins: bool) -> dict:
    truth = json.loads((FIX / "mem0" / "truth.json").read_text())["memories"]
    kw = {"options": {"scopes": str(FIX / "mem0" / "get_all.json")}} if pins else {}
    log, notes = _import("mem0-db", FIX / "mem0" / "history.db", tmp / "m.jsonl", **kw)
    if log is None:
        return notes
    c: Counter = Counter(right=0, unlinked=0, wrong=0)
    for key, t in truth.items():
        mid = t.get("memory_id", key)
        op = "update" if t["how"] == "update" else "add"
        ws = [w for w in log.writes if w.source_id == mid and w.operation == op]
        if not ws:
            c["unlinked"] += 1
            continue
        w = ws[-1]
        conv = log.conversations[w.conversation_id]
        cited = [conv.turns[conv.position[x]].text for x in w.citations]
        ok = w.conversation_id == t["scope"] and cited == t["call"]
        c["right" if ok else "wrong"] += 1
        if bool(w.valid) != t["current"]:
            c["validity_wrong"] += 1
    gone = [k for k, t in truth.items() if not t["current"] and t["how"] != "update"]
    still = [w for w in log.writes if w.source_id in gone and w.valid and w.operation == "add"]
    c["replaced_left_valid"] = len(still)
    c["system_turns"] = sum(t.speaker == "system" for cv in log.conversations.values() for t in cv.turns)
    return {**c, "unlinked_reasons": notes.get("unlinked_reasons", notes.get("unlinked"))}


def graphiti(tmp: Path) -> dict:
    truth = json.loads((FIX / "graphiti" / "truth.json").read_text())
    log, notes = _import("graphiti", FIX / "graphiti" / "export.json", tmp / "g.jsonl")
    if log is None:
        return notes
    c: Counter = Counter(right=0, wrong=0, validity_wrong=0, turn_order_wrong=0)
    for uid, t in truth["edges"].items():
        w = log.write(uid)
        ok = (w.conversation_id == t["group"] and w.last_seen_turn == t["last_seen_turn"]
              and sorted(w.citations) == sorted(t["citations"]))
        c["right" if ok else "wrong"] += 1
        c["validity_wrong"] += bool(w.valid) != t["valid"]
    for g, order in truth["turn_order"].items():
        c["turn_order_wrong"] += [t.turn_id for t in log.conversations[g].turns] != order
    return dict(c)


def agents(tmp: Path) -> dict:
    truth = json.loads((FIX / "openai_agents" / "truth.json").read_text())["sessions"]
    log, notes = _import("openai-agents", FIX / "openai_agents" / "session.db", tmp / "a.jsonl")
    if log is None:
        return notes
    c: Counter = Counter(sessions_right=0, sessions_wrong=0)
    for s, texts in truth.items():
        got = [t.text for t in log.conversations[s].turns] if s in log.conversations else []
        c["sessions_right" if got == texts else "sessions_wrong"] += 1
    return dict(c)


def langgraph(tmp: Path) -> dict:
    truth = json.loads((FIX / "langgraph" / "truth.json").read_text())["items"]
    out = {}
    for store in ("memory", "sqlite"):
        log, notes = _import("langgraph", FIX / "langgraph" / f"{store}_export.json", tmp / f"{store}.jsonl")
        if log is None:
            out[store] = notes
            continue
        c: Counter = Counter(right=0, approximate=0, unlinked=0, wrong=0)
        for wid, t in truth.items():
            w = next((x for x in log.writes if x.write_id == wid), None)
            if w is None:
                c["unlinked"] += 1
                continue
            if t["thread"] is None:  # a background job's item: the join can only be approximate
                c["approximate"] += 1
                continue
            conv = log.conversations[w.conversation_id]
            cited = [conv.turns[conv.position[x]].text for x in w.citations]
            c["right" if w.conversation_id == t["thread"] and cited == [t["cites"]] else "wrong"] += 1
        c["updated_items_reported"] = notes.get("updated_items", 0)
        c["updated_items_true"] = sum(t["overwritten"] for t in truth.values())
        out[store] = dict(c)
    return out


def letta(tmp: Path) -> dict:
    out = {}
    for af in sorted((FIX / "letta_examples").glob("*.af")):
        log, notes = _import("letta", af, tmp / f"{af.stem}.jsonl")
        if log is None:
            out[af.name] = "refused: " + str(notes.get("error"))[:150]
        else:
            out[af.name] = f"{len(log.writes)} writes, {log.n_turns} turns" + (
                f"; {notes['note'][:90]}" if notes.get("note") else "")
    return out


def _letta_file(path: Path, n: int) -> None:
    msgs, k = [], 0
    while len(msgs) < n:
        msgs.append({"role": "user", "content": f"note {k}: I keep {k % 13} plants in room {k % 7}"})
        msgs.append({"role": "assistant", "tool_calls": [{"id": f"c{k}", "function": {
            "name": "archival_memory_insert", "arguments": json.dumps({"content": f"fact {k}: plants {k % 13}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": "None"})
        if k % 5 == 4:
            hits = "; ".join(f"fact {j}: plants {j % 13}" for j in range(max(0, k - 40), k, 8))
            msgs.append({"role": "assistant", "tool_calls": [{"id": f"s{k}", "function": {
                "name": "archival_memory_search", "arguments": json.dumps({"query": "plants"})}}]})
            msgs.append({"role": "tool", "tool_call_id": f"s{k}", "content": f"[{hits}]"})
        k += 1
    path.write_text(json.dumps({"agents": [{"id": "agent", "messages": msgs[:n]}]}))


def letta_scale(tmp: Path, top: int) -> None:
    import time

    n = 4000
    while n <= top:
        f = tmp / f"letta-{n}.af"
        _letta_file(f, n)
        t0 = time.perf_counter()
        log, notes = run_import("letta", f, tmp / f"letta-{n}.jsonl")
        secs = time.perf_counter() - t0
        print(f"letta {n:>7,} messages: {secs:6.2f} s ({1000 * secs / n:.3f} s per 1,000), "
              f"{len(log.writes):,} writes, {len(log.reads):,} reads")
        n = n * 2 if n * 2 <= top or n == top else top


def _letta_chain_file(path: Path, n: int) -> None:
    def call(k: int, name: str, args: dict) -> list[dict]:
        return [{"role": "assistant", "tool_calls": [{"id": f"c{k}", "function": {"name": name, "arguments":
                                                                           json.dumps(args)}}]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": "None"}]

    msgs = [{"role": "user", "content": "Hi, I'm Priya. I moved to Oslo."}]
    msgs += call(0, "core_memory_append", {"label": "human", "content": "fact 0"})
    for k in range(1, n):
        msgs += call(k, "core_memory_replace", {"label": "human", "old_content": f"fact {k - 1}",
                                                "new_content": f"fact {k}"})
    path.write_text(json.dumps({"agents": [{"id": "agent", "messages": msgs}]}))


def letta_chain(tmp: Path, top: int) -> None:
    import time

    from derivaudit.log.io import check_log

    for n in sorted({x for x in (3333, 10000, top) if x <= top}):
        f = tmp / f"chain-{n}.af"
        _letta_chain_file(f, n)
        t0 = time.perf_counter()
        log, _ = run_import("letta", f, tmp / f"chain-{n}.jsonl")
        t1 = time.perf_counter()
        check_log([tmp / f"chain-{n}.jsonl"])
        t2 = time.perf_counter()
        print(f"letta chain {n:>6,} edits: import {t1 - t0:6.2f} s ({1000 * (t1 - t0) / n:.3f} s per 1,000), "
              f"check {t2 - t1:6.2f} s ({1000 * (t2 - t1) / n:.3f} s per 1,000), {len(log.writes):,} writes")


def main() -> None:
    if "--letta-chain" in sys.argv:
        with tempfile.TemporaryDirectory() as d:
            letta_chain(Path(d), int(sys.argv[sys.argv.index("--letta-chain") + 1]))
        return
    if "--letta-scale" in sys.argv:
        with tempfile.TemporaryDirectory() as d:
            letta_scale(Path(d), int(sys.argv[sys.argv.index("--letta-scale") + 1]))
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        res = {"importers": sorted(importers()), "mem0-db": mem0(tmp, False), "mem0-db --scopes": mem0(tmp, True),
               "graphiti": graphiti(tmp), "openai-agents": agents(tmp), "langgraph": langgraph(tmp),
               "letta": letta(tmp)}
    if "--json" in sys.argv:
        print(json.dumps(res, indent=1))
        return
    for k, v in res.items():
        if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
            print(f"{k}:")
            for f, s in v.items():
                print(f"  {f:32} {s}")
        else:
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
