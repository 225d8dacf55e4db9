"""The data model: conversation turns, memory writes, and the problems found while loading them.

Plain frozen dataclasses so that every later stage can pass them around, hash them and
serialise them without a framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

LOG_SCHEMA_VERSION = 1
MAX_PASSAGES = 16  # total evidence budget per view (DerivAudit, §3.1)
MAX_RETRIEVED = 12  # BM25 passages added on top of the citations


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record came from, so every message can point at file and line."""

    file: str
    line: int


@dataclass(frozen=True, slots=True)
class Turn:
    conversation_id: str
    turn_id: str
    order: int
    speaker: str
    text: str
    time: str | None = None
    session: str | None = None
    source: Source | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.conversation_id, self.turn_id)


@dataclass(frozen=True, slots=True)
class Write:
    write_id: str
    conversation_id: str
    text: str
    citations: tuple[str, ...]
    last_seen_turn: str
    time: str | None = None
    source_id: str | None = None
    parent_id: str | None = None
    operation: str | None = None
    round: int | None = None
    valid: bool | None = None
    verified_correction: bool | None = None
    supersedes: tuple[str, ...] | None = None
    meta: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    source: Source | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Read:
    """One retrieval: the memories returned for `query`, best first, at the read point."""

    read_id: str
    conversation_id: str
    last_seen_turn: str
    query: str
    retrieved: tuple[str, ...]  # write ids in rank order
    scores: tuple[float | None, ...] = ()  # aligned with `retrieved` when the log gives scores
    time: str | None = None
    answer: str | None = None
    expected: str | None = None
    meta: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    source: Source | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Operation:
    """A deletion or invalidation of an earlier write, as the store made it at its point in the
    conversation (an update is a write with `parent_id`; a correction a write with `supersedes`).
    It asserts that the target no longer holds, or that the user asked to forget it: an assertion
    the history before `last_seen_turn` can be checked against, like a write's."""

    operation_id: str
    conversation_id: str
    kind: str  # delete | invalidate
    target: str  # the write deleted or invalidated
    last_seen_turn: str  # the operation point
    time: str | None = None
    citations: tuple[str, ...] = ()
    successor: str | None = None  # the write that replaces the target, when the store names one
    origin: str | None = None  # conversation | api | ui | unknown: where the store says it came from
    meta: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    source: Source | None = field(default=None, compare=False)


@dataclass(slots=True)
class Conversation:
    """The turns of one conversation in time order, with lookups by id."""

    conversation_id: str
    turns: list[Turn]
    position: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.turns.sort(key=lambda t: t.order)
        self.position = {t.turn_id: i for i, t in enumerate(self.turns)}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: enough to find it and fix it."""

    file: str
    line: int | None
    field: str | None
    code: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f"{self.field}: " if self.field else ""
        return f"{where}: {what}{self.message} [{self.code}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "code": self.code,
            "message": self.message,
        }


@dataclass(slots=True)
class MemoryLog:
    """A validated memory log: conversations by id, writes in input order, and what was skipped."""

    conversations: dict[str, Conversation]
    writes: list[Write]
    skipped: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)  # loaded anyway; errors under --strict
    reads: list[Read] = field(default_factory=list)  # in input order
    operations: list[Operation] = field(default_factory=list)  # in input order

    def write(self, write_id: str) -> Write:
        for w in self.writes:
            if w.write_id == write_id:
                return w
        raise KeyError(write_id)

    @property
    def n_turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations.values())


def lineage_families(writes: Sequence[Write]) -> dict[str, str]:
    """The lineage families of the Memory Echo paper (not the matched families of built/families.py):
    write id -> family id (source_id, else the parent's family, else the write's own id)."""
    by_id = {w.write_id: w for w in writes}
    out: dict[str, str] = {}

    def fam(w: Write) -> str:
        chain = []
        cur: Write | None = w
        while cur is not None and cur.write_id not in out:
            if cur.source_id:
                out[cur.write_id] = cur.source_id
                break
            chain.append(cur)
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
        base = out[cur.write_id] if cur is not None else chain[-1].write_id
        for c in chain:
            out[c.write_id] = base
        return out[w.write_id]

    for w in writes:
        fam(w)
    return out


class LogError(Exception):
    """Raised when input is invalid (strict mode) or unreadable (any mode)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        head = "\n".join(str(p) for p in self.problems[:20])
        more = len(self.problems) - 20
        super().__init__(head + (f"\n... and {more} more" if more > 0 else ""))


def turn_to_dict(t: Turn) -> dict[str, Any]:
    d: dict[str, Any] = {
        "type": "turn", "conversation_id": t.conversation_id, "turn_id": t.turn_id,
        "order": t.order, "speaker": t.speaker, "text": t.text,
    }
    if t.time is not None:
        d["time"] = t.time
    if t.session is not None:
        d["session"] = t.session
    return d


def _with_optional(d: dict[str, Any], rec: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """`d` with each of the record's optional `fields` that is set (tuples written as lists)."""
    for k in fields:
        v = getattr(rec, k)
        if v is not None:
            d[k] = list(v) if isinstance(v, tuple) else v
    return d


def write_to_dict(w: Write) -> dict[str, Any]:
    d: dict[str, Any] = {
        "type": "write", "write_id": w.write_id, "conversation_id": w.conversation_id, "text": w.text,
        "citations": list(w.citations), "last_seen_turn": w.last_seen_turn,
    }
    return _with_optional(d, w, ("time", "source_id", "parent_id", "operation", "round", "valid",
                                 "verified_correction", "supersedes", "meta"))


def read_to_dict(r: Read) -> dict[str, Any]:
    retrieved: list[Any] = list(r.retrieved)
    if r.scores:
        retrieved = [{"write_id": w, "score": s} for w, s in zip(r.retrieved, r.scores, strict=True)]
    d: dict[str, Any] = {"type": "read", "read_id": r.read_id, "conversation_id": r.conversation_id,
                         "last_seen_turn": r.last_seen_turn, "query": r.query, "retrieved": retrieved}
    return _with_optional(d, r, ("time", "answer", "expected", "meta"))


def operation_to_dict(o: Operation) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "operation", "operation_id": o.operation_id, "conversation_id": o.conversation_id,
                         "kind": o.kind, "target": o.target, "last_seen_turn": o.last_seen_turn}
    if o.citations:
        d["citations"] = list(o.citations)
    return _with_optional(d, o, ("time", "successor", "origin", "meta"))


def header(producer: str) -> dict[str, Any]:
    return {"type": "header", "schema_version": LOG_SCHEMA_VERSION, "producer": producer}
