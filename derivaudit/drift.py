"""Temporal and modality drift over rewriting rounds (seed 004 §4.3: under 16% at extraction,
69.7–92.6% by round 4): does a memory, rewritten by a consolidation loop, move the time of its event
or turn a plan into a fact?

Lineage comes from the log, never from wording: a rewrite (round >= 1) is compared with its round-0
ancestor (following `parent_id`, else the round-0 write of the same `source_id`) or, with
`against="parent"`, with its parent; a round-0 write is compared with the conversation turns it
cites (drift at extraction). Each pair gets two judged questions (prompts/drift_*.txt), read as
log-odds like every other verdict, and decided at argmax or a fixed threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import templates
from .models.base import Backend, Prompt
from .records import MemoryLog, Write
from .stats import balanced_resamples, conversation_draws, percentile_interval

KINDS = {"temporal": "drift_time", "modality": "drift_modality"}
AGAINST = ("root", "parent")


@dataclass(frozen=True)
class Pair:
    """A write and the earlier version it is compared with."""

    write: Write
    round: int
    earlier: str  # the earlier text (an ancestor write, or the cited turns at round 0)
    earlier_id: str  # the ancestor's write id, or "turns:<ids>" at round 0


def _cited_text(log: MemoryLog, w: Write) -> str:
    conv = log.conversations[w.conversation_id]
    by_id = {t.turn_id: t for t in conv.turns}
    return "\n".join(f"{by_id[c].speaker}: {' '.join(by_id[c].text.split())}" for c in w.citations if c in by_id)


def lineage(log: MemoryLog, against: str = "root") -> tuple[list[Pair], list[str]]:
    """The pairs to judge, and a note for every write that could not be placed (no round, a missing
    parent, a cycle, no round-0 write for its source)."""
    if against not in AGAINST:
        raise ValueError(f"--against must be {' or '.join(AGAINST)}, not {against!r}")
    by_id = {w.write_id: w for w in log.writes}
    roots: dict[tuple[str, str], Write] = {}
    for w in log.writes:
        if w.round == 0 and w.source_id:
            roots.setdefault((w.conversation_id, w.source_id), w)
    pairs, notes = [], []
    for w in log.writes:
        if w.round is None:
            notes.append(f"{w.write_id}: no round, not part of a rewrite lineage")
            continue
        if w.round == 0:
            text = _cited_text(log, w)
            if text:
                pairs.append(Pair(w, 0, text, "turns:" + ",".join(w.citations)))
            else:
                notes.append(f"{w.write_id}: round 0 without cited turns")
            continue
        anc = _ancestor(w, by_id, roots, against)
        if isinstance(anc, str):
            notes.append(f"{w.write_id}: {anc}")
        else:
            pairs.append(Pair(w, w.round, anc.text, anc.write_id))
    return pairs, notes


def _ancestor(w: Write, by_id: dict[str, Write], roots: dict[tuple[str, str], Write], against: str) -> Write | str:
    if against == "parent":
        if w.parent_id and w.parent_id in by_id:
            return by_id[w.parent_id]
        return f"parent {w.parent_id!r} is not in the log" if w.parent_id else "a rewrite without parent_id"
    seen, cur = {w.write_id}, w
    while cur.parent_id and cur.parent_id in by_id and (cur.round or 0) > 0:
        cur = by_id[cur.parent_id]
        if cur.write_id in seen:
            return "its parent_id chain loops"
        seen.add(cur.write_id)
    if cur is not w and cur.round == 0:
        return cur
    root = roots.get((w.conversation_id, w.source_id)) if w.source_id else None
    return root or "no round-0 ancestor (neither through parent_id nor by source_id)"


def judge(backend: Backend, pairs: Sequence[Pair], threshold: float = 0.0, chunk: int = 32,
          progress: Callable[[str, int, int], None] = lambda *_: None) -> list[dict[str, Any]]:
    """Both drift questions for every pair: log-odds and the decision (yes when log-odds > threshold
    at the argmax default of 0, else >= threshold). A scoring error leaves that decision None."""
    rows = []
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        prompts = [Prompt(templates.render("drift_pair", earlier=p.earlier, later=p.write.text), templates.load(q),
                          verdict=templates.verdict(q)) for p in part for q in KINDS.values()]
        scores = backend.score(prompts)
        for i, p in enumerate(part):
            row = {"write_id": p.write.write_id, "conversation_id": p.write.conversation_id, "round": p.round,
                   "earlier_id": p.earlier_id, "earlier": p.earlier, "later": p.write.text}
            for j, kind in enumerate(KINDS):
                s = scores[len(KINDS) * i + j]
                row[f"{kind}_logodds"] = s.logodds
                row[kind] = None if s.logodds is None else (
                    s.logodds > threshold if threshold == 0.0 else s.logodds >= threshold)
            rows.append(row)
        progress("drift", len(part), len(pairs))
    return rows


def rates(rows: Sequence[dict[str, Any]], reps: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per round and kind: conversation-balanced drift rate with a 95% bootstrap interval over
    conversations, the write-weighted rate and the counts."""
    import numpy as np

    out: dict[str, Any] = {}
    for rnd in sorted({r["round"] for r in rows}):
        at = [r for r in rows if r["round"] == rnd]
        convs = sorted({r["conversation_id"] for r in at})
        ix = {c: i for i, c in enumerate(convs)}
        cell: dict[str, Any] = {"pairs": len(at), "conversations": len(convs)}
        for kind in KINDS:
            hits, n = np.zeros(len(convs)), np.zeros(len(convs))
            for r in at:
                if r[kind] is not None:
                    hits[ix[r["conversation_id"]]] += bool(r[kind])
                    n[ix[r["conversation_id"]]] += 1
            per = [float(h / k) for h, k in zip(hits, n, strict=True) if k]
            ci = percentile_interval(balanced_resamples(hits, n, conversation_draws(len(convs), reps, seed))) \
                if len(convs) >= 2 else (None, None)
            cell[kind] = {"balanced": sum(per) / len(per) if per else None, "ci": list(ci),
                          "weighted": float(hits.sum() / n.sum()) if n.sum() else None,
                          "drifted": int(hits.sum()), "judged": int(n.sum())}
        out[str(rnd)] = cell
    return out


def examples(rows: Sequence[dict[str, Any]], per_kind: int = 3) -> dict[str, list[dict[str, Any]]]:
    """The most confident drifted pairs of each kind (highest log-odds first)."""
    out = {}
    for kind in KINDS:
        hit = [r for r in rows if r[kind]]
        hit.sort(key=lambda r: -r[f"{kind}_logodds"])
        out[kind] = [{k: r[k] for k in ("write_id", "round", "earlier", "later", f"{kind}_logodds")}
                     for r in hit[:per_kind]]
    return out


def drift(log: MemoryLog, backend: Backend, *, against: str = "root", threshold: float = 0.0, reps: int = 1000,
          progress: Callable[[str, int, int], None] = lambda *_: None) -> dict[str, Any]:
    """The drift report of a log: per-round rates of both kinds, examples, the pairs, and what
    could not be placed in a lineage."""
    pairs, notes = lineage(log, against)
    rows = judge(backend, pairs, threshold, progress=progress)
    gold = [(r, (w.meta or {}).get("drift")) for r, w in zip(rows, (p.write for p in pairs), strict=True)]
    known = [(r, g) for r, g in gold if isinstance(g, dict)]
    check = None
    if known:
        check = {kind: {"n": sum(kind in g for _, g in known),
                        "agreement": _share([r[kind] == bool(g[kind]) for r, g in known if kind in g
                                             and r[kind] is not None])} for kind in KINDS}
    return {"against": against, "threshold": threshold, "pairs": len(rows), "rounds": rates(rows, reps),
            "examples": examples(rows), "unplaced": notes, "expected": check, "rows": rows,
            "model": backend.identity()}


def _share(xs: Sequence[bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None
