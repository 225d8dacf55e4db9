"""What a memory log's provenance says about its read path: lineage families, verified corrections and
the records they compete with, and how often each record had been served before a read.

- family: a write's `source_id`, else its parent's family, else its own id (ancestry, not wording);
- a correction: a write with `verified_correction: true`; it supersedes the families in its
  `supersedes`, else its parent's family. Its old records are the superseded families' writes (same
  conversation) other than the correction and its descendants; its new records are the correction
  and its descendants;
- exposures: for each read, how many earlier reads of its conversation (earlier point, or the same
  point earlier in the log) served each record in their top k.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..log.history import point_order
from ..log.records import MemoryLog, Read, Write


@dataclass
class Correction:
    """A verified correction and the records it competes with."""

    write: Write
    superseded: tuple[str, ...]  # family ids
    point: int  # order of its write point
    old: frozenset[str]  # write ids
    new: frozenset[str]


def corrections(log: MemoryLog, fam: Mapping[str, str]) -> list[Correction]:
    children: dict[str, list[str]] = {}
    for w in log.writes:
        if w.parent_id:
            children.setdefault(w.parent_id, []).append(w.write_id)
    out = []
    for c in log.writes:
        if not c.verified_correction:
            continue
        if c.supersedes:
            sup = tuple(c.supersedes)
        elif c.parent_id:
            sup = (fam[c.parent_id],)
        else:
            continue  # a correction of nothing named: no old family to measure
        new, todo = {c.write_id}, [c.write_id]
        while todo:
            for ch in children.get(todo.pop(), []):
                if ch not in new:
                    new.add(ch)
                    todo.append(ch)
        old = {w.write_id for w in log.writes if fam[w.write_id] in sup and w.write_id not in new
               and w.conversation_id == c.conversation_id}
        out.append(Correction(c, sup, point_order(c, log.conversations[c.conversation_id]), frozenset(old),
                              frozenset(new)))
    return out


def read_points(log: MemoryLog) -> dict[str, int]:
    return {r.read_id: point_order(r, log.conversations[r.conversation_id]) for r in log.reads}


def in_force(cors: list[Correction], r: Read, point: int) -> list[Correction]:
    """The corrections made in the read's conversation at or before its point."""
    return [c for c in cors if c.write.conversation_id == r.conversation_id and c.point <= point]


def exposures(log: MemoryLog, k: int) -> dict[str, Counter[str]]:
    """read id -> how many earlier reads of its conversation served each record in their top k."""
    point = read_points(log)
    seen: dict[str, Counter[str]] = {}
    out: dict[str, Counter[str]] = {}
    order = sorted(range(len(log.reads)), key=lambda i: (log.reads[i].conversation_id, point[log.reads[i].read_id], i))
    for i in order:
        r = log.reads[i]
        c = seen.setdefault(r.conversation_id, Counter())
        out[r.read_id] = Counter(c)
        c.update(dict.fromkeys(r.retrieved[:k], 1))
    return out
