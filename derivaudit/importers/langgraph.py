"""LangGraph store / LangMem memories joined with checkpointer threads by time (approximate).

LangGraph keeps long-term memories in a store (`Item`: namespace, key, value, created_at,
updated_at; LangMem's memory managers put `{"kind": ..., "content": ...}` values there) and the
conversation in a checkpointer, per thread; nothing links an item to the messages it came from, and
`put` overwrites, so only each item's latest version exists. The input is a JSON export of both
(docs/commands.md, `import`, gives the few lines that write it):

    {"items": [{"namespace": [...], "key", "value", "created_at", "updated_at"}, ...],
     "threads": [{"thread_id", "checkpoints": [{"ts", "messages": [...]}, ...]}, ...]}

Messages are LangChain messages as dicts (`{"type": "human"|"ai"|..., "content", "id"}` or
`messages_to_dict`'s `{"type", "data": {...}}`). A message's time is the `ts` of the first
checkpoint that holds it. Mapping: conversation = thread_id; human and AI messages with text are the
turns. Each item becomes one write, placed by time: in the thread named in its namespace if any,
else in the thread with the latest message at or before the item's `updated_at`; its citation is
the last human message at or before that time and its write point the last message. This join is
approximate (a memory written in the background after several threads may be attributed to the most
recent one); items with no message before them are counted as unlinked, not imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..log.records import Problem
from .common import ImportResult, read_json
from .common import instant as _instant

_SPEAKERS = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
             "AIMessageChunk": "assistant"}


def _message(m: Any) -> tuple[str, str, str | None] | None:
    """(speaker, text, id) of a human or AI message with text, else None."""
    if not isinstance(m, dict):
        return None
    data = m.get("data") if isinstance(m.get("data"), dict) else m
    kind = m.get("type") or data.get("type") or m.get("role")
    speaker = _SPEAKERS.get(str(kind))
    content = data.get("content")
    if isinstance(content, list):
        content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if speaker is None or not isinstance(content, str) or not content.strip():
        return None
    mid = data.get("id")
    return speaker, content.strip(), mid if isinstance(mid, str) else None


def _value_text(v: Any) -> str:
    """The memory's text: LangMem's {"kind", "content"} unwrapped; a structured value as key: value."""
    if isinstance(v, dict) and "content" in v:
        v = v["content"]
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        v = v["content"]
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, dict):
        return "; ".join(f"{k}: {x}" for k, x in v.items()
                         if isinstance(x, str | int | float | bool) and str(x).strip())
    return ""


def _whole_second(stamp: Any) -> bool:
    """A stamp with no fraction of a second (SqliteStore's CURRENT_TIMESTAMP)."""
    t = str(stamp)
    return "T" in t.replace(" ", "T") and "." not in t.split("+")[0]


def _before(line: list[tuple[float, str, str]], when: float, tie: float) -> list[tuple[float, str, str]]:
    """The thread's messages the item could have seen: at or before `when`, or within its second."""
    return [x for x in line if x[0] <= when or x[0] < when + tie]


Timeline = dict[str, list[tuple[float, str, str]]]  # thread -> (time, turn id, speaker)


def _turns(f: str, threads: list[Any], res: ImportResult) -> Timeline:
    """Each thread's messages as turns, timed by the first checkpoint holding them."""
    timeline: Timeline = {}
    for ti, th in enumerate(threads):
        if not isinstance(th, dict) or not isinstance(th.get("thread_id"), str) or not isinstance(
                th.get("checkpoints"), list):
            res.problems.append(Problem(f, None, f"threads[{ti}]", "missing_field",
                                        "thread needs thread_id and checkpoints"))
            continue
        conv = th["thread_id"]
        seen: set[str] = set()
        cps = sorted((c for c in th["checkpoints"] if isinstance(c, dict) and _instant(c.get("ts")) is not None),
                     key=lambda c: _instant(c["ts"]))  # type: ignore[arg-type, return-value]
        for c in cps:
            t = _instant(c["ts"])
            for m in c.get("messages") or []:
                got = _message(m)
                if got is None:
                    continue
                speaker, text, mid = got
                key = mid or f"{speaker}:{text}"
                if key in seen:
                    continue
                seen.add(key)
                n = len(timeline.setdefault(conv, []))
                tid = f"t{n + 1}"
                res.turns.append({"type": "turn", "conversation_id": conv, "turn_id": tid, "order": n,
                                  "speaker": speaker, "text": text, "time": c["ts"]})
                timeline[conv].append((t, tid, speaker))  # type: ignore[arg-type]
    return timeline


def _item(f: str, i: int, it: Any, timeline: Timeline, res: ImportResult, stats: dict[str, Any],
          reasons: dict[str, int]) -> None:
    """One store item as a write in the thread whose latest message came just before it."""
    def unlinked(reason: str) -> None:
        stats["unlinked"] += 1
        reasons[reason] = reasons.get(reason, 0) + 1

    where = f"items[{i}]"
    if not isinstance(it, dict) or not isinstance(it.get("key"), str):
        res.problems.append(Problem(f, None, f"{where}.key", "missing_field", "item needs a key"))
        return
    text = _value_text(it.get("value"))
    if not text:
        res.problems.append(Problem(f, None, f"{where}.value", "empty_text", "item value has no text"))
        return
    stamp = it.get("updated_at") or it.get("created_at")
    when = _instant(stamp)
    ns = [str(x) for x in it.get("namespace") or []]
    if when is None:
        return unlinked("no_time")
    # SqliteStore stamps to the second: such an item was written somewhere in [when, when + 1), and
    # a message of that second may come before it. A store item is put from a node, after the
    # message that started the run was checkpointed, so a tie is taken as seen; two threads with
    # a message in that second cannot be told apart.
    tie = 1.0 if _whole_second(stamp) else 0.0
    named = [c for c in ns if c in timeline]
    seen = {conv: before for conv in (named or list(timeline)) if (before := _before(timeline[conv], when, tie))}
    latest = sorted(((before[-1][0], conv) for conv, before in seen.items()), reverse=True)
    if not latest:
        return unlinked("before_every_message")
    if tie and len(latest) > 1 and latest[1][0] >= when:
        return unlinked("same_second_threads")
    conv = latest[0][1]
    before = seen[conv]
    if tie and before[-1][0] >= when:
        stats["same_second_ties"] = stats.get("same_second_ties", 0) + 1
    humans = [x[1] for x in before if x[2] == "user"]
    created = _instant(it.get("created_at"))
    if created is not None and when - created >= 1.0:  # InMemoryStore stamps the two apart by microseconds
        stats["updated_items"] += 1
    res.writes.append({"type": "write", "write_id": "/".join([*ns, it["key"]]), "conversation_id": conv,
                       "text": text, "citations": humans[-1:], "last_seen_turn": before[-1][1],
                       "time": stamp, "source_id": it["key"],
                       "operation": "add", "meta": {"namespace": ns, "key": it["key"]}})


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    data = read_json(path)
    res = ImportResult()
    if not (isinstance(data, dict) and isinstance(data.get("items"), list) and isinstance(data.get("threads"), list)):
        res.problems.append(Problem(f, None, None, "bad_format", 'expected {"items": [...], "threads": [...]}'))
        return res
    timeline = _turns(f, data["threads"], res)
    stats: dict[str, Any] = {"items": len(data["items"]), "threads": len(timeline), "unlinked": 0,
                             "updated_items": 0}
    reasons: dict[str, int] = {}
    for i, it in enumerate(data["items"]):
        _item(f, i, it, timeline, res, stats, reasons)
    if reasons:
        stats["unlinked_reasons"] = dict(sorted(reasons.items()))
    stats["note"] = ("LangGraph keeps only each item's latest version, and InMemoryStore and SqliteStore reset "
                     "created_at on every put: an overwritten item looks new (updated_items counts only stores "
                     "that keep created_at, such as PostgresStore); items are joined to threads by time")
    res.notes = stats
    return res
