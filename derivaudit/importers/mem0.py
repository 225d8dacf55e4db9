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


def _entries(f: str, data: Any, res: ImportResult) -> list[tuple[str, int, dict[str, Any]]] | None:
    """The history entries as (created_at, index, entry) in time order; None when the document is
    not a history at all."""
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        data = data["results"]
    if not isinstance(data, list):
        res.problems.append(Problem(f, None, None, "bad_format",
                                    'expected a list of mem0 history entries or {"results": [...]}'))
        return None
    entries = []
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            res.problems.append(Problem(f, None, f"[{i}]", "bad_format", "history entry is not an object"))
            continue
        entries.append((str(_get(e, "created_at", "createdAt") or ""), i, e))
    # time order as instants (entries may carry different offsets); unreadable times keep file order, last
    entries.sort(key=lambda x: (instant(x[0]) is None, instant(x[0]) or 0.0, x[1]))
    return entries


class _History:
    """One history being imported: the turns made so far (once per distinct add() call), each
    memory's last imported version, conversation and rewrite round."""

    def __init__(self, f: str, res: ImportResult) -> None:
        self.f, self.res = f, res
        self.batches: dict[tuple[str, str, bytes], list[str]] = {}
        self.order: dict[str, int] = {}
        self.last_write: dict[str, str] = {}
        self.rounds: dict[str, int] = {}
        self.skipped = {"DELETE": 0, "NONE": 0}
        self.stats: dict[str, int] = {}
        self.conv_of: dict[str, str] = {}  # memory id -> the conversation its writes are in
        self.deleted: set[str] = set()

    def problem(self, where: str, code: str, message: str) -> None:
        self.res.problems.append(Problem(self.f, None, where, code, message))

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def turns_of(self, conv: str, created: str, msgs: list[dict[str, Any]]) -> list[str]:
        """The turn ids of one add() call's messages, made once per distinct call."""
        key = (conv, created, orjson.dumps(msgs))
        ids = self.batches.get(key)
        if ids is None:
            ids = self.batches[key] = []
            for m in msgs:
                n = self.order.get(conv, 0)
                self.order[conv] = n + 1
                tid = f"t{n + 1}"
                ids.append(tid)
                self.res.turns.append({"type": "turn", "conversation_id": conv, "turn_id": tid, "order": n,
                                       "speaker": str(m.get("role", "")), "text": m["content"],
                                       "time": created or None})
        return ids

    def last_turn(self, conv: str) -> str:
        """The conversation's latest turn so far (entries are in time order). Every imported memory's
        conversation has one: its first version cited the turns of its call."""
        return f"t{self.order[conv]}"

    def delete(self, where: str, named: Any, created: str, conv: str, msgs: Any, mid: str, wid: str) -> None:
        """A DELETE entry as a deletion of its memory's last imported version (module docstring)."""
        target = self.last_write.get(mid)
        if target is None:
            return self.count("deletions_not_imported")
        if mid in self.deleted:
            return self.count("deletions_repeated")
        home = self.conv_of[mid]
        if named is not None and conv != home:
            return self.problem(f"{where}.user_id", "bad_value", f"memory {mid!r} was written in conversation "
                                f"{home!r}; its DELETE names {conv!r}")
        if msgs not in (None, []) and not _messages_ok(msgs):
            return self.problem(f"{where}.input", "bad_value",
                                "the input messages that led to the deletion need non-empty text")
        if msgs:
            ids = self.turns_of(home, created, msgs)
            point, cited, origin = ids[-1], ids[-MAX_PASSAGES:], "conversation"
        else:
            point, cited, origin = self.last_turn(home), [], "api"
        self.deleted.add(mid)
        self.res.operations.append({
            "type": "operation", "operation_id": f"delete:{wid}", "conversation_id": home, "kind": "delete",
            "target": target, "last_seen_turn": point, "citations": cited, "time": created or None,
            "origin": origin, "meta": {"mem0": "DELETE entry", "memory_id": mid}})

    def entry(self, created: str, i: int, e: dict[str, Any]) -> None:
        """One history entry: a write (ADD, UPDATE), a deletion (DELETE), or nothing (NONE)."""
        where = f"[{i}]"
        event = str(_get(e, "event") or "").upper()
        if event in self.skipped:
            self.skipped[event] += 1
        if event == "NONE":
            return
        if event not in ("ADD", "UPDATE", "DELETE"):
            return self.problem(f"{where}.event", "bad_value",
                                f"unknown event {event!r} (expected ADD, UPDATE, DELETE or NONE)")
        named = _get(e, "user_id", "userId", "run_id", "agent_id")
        conv = str(named or "default")
        msgs = _get(e, "input")
        mid = str(_get(e, "memory_id", "memoryId") or _get(e, "id") or "")
        wid = str(_get(e, "id") or f"{mid}@{i}")
        if event == "DELETE":
            return self.delete(where, named, created, conv, msgs, mid, wid)
        api_edit = event == "UPDATE" and msgs in (None, []) and mid in self.last_write
        if not api_edit and not _messages_ok(msgs):
            return self.problem(f"{where}.input", "missing_field",
                                "needs the non-empty input messages that triggered the write")
        text = _get(e, "new_memory", "newMemory", "memory")
        if not isinstance(text, str) or not text.strip():
            return self.problem(f"{where}.new_memory", "empty_text", "memory text is empty")
        self.write(event, created, conv, msgs, mid, wid, text, api_edit)

    def write(self, event: str, created: str, conv: str, msgs: Any, mid: str, wid: str, text: str,
              api_edit: bool) -> None:
        meta = None
        if api_edit:  # client.update(): no conversation led to it; the audit says what the history supports
            conv = self.conv_of[mid]
            cited, point = [], self.last_turn(conv)
            meta = {"origin": "api", "mem0": "UPDATE without input (an API edit): no citations"}
            self.count("api_updates")
        else:
            ids = self.turns_of(conv, created, msgs)
            cited, point = ids[-MAX_PASSAGES:], ids[-1]
            if len(ids) > MAX_PASSAGES:
                self.res.notes["citations_truncated"] = self.res.notes.get("citations_truncated", 0) + 1
            if event == "UPDATE":
                meta = {"origin": "conversation"}
        self.res.writes.append({
            "type": "write", "write_id": wid, "conversation_id": conv, "text": text.strip(),
            "citations": cited, "last_seen_turn": point, "time": created or None,
            "source_id": mid or None, "parent_id": self.last_write.get(mid) if event == "UPDATE" else None,
            "operation": event.lower(), "round": self.rounds.get(mid, 0) if event == "UPDATE" else 0,
            **({"meta": meta} if meta else {}),
        })
        if mid:
            self.last_write[mid] = wid
            self.conv_of[mid] = conv
            self.rounds[mid] = self.rounds.get(mid, 0) + 1


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    data = read_json(path)
    res = ImportResult()
    entries = _entries(f, data, res)
    if entries is None:
        return res
    h = _History(f, res)
    for created, i, e in entries:
        h.entry(created, i, e)
    res.notes.update({"entries": len(data["results"] if isinstance(data, dict) else data),
                      "deleted_events": h.skipped["DELETE"], "none_events": h.skipped["NONE"], **h.stats})
    return res


def _messages_ok(msgs: Any) -> bool:
    return isinstance(msgs, list) and bool(msgs) and all(
        isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].strip() for m in msgs)
