"""mem0 memory history export: each ADD/UPDATE event becomes a write.

Accepted input: a JSON list of history entries, or {"results": [...]} as mem0's platform API
returns them. Per entry (snake_case or camelCase keys): `id`, `memory_id`, `event`
(ADD/UPDATE/DELETE/NONE), `new_memory` (or `memory`), `old_memory`, `user_id`, `created_at`, and
`input`: the messages [{"role", "content"}] of the add() call that triggered it.

Mapping: conversation = `user_id` (or `run_id`/`agent_id`, else "default"); the messages of each
distinct add() call (same input and created_at) become turns once, in time order; a write cites
every message of its call and its write point is the call's last message. UPDATE entries point
to the previous write of the same memory through `parent_id` and count rewrite rounds;
`source_id` is the memory id; an UPDATE with its input is `meta.origin: "conversation"`. An UPDATE
with no input is an edit through the API (`client.update()`): imported with no citations at the
conversation's last turn before it, `meta.origin: "api"` (the lifecycle audit reports it apart).
NONE events write nothing and are counted.

A DELETE entry is a deletion of the memory's last imported version (the lifecycle audit judges it
against the turns after that version's write): with its `input` (the messages that led to it, which
the platform records like an ADD's) it is made in the conversation, at that call's last message,
citing its messages; with no input nothing in the conversation led to it (`client.delete()`), so it
is marked `origin: "api"` at the conversation's last turn before it. A DELETE belongs to the
conversation of its memory id; one naming another user is a problem (the record is inconsistent). A
DELETE of a memory that was never imported and a second DELETE of one memory are counted in the
notes, not imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..log.records import MAX_PASSAGES, Problem
from .common import ImportResult, instant, read_json


def _get(e: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if e.get(k) is not None:
            return e[k]
    return None


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    data = read_json(path)
    res = ImportResult()
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        data = data["results"]
    if not isinstance(data, list):
        res.problems.append(Problem(f, None, None, "bad_format",
                                    'expected a list of mem0 history entries or {"results": [...]}'))
        return res
    entries = []
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            res.problems.append(Problem(f, None, f"[{i}]", "bad_format", "history entry is not an object"))
            continue
        entries.append((str(_get(e, "created_at", "createdAt") or ""), i, e))
    # time order as instants (entries may carry different offsets); unreadable times keep file order, last
    entries.sort(key=lambda x: (instant(x[0]) is None, instant(x[0]) or 0.0, x[1]))

    batches: dict[tuple[str, str, bytes], list[str]] = {}
    order: dict[str, int] = {}
    last_write: dict[str, str] = {}
    rounds: dict[str, int] = {}
    skipped = {"DELETE": 0, "NONE": 0}
    stats: dict[str, int] = {}
    conv_of: dict[str, str] = {}  # memory id -> the conversation its writes are in
    deleted: set[str] = set()

    def turns_of(conv: str, created: str, msgs: list[dict[str, Any]]) -> list[str]:
        """The turn ids of one add() call's messages, made once per distinct call."""
        key = (conv, created, orjson.dumps(msgs))
        ids = batches.get(key)
        if ids is None:
            ids = batches[key] = []
            for m in msgs:
                n = order.get(conv, 0)
                order[conv] = n + 1
                tid = f"t{n + 1}"
                ids.append(tid)
                res.turns.append({"type": "turn", "conversation_id": conv, "turn_id": tid, "order": n,
                                  "speaker": str(m.get("role", "")), "text": m["content"],
                                  "time": created or None})
        return ids

    def last_turn(conv: str) -> str:
        """The conversation's latest turn so far (entries are in time order). Every imported memory's
        conversation has one: its first version cited the turns of its call."""
        return f"t{order[conv]}"

    def delete(where: str, named: Any, created: str, conv: str, msgs: Any, mid: str, wid: str) -> None:
        """A DELETE entry as a deletion of its memory's last imported version (module docstring)."""
        target = last_write.get(mid)
        if target is None:
            stats["deletions_not_imported"] = stats.get("deletions_not_imported", 0) + 1
            return
        if mid in deleted:
            stats["deletions_repeated"] = stats.get("deletions_repeated", 0) + 1
            return
        home = conv_of[mid]
        if named is not None and conv != home:
            res.problems.append(Problem(f, None, f"{where}.user_id", "bad_value",
                                        f"memory {mid!r} was written in conversation {home!r}; "
                                        f"its DELETE names {conv!r}"))
            return
        if msgs not in (None, []) and not _messages_ok(msgs):
            res.problems.append(Problem(f, None, f"{where}.input", "bad_value",
                                        "the input messages that led to the deletion need non-empty text"))
            return
        if msgs:
            ids = turns_of(home, created, msgs)
            point, cited, origin = ids[-1], ids[-MAX_PASSAGES:], "conversation"
        else:
            point, cited, origin = last_turn(home), [], "api"
        deleted.add(mid)
        res.operations.append({
            "type": "operation", "operation_id": f"delete:{wid}", "conversation_id": home, "kind": "delete",
            "target": target, "last_seen_turn": point, "citations": cited, "time": created or None,
            "origin": origin, "meta": {"mem0": "DELETE entry", "memory_id": mid}})

    for created, i, e in entries:
        where = f"[{i}]"
        event = str(_get(e, "event") or "").upper()
        if event in skipped:
            skipped[event] += 1
        if event == "NONE":
            continue
        if event not in ("ADD", "UPDATE", "DELETE"):
            res.problems.append(Problem(f, None, f"{where}.event", "bad_value",
                                        f"unknown event {event!r} (expected ADD, UPDATE, DELETE or NONE)"))
            continue
        named = _get(e, "user_id", "userId", "run_id", "agent_id")
        conv = str(named or "default")
        msgs = _get(e, "input")
        mid = str(_get(e, "memory_id", "memoryId") or _get(e, "id") or "")
        wid = str(_get(e, "id") or f"{mid}@{i}")
        if event == "DELETE":
            delete(where, named, created, conv, msgs, mid, wid)
            continue
        api_edit = event == "UPDATE" and msgs in (None, []) and mid in last_write
        if not api_edit and not _messages_ok(msgs):
            res.problems.append(Problem(f, None, f"{where}.input", "missing_field",
                                        "needs the non-empty input messages that triggered the write"))
            continue
        text = _get(e, "new_memory", "newMemory", "memory")
        if not isinstance(text, str) or not text.strip():
            res.problems.append(Problem(f, None, f"{where}.new_memory", "empty_text", "memory text is empty"))
            continue
        meta = None
        if api_edit:  # client.update(): no conversation led to it; the audit says what the history supports
            conv = conv_of[mid]
            cited, point = [], last_turn(conv)
            meta = {"origin": "api", "mem0": "UPDATE without input (an API edit): no citations"}
            stats["api_updates"] = stats.get("api_updates", 0) + 1
        else:
            ids = turns_of(conv, created, msgs)
            cited, point = ids[-MAX_PASSAGES:], ids[-1]
            if len(ids) > MAX_PASSAGES:
                res.notes["citations_truncated"] = res.notes.get("citations_truncated", 0) + 1
            if event == "UPDATE":
                meta = {"origin": "conversation"}
        res.writes.append({
            "type": "write", "write_id": wid, "conversation_id": conv, "text": text.strip(),
            "citations": cited, "last_seen_turn": point, "time": created or None,
            "source_id": mid or None, "parent_id": last_write.get(mid) if event == "UPDATE" else None,
            "operation": event.lower(), "round": rounds.get(mid, 0) if event == "UPDATE" else 0,
            **({"meta": meta} if meta else {}),
        })
        if mid:
            last_write[mid] = wid
            conv_of[mid] = conv
            rounds[mid] = rounds.get(mid, 0) + 1
    res.notes.update({"entries": len(data), "deleted_events": skipped["DELETE"],
                      "none_events": skipped["NONE"], **stats})
    return res


def _messages_ok(msgs: Any) -> bool:
    return isinstance(msgs, list) and bool(msgs) and all(
        isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].strip() for m in msgs)
