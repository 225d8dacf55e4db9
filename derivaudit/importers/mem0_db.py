"""mem0 open-source `history.db` (SQLite): memory events become writes, kept messages become turns.

The file mem0's `SQLiteManager` writes (mem0/memory/storage.py) has two tables:
`history(id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted,
actor_id, role)` — one row per ADD/UPDATE/DELETE/NONE of a memory — and `messages(id,
session_scope, role, content, name, created_at)`, where each add() call stores its messages under a
scope such as "agent_id=a&user_id=alice" and mem0 then deletes all but the last 10 of each scope.

What can be linked, and what cannot (reported in the import notes, never guessed):
- history rows carry no scope and no message ids. A row is placed in the add() call whose messages
  were saved nearest its event time (ADD: created_at; UPDATE/DELETE: updated_at; mem0 writes the
  memory's time in US/Pacific and the messages' in UTC, so times are compared as instants), within
  `TOLERANCE` seconds; it cites that call's messages and its write point is the call's last message;
- a row whose call's messages were evicted (all but the last 10 per scope) or that has no time
  cannot be placed: it is counted (`unlinked`), not imported. On a long-lived store most history is
  in this case: mem0 does not keep the conversation that produced a memory.
Each memory id is a family (`source_id`); an UPDATE's parent is the previous write of the memory;
every version but the last, and the last of a deleted memory, is `valid: false`. NONE rows write
nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..io import LogError
from ..records import MAX_PASSAGES, Problem
from . import ImportResult, open_sqlite, text_or_none
from . import instant as _instant

TOLERANCE = 120.0  # seconds between a memory event and the saving of its call's messages




def convert(path: str | Path) -> ImportResult:
    f = str(path)
    db = open_sqlite(path, "history", "a mem0 history.db")
    res = ImportResult()
    try:
        cols = {r[1] for r in db.execute("PRAGMA table_info(history)")}
        need = {"id", "memory_id", "new_memory", "event", "created_at", "updated_at"}
        if not need <= cols:
            raise LogError([Problem(f, None, "history", "bad_format",
                                    f"history table lacks {sorted(need - cols)}: an older mem0 schema?")])
        has_messages = bool(db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='messages'").fetchone())
        msgs = db.execute("SELECT session_scope, role, content, name, created_at FROM messages "
                          "ORDER BY created_at, rowid").fetchall() if has_messages else []
        rows = db.execute("SELECT id, memory_id, new_memory, event, created_at, updated_at, "
                          f"{'is_deleted' if 'is_deleted' in cols else '0'}, "
                          f"{'actor_id' if 'actor_id' in cols else 'NULL'} FROM history ORDER BY rowid").fetchall()
        # in event order: times carry different offsets, so compare instants, not strings
        rows.sort(key=lambda r: _instant(r[5]) or _instant(r[4]) or float("inf"))
    except sqlite3.DatabaseError as e:
        raise LogError([Problem(f, None, None, "unreadable", f"cannot read the tables ({e})")]) from None
    finally:
        db.close()

    # the kept messages, one call per (scope, saved-at) as save_messages() stamps them
    calls: list[tuple[float, str, list[str]]] = []
    count: dict[str, int] = {}
    last: dict[tuple[str, str], list[str]] = {}
    for i, (scope, role, content, name, created) in enumerate(msgs):
        if not isinstance(content, str) or not content.strip():
            res.problems.append(Problem(f, None, f"messages[{i}].content", "empty_text", "message has no text"))
            continue
        conv = str(scope or "default")
        n = count.get(conv, 0)
        count[conv] = n + 1
        tid = f"m{n + 1}"
        res.turns.append({"type": "turn", "conversation_id": conv, "turn_id": tid, "order": n,
                          "speaker": str(name or role or ""), "text": content, "time": text_or_none(created)})
        key = (conv, str(created))
        if key not in last:
            last[key] = []
            t = _instant(created)
            if t is not None:
                calls.append((t, conv, last[key]))
        last[key].append(tid)

    versions: dict[str, list[dict[str, Any]]] = {}
    stats = {"history_rows": len(rows), "messages": len(msgs), "unlinked": 0, "none_events": 0}
    for rid, mid, text, event, created, updated, deleted, actor in rows:
        ev = str(event or "").upper()
        if ev == "NONE":
            stats["none_events"] += 1
            continue
        mid = str(mid or "")
        if ev == "DELETE" or deleted:
            for v in versions.get(mid, []):
                v["valid"] = False
            stats["deleted"] = stats.get("deleted", 0) + 1
            continue
        if ev not in ("ADD", "UPDATE"):
            res.problems.append(Problem(f, None, f"history[{rid}].event", "bad_value",
                                        f"unknown event {event!r} (expected ADD, UPDATE, DELETE or NONE)"))
            continue
        if not isinstance(text, str) or not text.strip():
            res.problems.append(Problem(f, None, f"history[{rid}].new_memory", "empty_text", "memory text is empty"))
            continue
        when = _instant(updated if ev == "UPDATE" else created) or _instant(created)
        near = min(calls, key=lambda c: abs(c[0] - when)) if when is not None and calls else None
        if near is None or abs(near[0] - when) > TOLERANCE:  # type: ignore[operator]
            stats["unlinked"] += 1
            continue
        _, conv, ids = near
        prev = versions.get(mid, [])
        w = {"type": "write", "write_id": str(rid), "conversation_id": conv, "text": text.strip(),
             "citations": ids[-MAX_PASSAGES:], "last_seen_turn": ids[-1],
             "time": text_or_none(updated if ev == "UPDATE" else created), "source_id": mid or None,
             "parent_id": prev[-1]["write_id"] if prev and ev == "UPDATE" else None,
             "operation": ev.lower(), "round": len(prev) if ev == "UPDATE" else 0}
        if isinstance(actor, str) and actor:
            w["meta"] = {"actor_id": actor}
        for v in prev:
            v["valid"] = False
        w["valid"] = True
        versions.setdefault(mid, []).append(w)
        res.writes.append(w)
    if not has_messages:
        stats["note"] = "no messages table (mem0 before 1.0 kept none): no write can be linked to a conversation"
    elif stats["unlinked"]:
        stats["note"] = ("history rows whose messages mem0 no longer keeps (it keeps the last 10 per "
                         "session) were not imported")
    res.notes = stats
    return res
