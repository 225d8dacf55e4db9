"""What an earlier scan of a run can give the next one: a store grows, and its audit should too.

A run records a digest of the log it audited (per conversation: its turns, writes and operations,
in order) and, per stage, the settings its rows were made with and one key per row. A later scan
of the same run folder

- goes on only if the new log is the old one or grew from it by appending (every conversation's
  old turns, writes and operations are a prefix of its new ones; new conversations may join). Any
  other change (an edited or removed turn or write) is another store, which is never mixed into
  the old run's results (`not_grown` says what changed);
- reuses a write's rows when its key is the same: the key is the write's record and both of its
  evidence views as built now (the passages with their texts and times, the search-limited flag),
  so an old write whose pre-write evidence changed is judged again. Appending turns can change
  the expanded view of an older write only through BM25's statistics, which are those of the whole
  conversation (evidence.py); every such write is found by comparing its views, never assumed;
- reuses the judges' calibration when the judges (model, variant, role) and the calibration
  corpus are the same: a run's calibration belongs to the run, so an incremental scan judges new
  writes at the thresholds the old ones were judged at. To recalibrate, scan into a new folder.

The record lives in RUN/reuse.json (runs.REUSE), one entry per stage, dropped before the stage's
file is replaced and written after, so a scan killed in between reuses nothing it should not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..log.records import MemoryLog, Operation, Turn, Write
from ..runs import folder as runs

_fp = runs.fingerprint
_SKIP = ("meta", "source")  # where a record came from and what it carries for reports, not what is judged


def record(x: Write | Operation | Turn) -> list[Any]:
    """The judged content of a turn, write or operation: every field but its source and meta."""
    return [getattr(x, f.name) for f in fields(x) if f.name not in _SKIP]


def digest(log: MemoryLog) -> dict[str, dict[str, Any]]:
    """Per conversation: how many turns, writes and operations it has and one fingerprint of each
    sequence's prefix up to that count, so that growth by appending can be told from any edit."""
    return {cid: {what: _seq(items) for what, items in seqs.items()} for cid, seqs in sorted(_sequences(log).items())}


def _sequences(log: MemoryLog) -> dict[str, dict[str, list[Any]]]:
    """Per conversation: its turns, writes and operations, each in log order."""
    out: dict[str, dict[str, list[Any]]] = {cid: {"turns": conv.turns, "writes": [], "operations": []}
                                            for cid, conv in log.conversations.items()}
    for w in log.writes:
        out[w.conversation_id]["writes"].append(w)
    for o in log.operations:
        out[o.conversation_id]["operations"].append(o)
    return out


def _seq(items: list[Any], n: int | None = None) -> list[Any]:
    part = items if n is None else items[:n]
    return [len(part), _fp([record(x) for x in part])]


def not_grown(old: dict[str, dict[str, Any]], log: MemoryLog) -> str | None:
    """None when `log` is the log digested as `old` or grew from it by appending; else what
    changed, in words."""
    seqs = _sequences(log)
    for cid, was in sorted(old.items()):
        now = seqs.get(cid)
        if now is None:
            return f"conversation {cid!r} is gone"
        for what, items in now.items():
            n, fp = was[what]
            if len(items) < n:
                return f"conversation {cid!r} has {len(items)} {what} where the earlier scan had {n}"
            if _seq(items, n)[1] != fp:
                return f"conversation {cid!r}: some of its first {n} {what} differ from the earlier scan's"
    return None


def write_key(v_row: dict[str, Any], w: Write) -> str:
    """What a write's judgement depends on besides settings: its record and what the judges see of
    both views (passages with their texts and times) and the search-limited flag; not the BM25
    scores, which move with every turn appended to the conversation without changing a view."""
    return _fp(record(w), v_row["citation_only"], v_row["expanded"], v_row["search_limited"])


class Reuse:
    """RUN/reuse.json: per stage, the settings fingerprint its rows were made with and each row's key."""

    def __init__(self, run: Path, notify: Any = None):
        self.run = Path(run)
        why = runs.damaged(self.run, runs.REUSE) if runs.exists(self.run, runs.REUSE) else None
        if why and notify:
            notify(f"nothing reused from the earlier scan: {why}")
        self.doc: dict[str, Any] = {} if why else (runs.read_json_if(self.run, runs.REUSE) or {})

    def usable(self, stage: str, settings: str, keys: dict[str, str]) -> set[str]:
        """The row ids of `stage`'s file that may be reused: same settings, same key, file intact."""
        entry = self.doc.get(stage)
        name = runs.STAGES.get(stage, f"{stage}.jsonl")
        if not entry or entry.get("settings") != settings or not runs.exists(self.run, name) \
                or runs.damaged(self.run, name):
            return set()
        old = entry.get("keys", {})
        return {i for i, k in keys.items() if old.get(i) == k}

    def rows(self, stage: str, ids: Iterable[str], id_field: str = "write_id") -> list[dict[str, Any]]:
        want = set(ids)
        if not want:
            return []
        return [r for r in runs.read_rows(self.run, runs.STAGES.get(stage, f"{stage}.jsonl"))
                if r.get(id_field) in want]

    def forget(self, stage: str) -> None:
        """Before a stage's file is replaced: its old keys no longer describe it."""
        if self.doc.pop(stage, None) is not None:
            runs.write_json(self.run, runs.REUSE, self.doc, sort_keys=True)

    def remember(self, stage: str, settings: str, keys: dict[str, str]) -> None:
        self.doc[stage] = {"settings": settings, "keys": keys}
        runs.write_json(self.run, runs.REUSE, self.doc, sort_keys=True)
