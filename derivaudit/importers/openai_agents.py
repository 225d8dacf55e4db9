"""OpenAI Agents SDK `SQLiteSession` database: the conversation side of a memory audit.

The SDK (src/agents/memory/sqlite_session.py) keeps `agent_sessions(session_id, created_at,
updated_at)` and `agent_messages(id, session_id, message_data, created_at)`, one JSON response item
per row: messages `{"role", "content"}` (a string, or parts with `text`), `{"type": "message",
"role": "assistant", "content": [{"type": "output_text", "text"}]}`, and `function_call`,
`function_call_output`, `reasoning` items.

Mapping: conversation = session_id; user and assistant messages with text become turns (turn id
`m<row id>`, time = created_at, UTC), in row order, the order the SDK reads them back (`get_items`
orders by id; created_at is stamped to the second, so it cannot order a run's items); tool calls,
tool outputs, reasoning and system or developer messages are counted, not imported. The SDK stores
no memory writes: this log is the turn side, to be paired with a memory store's writes that cite
these turn ids (or loaded as `--history`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from ..log.io import LogError
from ..log.records import Problem
from .common import ImportResult, content_text, open_sqlite, text_or_none

HOLDS_WRITES = False  # the SDK stores conversations, not memories: an import without writes is normal


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    db = open_sqlite(path, "agent_messages", "an Agents SDK SQLiteSession database")
    try:
        rows = db.execute("SELECT id, session_id, message_data, created_at FROM agent_messages "
                          "ORDER BY session_id, id").fetchall()
    except sqlite3.DatabaseError as e:
        raise LogError([Problem(f, None, None, "unreadable", f"cannot read agent_messages ({e})")]) from None
    finally:
        db.close()
    res = ImportResult()
    order: dict[str, int] = {}
    skipped: dict[str, int] = {}
    for rid, session, data, created in rows:
        try:
            item = orjson.loads(data)
        except (orjson.JSONDecodeError, TypeError):
            res.problems.append(Problem(f, None, f"agent_messages[{rid}].message_data", "invalid_json",
                                        "message_data is not JSON"))
            continue
        if not isinstance(item, dict):
            res.problems.append(Problem(f, None, f"agent_messages[{rid}].message_data", "bad_format",
                                        "message_data is not an object"))
            continue
        if not isinstance(session, str) or not session.strip():
            res.problems.append(Problem(f, None, f"agent_messages[{rid}].session_id", "wrong_type",
                                        f"session_id is {session!r}; the SDK writes the session's id as text"))
            continue
        kind = item.get("type", "message")
        role = item.get("role")
        text = content_text(item.get("content")).strip()
        if kind != "message" or role not in ("user", "assistant") or not text:
            key = str(kind if kind != "message" else f"{role} message" if text else "empty message")
            skipped[key] = skipped.get(key, 0) + 1
            continue
        conv = str(session)
        n = order.get(conv, 0)
        order[conv] = n + 1
        res.turns.append({"type": "turn", "conversation_id": conv, "turn_id": f"m{rid}", "order": n,
                          "speaker": role, "text": text, "time": text_or_none(created)})
    res.notes = {"rows": len(rows), "sessions": len(order), **{f"skipped {k}": v for k, v in sorted(skipped.items())}}
    return res
