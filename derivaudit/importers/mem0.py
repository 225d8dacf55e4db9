"""mem0 memory history export: each ADD/UPDATE event becomes a write.

Accepted input: a JSON list of history entries, or {"results": [...]} as mem0's platform API
returns them. Per entry (snake_case or camelCase keys): `id`, `memory_id`, `event`
(ADD/UPDATE/DELETE/NONE), `new_memory` (or `memory`), `old_memory`, `user_id`, `created_at`, and
`input`: the messages [{"role", "content"}] of the add() call that triggered it.

Mapping: conversation = `user_id` (or `run_id`/`agent_id`, else "default"); the messages of each
distinct add() call (same input and created_at) become turns once, in time order; a write cites
every message of its call and its write point is the call's last message. UPDATE entries point
to the previous write of the same memory through `parent_id` and count rewrite rounds;
`source_id` is the memory id. DELETE and NONE events write nothing and are counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..records import MAX_PASSAGES, Problem
from . import ImportResult, instant, read_json


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
    for created, i, e in entries:
        where = f"[{i}]"
        event = str(_get(e, "event") or "").upper()
        if event in skipped:
            skipped[event] += 1
            continue
        if event not in ("ADD", "UPDATE"):
            res.problems.append(Problem(f, None, f"{where}.event", "bad_value",
                                        f"unknown event {event!r} (expected ADD, UPDATE, DELETE or NONE)"))
            continue
        conv = str(_get(e, "user_id", "userId", "run_id", "agent_id") or "default")
        msgs = _get(e, "input")
        if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].strip() for m in msgs
        ):
            res.problems.append(Problem(f, None, f"{where}.input", "missing_field",
                                        "needs the non-empty input messages that triggered the write"))
            continue
        text = _get(e, "new_memory", "newMemory", "memory")
        if not isinstance(text, str) or not text.strip():
            res.problems.append(Problem(f, None, f"{where}.new_memory", "empty_text", "memory text is empty"))
            continue
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
        mid = str(_get(e, "memory_id", "memoryId") or _get(e, "id") or "")
        wid = str(_get(e, "id") or f"{mid}@{i}")
        cited = ids[-MAX_PASSAGES:]
        if len(ids) > MAX_PASSAGES:
            res.notes["citations_truncated"] = res.notes.get("citations_truncated", 0) + 1
        res.writes.append({
            "type": "write", "write_id": wid, "conversation_id": conv, "text": text.strip(),
            "citations": cited, "last_seen_turn": ids[-1], "time": created or None,
            "source_id": mid or None, "parent_id": last_write.get(mid) if event == "UPDATE" else None,
            "operation": event.lower(), "round": rounds.get(mid, 0) if event == "UPDATE" else 0,
        })
        if mid:
            last_write[mid] = wid
            rounds[mid] = rounds.get(mid, 0) + 1
    res.notes.update({"entries": len(data), "deleted_events": skipped["DELETE"],
                      "none_events": skipped["NONE"]})
    return res
