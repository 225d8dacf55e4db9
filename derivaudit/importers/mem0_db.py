"""mem0 open-source `history.db` (SQLite): memory events become writes, kept messages become turns.

The file mem0's `SQLiteManager` writes (mem0/memory/storage.py, checked on mem0ai 2.2.1) has two
tables: `history(id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted,
actor_id, role)` — one row per ADD/UPDATE/DELETE/NONE of a memory — and `messages(id,
session_scope, role, content, name, created_at)`, where each add() call stores its messages under a
scope such as "agent_id=a&user_id=alice" at one instant, and mem0 then deletes all but the last 10
of each scope.

A history row carries no scope and no message id, so where a memory came from is inferred, and a
memory placed in another user's conversation is worse than none. The rules:
- a memory id's scope is certain when the user pins it (`scopes`: `Memory.get_all()` output, which
  carries user_id/agent_id/run_id per memory id); otherwise it is read from its ADD row's time, and
  only when exactly one scope is possible: no other scope saved a call within `TOLERANCE` seconds
  of it, and no scope at mem0's 10-message limit may have lost (evicted) a call in that window.
  Any doubt: the row is counted as unlinked with its reason, never placed by time across scopes;
- every row of a memory id (its UPDATEs, its DELETE) belongs to the scope of the memory id, never
  to whichever call is near it in time;
- the row cites the call of that scope saved nearest its event time (ADD: created_at, UPDATE:
  updated_at), within `TOLERANCE` (mem0 2.x saves a call's messages just after its memories;
  earlier versions just before; stamps in different zones are compared as instants);
- an UPDATE with no call of its scope nearby is an `update()` made through the API, which saves no
  messages: it is imported with no citations at the scope's last kept turn before it (the audit
  then says what the history supports), or counted when the scope kept no turn before it. Either
  way the version it replaces is no longer valid;
- an `infer=False` memory (mem0 stores the message verbatim and saves no messages; its row carries
  the message's `role`) has no derivation to audit: it is counted, not imported;
- system messages are not turns (they are counted); a call whose messages mem0 evicted leaves its
  memories unlinked.
Each memory id is a family (`source_id`); an UPDATE's parent is the previous imported version;
every replaced version, and every version of a deleted memory, is `valid: false`. NONE rows write
nothing.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..log.io import LogError
from ..log.records import MAX_PASSAGES, Problem
from .common import ImportResult, open_sqlite, read_json, text_or_none
from .common import instant as _instant

TOLERANCE = 120.0  # seconds between a memory event and the saving of its call's messages
KEPT = 10  # messages mem0 keeps per scope (SQLiteManager.save_messages)

REASONS = {
    "ambiguous_scope": "another scope saved a call within the tolerance (or may have, before mem0 evicted it)",
    "messages_evicted": "its call's messages were evicted (mem0 keeps the last 10 per scope)",
    "no_call": "no call was saved within the tolerance of its time",
    "infer_false": "added with infer=False: stored verbatim, no messages saved, nothing derived",
    "scope_unknown": "its memory id's scope could not be determined",
    "no_history_before": "its scope kept no turn before it",
    "no_time": "the row has no readable time",
}


def _scope(entry: dict[str, Any]) -> str | None:
    """The session scope mem0 builds from an entry's ids (main._build_session_scope)."""
    parts = []
    for key in ("agent_id", "run_id", "user_id"):
        v = entry.get(key)
        if v:
            parts.append(f"{key}=" + str(v).replace("%", "%25").replace("&", "%26").replace("=", "%3D"))
    return "&".join(parts) or None


def read_scopes(path: str | Path) -> dict[str, str]:
    """memory id -> scope from `Memory.get_all()` output: a list, or {"results": [...]}, or a list of those."""
    f = str(path)
    data = read_json(path)
    if isinstance(data, dict):
        data = data.get("results")
    if not isinstance(data, list):
        raise LogError([Problem(f, None, None, "bad_format", 'expected Memory.get_all() output: a list of '
                                "memories or {\"results\": [...]}")])
    flat: list[Any] = []
    for x in data:
        flat.extend(x.get("results", []) if isinstance(x, dict) and "results" in x else [x])
    out: dict[str, str] = {}
    problems = []
    for i, m in enumerate(flat):
        scope = _scope(m) if isinstance(m, dict) else None
        if not isinstance(m, dict) or not isinstance(m.get("id"), str) or scope is None:
            problems.append(Problem(f, None, f"[{i}]", "missing_field",
                                    "a memory needs an id and one of user_id, agent_id, run_id"))
            continue
        if out.get(m["id"], scope) != scope:
            problems.append(Problem(f, None, f"[{i}].id", "bad_value",
                                    f"memory {m['id']!r} is listed under two scopes"))
        out[m["id"]] = scope
    if problems:
        raise LogError(problems)
    return out


@dataclass
class _Scope:
    calls: list[tuple[float, list[str]]] = field(default_factory=list)  # (saved at, turn ids), by time
    turns: list[tuple[float, str]] = field(default_factory=list)  # every kept message with a time, by time
    kept: int = 0  # messages of any role mem0 still keeps
    n_turns: int = 0  # turns imported, timed or not (turn ids m1, m2, ...)
    damaged: set[float] = field(default_factory=set)  # instants of refused messages (a call lacks one)
    damaged_all: bool = False  # a refused message without a readable time: any call may lack it

    def damaged_near(self, t: float) -> bool:
        return self.damaged_all or any(abs(d - t) <= TOLERANCE for d in self.damaged)

    def near(self, t: float) -> tuple[float, list[str]] | None:
        best = min(self.calls, key=lambda c: abs(c[0] - t), default=None)
        return best if best is not None and abs(best[0] - t) <= TOLERANCE else None

    def may_have_lost(self, t: float) -> bool:
        """At the 10-message limit with its oldest kept message after the window opens: a call in the
        window may have been evicted."""
        return self.kept >= KEPT and bool(self.turns) and self.turns[0][0] > t - TOLERANCE

    def last_turn_before(self, t: float) -> str | None:
        i = bisect.bisect_right(self.turns, t, key=lambda x: x[0])
        return self.turns[i - 1][1] if i else None


def _read_tables(path: str | Path, f: str) -> tuple[list[Any], list[Any], bool]:
    """The history rows and the saved messages, read-only; (rows, messages, has a messages table)."""
    db = open_sqlite(path, "history", "a mem0 history.db")
    try:
        cols = {r[1] for r in db.execute("PRAGMA table_info(history)")}
        need = {"id", "memory_id", "new_memory", "event", "created_at", "updated_at"}
        if not need <= cols:
            raise LogError([Problem(f, None, "history", "bad_format",
                                    f"history table lacks {sorted(need - cols)}: an older mem0 schema?")])
        has_messages = bool(db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='messages'").fetchone())
        msgs = db.execute("SELECT session_scope, role, content, name, created_at FROM messages "
                          "ORDER BY rowid").fetchall() if has_messages else []
        opt = {c: c if c in cols else "NULL" for c in ("is_deleted", "actor_id", "role")}
        rows = db.execute("SELECT id, memory_id, new_memory, event, created_at, updated_at, "
                          f"{opt['is_deleted']}, {opt['actor_id']}, {opt['role']} FROM history "
                          "ORDER BY rowid").fetchall()
    except sqlite3.DatabaseError as e:
        raise LogError([Problem(f, None, None, "unreadable", f"cannot read the tables ({e})")]) from None
    finally:
        db.close()
    return rows, msgs, has_messages


def _when(r: Any) -> float | None:
    """A row's instant: an UPDATE or DELETE happened at updated_at, an ADD at created_at."""
    return _instant(r[5]) if str(r[3] or "").upper() in ("UPDATE", "DELETE") and r[5] else _instant(r[4])


class _Placement:
    """The history rows placed one by one, in event order: each memory id's scope (its chain's
    conversation) and versions so far, and why each row that could not be placed was not."""

    def __init__(self, f: str, res: ImportResult, stats: dict[str, Any], by_scope: dict[str, Any],
                 pins: dict[str, str]) -> None:
        self.f, self.res, self.stats, self.by_scope, self.pins = f, res, stats, by_scope, pins
        self.reasons: Counter = Counter()
        self.chain_scope: dict[str, str | None] = {}
        self.versions: dict[str, list[dict[str, Any]]] = {}

    def unlinked(self, reason: str) -> None:
        self.stats["unlinked"] += 1
        self.reasons[reason] += 1

    def row(self, r: Any, t: float | None) -> None:
        rid, mid, text, event, created, updated, deleted, actor, role = r
        if not isinstance(mid, str) or not mid.strip():
            self.res.problems.append(Problem(self.f, None, f"history[{rid}].memory_id", "wrong_type" if mid is not None
                                             else "missing_field", f"memory_id is {mid!r}; mem0 writes the "
                                             "memory's id as text"))
            return
        ev = str(event or "").upper()
        if ev == "NONE":
            self.stats["none_events"] = self.stats.get("none_events", 0) + 1
            return
        if ev not in ("ADD", "UPDATE", "DELETE"):
            self.res.problems.append(Problem(self.f, None, f"history[{rid}].event", "bad_value",
                                             f"unknown event {event!r} (expected ADD, UPDATE, DELETE or NONE)"))
            return
        bad = [(c, v) for c, v in (("created_at", created), ("updated_at", updated)) if v is not None
               and not isinstance(v, str)] + ([("is_deleted", deleted)] if deleted not in (None, 0, 1) else [])
        if bad:
            self.res.problems.extend(Problem(self.f, None, f"history[{rid}].{c}", "wrong_type", f"{c} is {v!r}; "
                                             f"mem0 writes {'0 or 1' if c == 'is_deleted' else 'ISO 8601 text'}")
                                     for c, v in bad)
            return
        if ev == "DELETE" or deleted == 1:
            for v in self.versions.get(mid, []):
                v["valid"] = False
            self.stats["deleted"] = self.stats.get("deleted", 0) + 1
            _delete(self.res, self.stats, rid, mid, self.versions.get(mid, []), self.chain_scope.get(mid),
                    self.by_scope, t, updated)
            return
        # an UPDATE replaces what came before, whether or not the UPDATE itself can be placed
        for v in self.versions.get(mid, []) if ev == "UPDATE" else []:
            v["valid"] = False
        if not isinstance(text, str) or not text.strip():
            self.res.problems.append(Problem(self.f, None, f"history[{rid}].new_memory", "empty_text",
                                             "memory text is empty"))
            return
        if isinstance(role, str) and role.strip():
            return self.unlinked("infer_false")  # only add(infer=False) stamps the message's role on a memory
        if t is None:
            return self.unlinked("no_time")
        self.write(rid, mid, ev, text, created, updated, actor, t)

    def write(self, rid: Any, mid: str, ev: str, text: str, created: Any, updated: Any, actor: Any,
              t: float) -> None:
        """An ADD or UPDATE placed in its scope's history, or counted as unlinked with the reason."""
        why = "scope_unknown"  # an UPDATE whose memory id has no placed ADD before it
        if mid in self.pins:
            self.chain_scope[mid] = self.pins[mid]
        elif ev == "ADD" and self.chain_scope.get(mid) is None:
            placed, why = _place(self.by_scope, t)
            self.chain_scope.setdefault(mid, placed)
        scope = self.chain_scope.get(mid)
        if scope is None:
            return self.unlinked(why)
        sc = self.by_scope.get(scope)
        if sc is not None and sc.damaged_near(t):  # its call may lack a refused message: not placed
            return self.unlinked("damaged_messages")
        call = sc.near(t) if sc else None
        prev = self.versions.get(mid, [])
        if call is not None:
            _, ids = call
            cites, point = ids[-MAX_PASSAGES:], ids[-1]
        elif ev == "UPDATE" and sc is not None and (point := sc.last_turn_before(t)) is not None:
            cites = []  # update() through the API: mem0 saved no messages for it
        else:
            return self.unlinked("messages_evicted" if sc is not None and sc.may_have_lost(t) else
                                 "no_history_before" if ev == "UPDATE" else "no_call")
        w = {"type": "write", "write_id": str(rid), "conversation_id": scope, "text": text.strip(),
             "citations": cites, "last_seen_turn": point,
             "time": text_or_none(updated if ev == "UPDATE" else created), "source_id": mid or None,
             "parent_id": prev[-1]["write_id"] if prev and ev == "UPDATE" else None,
             "operation": ev.lower(), "round": len(prev) if ev == "UPDATE" else 0, "valid": True}
        meta = {"actor_id": actor} if isinstance(actor, str) and actor else {}
        if ev == "UPDATE" and not cites:
            meta["mem0"] = "update() without messages (an API edit): no citations"
        if ev == "UPDATE":  # add() saves its call's messages; update() saves none (see _delete)
            meta["origin"] = "api" if not cites else "unknown"
        if meta:
            w["meta"] = meta
        self.versions.setdefault(mid, []).append(w)
        self.res.writes.append(w)


def _notes(stats: dict[str, Any], reasons: Counter, pins: dict[str, str], by_scope: dict[str, Any],
           has_messages: bool) -> dict[str, Any]:
    """What the import could not do and why, for the user to read."""
    if reasons:
        stats["unlinked_reasons"] = dict(sorted(reasons.items()))
    if pins:
        stats["pinned_memory_ids"] = len(pins)
    elif reasons.get("ambiguous_scope"):
        stats["hint"] = ("rows near another scope's call were not placed: pass --scopes with Memory.get_all() "
                         "output to pin each memory id to its user")
    full = sorted(s for s, sc in by_scope.items() if sc.kept >= KEPT)
    truncated = sum(len(ids) >= KEPT for sc in by_scope.values() for _, ids in sc.calls)
    if truncated:
        stats["truncated_calls"] = truncated  # a call of more than 10 messages keeps only 10 of them
    if not has_messages:
        stats["note"] = "no messages table (mem0 before 1.0 kept none): no write can be linked to a conversation"
    elif full:
        stats["note"] = (f"mem0 keeps the last {KEPT} messages per scope; {len(full)} scope(s) are at that limit, "
                         "so their earlier calls are gone" + (f", and {truncated} call(s) kept only {KEPT} of their "
                                                               "messages" if truncated else ""))
    return stats


def convert(path: str | Path, scopes: str | Path | None = None) -> ImportResult:
    f = str(path)
    pins = read_scopes(scopes) if scopes is not None else {}
    res = ImportResult()
    rows, msgs, has_messages = _read_tables(path, f)
    stats: dict[str, Any] = {"history_rows": len(rows), "messages": len(msgs), "unlinked": 0}
    by_scope = _messages(f, msgs, res, stats)
    # rows in event order (times carry different offsets: instants, not strings)
    times = [_when(r) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: (times[i] is None, times[i] or 0.0, i))
    placing = _Placement(f, res, stats, by_scope, pins)
    for i in order:
        placing.row(rows[i], times[i])
    row_index = {str(r[0]): i for i, r in enumerate(rows)}
    res.writes.sort(key=lambda w: row_index[w["write_id"]])
    res.notes = _notes(stats, placing.reasons, pins, by_scope, has_messages)
    return res


def _delete(res: ImportResult, stats: dict[str, Any], rid: Any, mid: str, versions: list[dict[str, Any]],
            scope: str | None, by_scope: dict[str, _Scope], t: float | None, updated: Any) -> None:
    """A DELETE row as an operation on the memory's last imported version, at its scope's last kept
    turn before it. Its origin: mem0 2.x's add() only adds (mem0/memory/main.py), so a DELETE is a
    delete()/delete_all() call, which saves no messages; an earlier add() could also delete, and saved
    its call's messages with it. So a DELETE with no call of its scope within the tolerance is "api";
    one near such a call is "unknown" (the row does not say which). A deletion of a memory that was
    not imported, or with no turn before it, is counted, not imported."""
    sc = by_scope.get(scope) if scope else None
    point = sc.last_turn_before(t) if sc is not None and t is not None else None
    if not versions or point is None:
        stats["deletions_not_imported"] = stats.get("deletions_not_imported", 0) + 1
        return
    res.operations.append({
        "type": "operation", "operation_id": f"delete:{rid}", "conversation_id": scope, "kind": "delete",
        "target": versions[-1]["write_id"], "last_seen_turn": point, "time": text_or_none(updated),
        "origin": "unknown" if sc.near(t) is not None else "api",
        "meta": {"mem0": "DELETE row", "memory_id": mid}})


def _messages(f: str, msgs: list[tuple], res: ImportResult, stats: dict[str, Any]) -> dict[str, _Scope]:
    """The kept messages as turns, in save order per scope; one call per (scope, saved-at instant)."""
    by_scope: dict[str, _Scope] = {}
    timed = []
    unplaced: list[float | None] = []  # refused messages of no readable scope: their instants
    for i, (scope, role, content, name, created) in enumerate(msgs):
        if bad := _message_problems(f, i, scope, role, name, created):  # never guessed: a place in history
            res.problems.extend(bad)
            t = _instant(created) if isinstance(created, str) else None
            if isinstance(scope, str) and scope.strip():
                sc = by_scope.setdefault(scope, _Scope())
                sc.kept += 1
                if t is None:
                    sc.damaged_all = True
                else:
                    sc.damaged.add(t)
            else:
                unplaced.append(t)
            continue
        t = _instant(created)
        timed.append((False, t or 0.0, i, scope, role, content, name, created))
    timed.sort()
    for untimed, t, i, scope, role, content, name, created in timed:
        conv = str(scope)
        sc = by_scope.setdefault(conv, _Scope())
        sc.kept += 1
        if str(role or "").lower() == "system":
            stats["system_messages"] = stats.get("system_messages", 0) + 1
            continue
        if not isinstance(content, str) or not content.strip():
            res.problems.append(Problem(f, None, f"messages[{i}].content", "empty_text", "message has no text"))
            continue
        n = sc.n_turns
        sc.n_turns += 1
        tid = f"m{n + 1}"
        res.turns.append({"type": "turn", "conversation_id": conv, "turn_id": tid, "order": n,
                          "speaker": str(name or role or ""), "text": content, "time": text_or_none(created)})
        if untimed:
            continue
        sc.turns.append((t, tid))
        if sc.calls and sc.calls[-1][0] == t:
            sc.calls[-1][1].append(tid)
        else:
            sc.calls.append((t, [tid]))
    for sc in by_scope.values():  # a refused message of unknown scope may belong to any of them
        sc.damaged_all |= None in unplaced
        sc.damaged |= {t for t in unplaced if t is not None}
    return by_scope


def _message_problems(f: str, i: int, scope: Any, role: Any, name: Any, created: Any) -> list[Problem]:
    """A saved message mem0 would not have written: its scope (the conversation), role (the speaker)
    and time (its place) are what the import places it by, so none of them is guessed."""
    out = []
    if not isinstance(scope, str) or not scope.strip():
        out.append(Problem(f, None, f"messages[{i}].session_scope", "wrong_type" if scope is not None
                           else "missing_field", f"session_scope is {scope!r}; mem0 writes the scope's text"))
    if not isinstance(role, str) or not role.strip():
        out.append(Problem(f, None, f"messages[{i}].role", "wrong_type" if role is not None else "missing_field",
                           f"role is {role!r}; mem0 writes user, assistant or system"))
    if name is not None and not isinstance(name, str):
        out.append(Problem(f, None, f"messages[{i}].name", "wrong_type", f"name is {name!r}; mem0 writes text"))
    if not isinstance(created, str) or _instant(created) is None:
        out.append(Problem(f, None, f"messages[{i}].created_at", "wrong_type" if not isinstance(created, str)
                           else "bad_value", f"created_at is {created!r}; mem0 writes an ISO 8601 time"))
    return out


def _place(by_scope: dict[str, _Scope], t: float) -> tuple[str | None, str]:
    """The one scope an event at `t` can belong to, or None and why not. Possible scopes: those
    that saved a call within the tolerance, and those that may have lost one there to eviction."""
    near = {s for s, sc in by_scope.items() if sc.near(t) is not None}
    possible = near | {s for s, sc in by_scope.items() if sc.may_have_lost(t)}
    if len(possible) == 1 and near:
        return next(iter(near)), ""
    if not possible:
        return None, "no_call"
    return None, "ambiguous_scope" if near else "messages_evicted"
