"""Letta agent file (`.af`, JSON): conversation messages become turns, memory-editing tool calls writes.

Accepted input: the agent file `{"agents": [...], "blocks": [...], ...}` (letta-ai/agent-file), or
the older single-agent form (one object with `messages` and `core_memory`). Each agent's `messages`
are Letta messages: `role` (system, user, assistant, tool), `content` [{"type": "text", "text"}],
`tool_calls` [{"id", "function": {"name", "arguments": JSON text}}], `tool_call_id`, `created_at`.

Mapping: conversation = agent id (else name). Turns: user messages (MemGPT-style JSON envelopes
`{"type": "user_message", "message": ...}` are unpacked; login, heartbeat and system alerts are
skipped) and what the assistant said to the user (`send_message` arguments, or its text when it
called no tool; inner monologue is not a turn). Writes: calls of Letta's memory tools —
core_memory_append / core_memory_replace / memory_insert / memory_replace / memory_rethink /
rethink_memory / memory_str_replace / memory_str_insert / archival_memory_insert / memory (commands
create, str_replace with `old_string`/`new_string`, insert) — whose tool return did not fail; a
`memory` delete of a block deletes each memory still on it, a rename moves them to the new label,
and `memory_apply_patch` edits are counted, not imported. The written text is the new
content; the citation is the user turn before the call (Letta keeps no other provenance) and the
write point is the last turn before it. A replace names its parent: the latest earlier write on the
same block that contains the replaced text. Block labels go to `meta.label`. Reads:
`archival_memory_search` calls, with the earlier archival writes whose text the tool return holds,
in the order it lists them (Letta returns text, not ids; a search that matches no imported write
is counted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..log.records import Problem
from .common import ORIGIN, ImportResult, content_text, instant, read_json, text_or_none

MEMORY_TOOLS = {"core_memory_append": "add", "core_memory_replace": "update", "memory_insert": "add",
                "memory_replace": "update", "memory_rethink": "consolidate", "rethink_memory": "consolidate",
                "archival_memory_insert": "add", "memory_str_replace": "update", "memory_str_insert": "add",
                "memory_apply_patch": None, "memory": None}
# Tools whose empty new text removes the old text from the block (`value.replace(old, new)`); `memory`
# does it with command str_replace (letta/services/tool_executor/core_tool_executor.py).
REPLACE_TOOLS = ("core_memory_replace", "memory_replace", "memory_str_replace", "memory")
_NEW = ("content", "new_content", "new_str", "new_string", "new_memory", "insert_text", "file_text")
_OLD = ("old_content", "old_str", "old_string")
_SKIP = {"login", "heartbeat", "system_alert"}


def _text(m: dict[str, Any]) -> str:
    return content_text(m.get("content"))


def _user(text: str) -> str | None:
    """The user's words, or None for an event (login, heartbeat) Letta sends as a user message."""
    s = text.strip()
    if s.startswith("{"):
        try:
            env = orjson.loads(s)
        except orjson.JSONDecodeError:
            return s or None
        if isinstance(env, dict):
            if env.get("type") in _SKIP:
                return None
            if isinstance(env.get("message"), str):
                return env["message"].strip() or None
    return s or None


class _BadArguments(ValueError):
    pass


def _args(call: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(tool name, arguments); raises _BadArguments when a memory or search tool's arguments are
    not a JSON object (its memory would be lost without a word)."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return None
    raw = fn.get("arguments")
    try:
        args = orjson.loads(raw) if isinstance(raw, str) else raw
    except orjson.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        if fn["name"] in MEMORY_TOOLS or fn["name"] == "archival_memory_search":
            raise _BadArguments(f"arguments of {fn['name']} are not a JSON object: {str(raw)[:60]!r}")
        args = {}
    return fn["name"], args


def _failed(ret: dict[str, Any] | None) -> bool:
    if ret is None:
        return False
    rets = ret.get("tool_returns")
    if isinstance(rets, list) and any(isinstance(r, dict) and str(r.get("status", "")).lower() == "error"
                                      for r in rets):
        return True
    t = _text(ret)
    try:
        body = orjson.loads(t)
    except orjson.JSONDecodeError:
        return t.lower().startswith(("error", "failed"))
    return isinstance(body, dict) and str(body.get("status", "")).lower() in ("failed", "error")


class _Inserts:
    """The archival writes so far, indexed by their first KEY characters, so that finding which of
    them a search return holds costs the return's length, not the number of inserts (matching
    every insert against every search made a 32k-message import take 91 s, 131k over 600 s)."""

    KEY = 24

    def __init__(self) -> None:
        self.by_key: dict[str, list[tuple[str, str]]] = {}
        self.lengths = {self.KEY}  # key lengths in use (texts shorter than KEY are their own key)

    def add(self, text: str, write_id: str) -> None:
        self.by_key.setdefault(text[: self.KEY], []).append((text, write_id))
        self.lengths.add(min(len(text), self.KEY))

    def found_in(self, text: str) -> list[tuple[int, str]]:
        """(first position, write id) of every insert whose text occurs in `text`, in that order."""
        first: dict[str, int] = {}
        for pos in range(len(text)):
            for n in self.lengths:
                for t, wid in self.by_key.get(text[pos : pos + n], ()):
                    if wid not in first and text.startswith(t, pos):
                        first[wid] = pos
        return sorted((p, w) for w, p in first.items())


def _return_of(call: dict[str, Any], returns: dict[str, Any], after: dict[str, Any] | None) -> dict[str, Any] | None:
    """A call's tool return: by its id, or, for a call without one, the next tool message (Letta
    answers each call in order); a failed insert must not become a memory for want of an id."""
    return returns.get(call.get("id")) if call.get("id") else after


def _read(call: dict[str, Any], args: dict[str, Any], ret: dict[str, Any] | None, inserts: _Inserts,
          conv: str, point: str, when: Any, where: str) -> dict[str, Any] | None:
    """An archival search as a read event: the query, and the earlier archival writes whose text the
    tool return holds, in the order it lists them (Letta returns text, not ids)."""
    query = args.get("query")
    text = _text(ret) if ret is not None else ""
    if not isinstance(query, str) or not query.strip() or not text:
        return None
    found = inserts.found_in(text)
    if not found:
        return None
    return {"type": "read", "read_id": str(call.get("id") or f"{conv}-search"), "conversation_id": conv,
            ORIGIN: where,
            "last_seen_turn": point, "query": query.strip(), "retrieved": [w for _, w in found],
            "time": text_or_none(when)}


def _agents(f: str, data: Any, res: ImportResult, stats: dict[str, Any]) -> list[Any] | None:
    """The agents of an agent file; some published files hold the agent file as a JSON string."""
    if isinstance(data, str):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError:
            data = None
        else:
            stats["encoding"] = "the file holds the agent file as a JSON string (decoded)"
    if isinstance(data, dict) and isinstance(data.get("agents"), list):
        stats["blocks"] = _blocks(data)
        return data["agents"]
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return [data]
    res.problems.append(Problem(f, None, None, "bad_format", 'expected an agent file {"agents": [...]} '
                                "or one agent with messages"))
    return None


def _blocks(data: dict[str, Any]) -> str | None:
    """The memory blocks a file carries, as `label (chars)`: Letta keeps their current text only."""
    given = data.get("blocks")
    blocks = [b for b in given if isinstance(b, dict)] if isinstance(given, list) else []  # a damaged file
    if not blocks:
        return None
    return ", ".join(f"{b.get('label') or b.get('id') or '?'} ({len(str(b.get('value') or ''))} chars)"
                     for b in blocks)


def _in_time_order(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages by creation instant (files list a summary of evicted messages where the context put
    it, not when it was written); file order when some message has no readable time."""
    times = [instant(m.get("created_at")) for m in msgs]
    if any(t is None for t in times):
        return msgs
    return [m for _, _, m in sorted(zip(times, range(len(msgs)), msgs, strict=True), key=lambda x: (x[0], x[1]))]


class _Agent:
    """One agent's messages in time order: user and assistant turns, memory-tool calls as writes and
    deletions, archival searches as reads."""

    def __init__(self, f: str, res: ImportResult, stats: dict[str, Any], a: int, agent: dict[str, Any]) -> None:
        self.f, self.res, self.stats, self.a = f, res, stats, a
        self.conv = str(agent.get("id") or agent.get("name") or f"agent-{a}")
        self.idx = {id(m): k for k, m in enumerate(agent["messages"])}  # file positions, for messages
        self.msgs = _in_time_order([m for k, m in enumerate(agent["messages"]) if self._readable(k, m)])
        self.returns = {m["tool_call_id"]: m for m in self.msgs if m.get("role") == "tool" and m.get("tool_call_id")}
        self.next_tool: list[dict[str, Any] | None] = [None] * len(self.msgs)  # the first tool message after each
        for k in range(len(self.msgs) - 2, -1, -1):
            nxt = self.msgs[k + 1]
            self.next_tool[k] = nxt if nxt.get("role") == "tool" else self.next_tool[k + 1]
        self.n = 0
        self.last_user: str | None = None
        self.last_turn: str | None = None
        self.by_label: dict[Any, list[dict[str, Any]]] = {}  # edits per memory label, for a replace's parent
        self.inserts = _Inserts()

    def _readable(self, k: int, m: Any) -> bool:
        """A message Letta could have written; anything else is a problem at its place, never skipped
        quietly (a lost user turn moves every write point after it)."""
        at = f"agents[{self.a}].messages[{k}]"
        if not isinstance(m, dict):
            why = (at, "wrong_type", f"a message is an object, not {type(m).__name__}")
        elif not isinstance(m.get("role"), str):
            why = (f"{at}.role", "wrong_type" if "role" in m else "missing_field", f"role is {m.get('role')!r}")
        elif m.get("tool_calls") is not None and not isinstance(m["tool_calls"], list):
            why = (f"{at}.tool_calls", "wrong_type", "tool_calls is a list of calls")
        else:
            return True
        self.res.problems.append(Problem(self.f, None, *why))
        return False

    def turn(self, speaker: str, text: str, when: Any) -> str:
        tid = f"t{self.n + 1}"
        self.res.turns.append({"type": "turn", "conversation_id": self.conv, "turn_id": tid, "order": self.n,
                               "speaker": speaker, "text": text, "time": text_or_none(when)})
        self.n += 1
        return tid

    def where(self, m: dict[str, Any]) -> str:
        return f"agents[{self.a}].messages[{self.idx[id(m)]}]"

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def run(self) -> None:
        for i, m in enumerate(self.msgs):
            role, when = m.get("role"), m.get("created_at")
            if role == "user":
                said = _user(_text(m))
                if said:
                    self.last_user = self.last_turn = self.turn(str(m.get("name") or "user"), said, when)
            elif role == "assistant":
                self.assistant(i, m, when)

    def assistant(self, i: int, m: dict[str, Any], when: Any) -> None:
        calls = []
        for j, c in enumerate(m.get("tool_calls") or []):
            try:
                p = _args(c)
            except _BadArguments as e:
                self.res.problems.append(Problem(self.f, None, f"{self.where(m)}.tool_calls[{j}].function.arguments",
                                                 "invalid_json", str(e)))
                continue
            if p is not None:
                calls.append((j, c, p))
        after = self.next_tool[i]
        if not calls and _text(m).strip():
            self.last_turn = self.turn("assistant", _text(m).strip(), when)
        for j, c, (name, args) in calls:
            self.call(i, m, f"{self.where(m)}.tool_calls[{j}]", c, name, args, _return_of(c, self.returns, after),
                      when)

    def call(self, i: int, m: dict[str, Any], at: str, c: dict[str, Any], name: str, args: dict[str, Any],
             ret: dict[str, Any] | None, when: Any) -> None:
        if name == "send_message" and isinstance(args.get("message"), str) and args["message"].strip():
            self.last_turn = self.turn("assistant", args["message"].strip(), when)
            return
        if name == "archival_memory_search" and self.last_turn is not None:
            read = _read(c, args, ret, self.inserts, self.conv, self.last_turn, when, self.where(m))
            if read is None:
                self.count("searches_unmatched")
            else:
                self.res.reads.append(read)
            return
        if name not in MEMORY_TOOLS:
            return
        if name == "memory_apply_patch":  # a diff over one or more blocks: not read here
            return self.count("patch_edits_not_imported")
        if ret is None:  # no tool return: whether the edit was made is unknown, so it is not a memory
            self.stats["memory_edits"] += 1
            return self.count("edits_without_return")
        command = args.get("command") if name == "memory" else None
        if command == "rename":  # the block's writes go with it (a description change moves nothing)
            if isinstance(args.get("old_path"), str) and isinstance(args.get("new_path"), str):
                moved = self.by_label.pop(_label({"path": args["old_path"]}), [])
                self.by_label.setdefault(_label({"path": args["new_path"]}), []).extend(moved)
            return
        if command == "delete":
            self.stats["memory_edits"] += 1
            if _failed(ret):
                self.stats["failed_edits"] += 1
            elif self.last_turn is None:
                self.stats["edits_without_user_turn"] += 1
            else:
                _block_deletion(self.res, self.stats, self.by_label, _label(args), c, self.conv, i, self.last_turn,
                                when, self.where(m))
            return
        if command == "view":  # reads the memory: nothing written
            return
        self.edit(i, m, at, c, name, args, ret, when)

    def edit(self, i: int, m: dict[str, Any], at: str, c: dict[str, Any], name: str, args: dict[str, Any],
             ret: dict[str, Any] | None, when: Any) -> None:
        """A memory tool's insert, append or replace as a write (a replace by "" as a removal)."""
        wrong = next((k for k in (*_NEW, *_OLD) if k in args and not isinstance(args[k], str)), None)
        if wrong is not None or not any(k in args for k in _NEW):
            field = wrong or _NEW[0]
            self.res.problems.append(Problem(
                self.f, None, f"{at}.function.arguments.{field}", "wrong_type" if wrong else "missing_field",
                f"{name} writes text: its {field} is {args.get(field)!r:.40}" if wrong else
                f"{name} call without the text it writes ({', '.join(k for k in _NEW)})"))
            return
        new = next((args[k] for k in _NEW if isinstance(args.get(k), str) and args[k].strip()), None)
        old = next((args[k] for k in _OLD if isinstance(args.get(k), str) and args[k].strip()), None)
        removal = new is None and old is not None and name in REPLACE_TOOLS  # replaced by "": the text is removed
        if new is None and not removal:
            return self.count("empty_edits")
        self.stats["memory_edits"] += 1
        if _failed(ret):
            self.stats["failed_edits"] += 1
            return
        if self.last_user is None or self.last_turn is None:
            self.stats["edits_without_user_turn"] += 1
            return
        label = _label(args)
        parent = next((e["write_id"] for e in reversed(self.by_label.get(label, [])) if old.strip() in e["text"]),
                      None) if old else None
        if removal:
            _removal(self.res, self.stats, self.by_label, label, parent, old, c, self.conv, i, self.last_user,
                     self.last_turn, when, self.where(m))
            return
        assert new is not None
        op = MEMORY_TOOLS[name] or ("update" if old else "add")
        w = {"type": "write", "write_id": str(c.get("id") or f"{self.conv}-call{i}"), "conversation_id": self.conv,
             "text": new.strip(), "citations": [self.last_user], "last_seen_turn": self.last_turn,
             "time": text_or_none(when), "parent_id": parent, "operation": op,
             "meta": {"tool": name, **({"label": str(label)} if label is not None else {})},
             ORIGIN: self.where(m)}
        self.by_label.setdefault(label, []).append(w)
        if name == "archival_memory_insert":
            self.inserts.add(w["text"], w["write_id"])
        self.res.writes.append(w)


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    data = read_json(path)
    res = ImportResult()
    stats: dict[str, Any] = {}
    agents = _agents(f, data, res, stats)
    if agents is None:
        return res
    stats = {"agents": len(agents), "memory_edits": 0, "failed_edits": 0, "edits_without_user_turn": 0, **stats}
    for a, agent in enumerate(agents):
        if not isinstance(agent, dict) or not isinstance(agent.get("messages"), list):
            res.problems.append(Problem(f, None, f"agents[{a}].messages", "missing_field", "agent has no messages"))
            continue
        _Agent(f, res, stats, a, agent).run()
    if not res.writes and not res.problems:
        held = stats.get("blocks")
        stats["note"] = ("its history holds no memory-tool call (" + (f"{stats['memory_edits']} edit(s), all failed; "
                         if stats["memory_edits"] else "") + f"{len(res.turns)} user/assistant turn(s))"
                         + (f"; its memory is in blocks — {held} — whose current text carries no write "
                            "provenance (no turn it came from), so there is nothing to audit" if held
                            else "; it has no memory blocks either"))
    res.notes = stats
    return res


def _label(args: dict[str, Any]) -> Any:
    """The block a call edits: `label` (`target_block_label` for rethink_memory), or the `memory` tool's
    `path` as Letta reads it ("/memories/human" is block "human")."""
    label = args.get("label") or args.get("target_block_label")
    path = args.get("path")
    if label is None and isinstance(path, str):
        return path.removeprefix("/memories/").removeprefix("/").replace("/", "_")
    return label if label is not None else path


def _block_deletion(res: ImportResult, stats: dict[str, Any], by_label: dict[Any, list[dict[str, Any]]],
                    label: Any, call: dict[str, Any], conv: str, i: int, last_turn: str, when: Any,
                    origin: str) -> None:
    """`memory(command="delete", path=...)` detaches the whole block: a deletion of each memory still
    on it (the latest version of each, not one replaced or already removed). A block with no
    imported memory is counted (`block_deletions_unmatched`)."""
    on = by_label.pop(label, [])
    replaced = {e.get("parent_id") for e in on}
    live = [e for e in on if e["write_id"] not in replaced]
    if not live:
        stats["block_deletions_unmatched"] = stats.get("block_deletions_unmatched", 0) + 1
        return
    cid = str(call.get("id") or f"{conv}-call{i}")
    for k, e in enumerate(live):
        res.operations.append({
            "type": "operation", "operation_id": cid if len(live) == 1 else f"{cid}:{k + 1}", "conversation_id": conv,
            "kind": "delete", "target": e["write_id"], "last_seen_turn": last_turn, "time": text_or_none(when),
            "origin": "conversation", "meta": {"tool": "memory", "command": "delete", "label": str(label)},
            ORIGIN: origin})
    stats["block_deletions"] = stats.get("block_deletions", 0) + 1


def _removal(res: ImportResult, stats: dict[str, Any], by_label: dict[Any, list[dict[str, Any]]], label: Any,
             parent: str | None, old: str, call: dict[str, Any], conv: str, i: int, last_user: str, last_turn: str,
             when: Any, origin: str) -> None:
    """A replace with an empty new text removes `old` from the block (Letta's core_memory_replace and
    memory_replace: `value.replace(old, new)`). When `old` is the whole of the latest earlier write
    holding it, that memory is deleted: a delete operation on it. When it is part of it, what is
    left is the memory's new version: an update (parent_id) whose text is the rest. Text that no
    imported write holds is counted (`removals_unmatched`)."""
    target = next((e for e in by_label.get(label, []) if e["write_id"] == parent), None)
    if target is None:
        stats["removals_unmatched"] = stats.get("removals_unmatched", 0) + 1
        return
    rest = " ".join(target["text"].replace(old.strip(), " ").split()).strip(" ,;.-")
    cid = str(call.get("id") or f"{conv}-call{i}")
    if not rest:
        res.operations.append({
            "type": "operation", "operation_id": cid, "conversation_id": conv, "kind": "delete",
            "target": target["write_id"], "last_seen_turn": last_turn, "time": text_or_none(when),
            "origin": "conversation", "meta": {"tool": call["function"]["name"], "removed": old},
            ORIGIN: origin})
        by_label[label] = [e for e in by_label[label] if e is not target]
        stats["removals"] = stats.get("removals", 0) + 1
        return
    w = {"type": "write", "write_id": cid, "conversation_id": conv, "text": rest, "citations": [last_user],
         "last_seen_turn": last_turn, "time": text_or_none(when), "parent_id": target["write_id"],
         "operation": "update", "meta": {"tool": call["function"]["name"], "removed": old,
                                         **({"label": str(label)} if label is not None else {})},
         ORIGIN: origin}
    by_label.setdefault(label, []).append(w)
    res.writes.append(w)
    stats["partial_removals"] = stats.get("partial_removals", 0) + 1
