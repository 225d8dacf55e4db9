"""Temporal and modality drift over rewriting rounds (DerivAudit §4.3: under 16% at extraction,
69.7–92.6% by round 4): does a memory, rewritten by a consolidation loop, move the time of its event
or turn a plan into a fact?

Lineage comes from the log, never from wording: a rewrite (round >= 1) is compared with its round-0
ancestor (following `parent_id`, else the round-0 write of the same `source_id`) or, with
`against="parent"`, with its parent; a round-0 write is compared with the conversation turns it
cites (drift at extraction).

Two methods, both through the same backends and cache as everything else:
- `versions` (default): each version is read on its own. Modality: how does the text present its
  main event, done / planned / possible (derivaudit/prompts/drift_status.txt, three options read from their
  letters' log-odds, as the probe reads options); drift when the two versions' answers differ.
  Temporal: the time expression each version gives (derivaudit/prompts/drift_when.txt, greedy, a few
  tokens); drift when the later version gives a time that is neither the earlier one's nor written
  anywhere in the earlier text. On fixtures/drift.jsonl with Qwen2.5-Coder-1.5B this agrees with
  the known drift on 92% (temporal) and 71% (modality) of the 24 pairs.
- `pair`: the two versions side by side and one yes/no question per kind (derivaudit/prompts/drift_time.txt,
  drift_modality.txt), decided at argmax or a fixed threshold. Paper-style, but a 1.5B model
  answered yes to nearly every pair (agreement 38% and 42%); use it with a larger judge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import templates
from ..log.records import MemoryLog, Write
from ..models.base import Backend, Prompt
from ..rates.stats import balanced_resamples, clears, conversation_draws, percentile_interval

DRIFT_KINDS = {"temporal": "drift_time", "modality": "drift_modality"}
AGAINST = ("root", "parent")
METHODS = ("versions", "pair")
STATUS = ("done", "planned", "possible")  # the options of derivaudit/prompts/drift_status.txt, A B C
NO_TIME = "none"


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
                          verdict=templates.verdict(q)) for p in part for q in DRIFT_KINDS.values()]
        scores = backend.score(prompts)
        for i, p in enumerate(part):
            row = {"write_id": p.write.write_id, "conversation_id": p.write.conversation_id, "round": p.round,
                   "earlier_id": p.earlier_id, "earlier": p.earlier, "later": p.write.text}
            for j, kind in enumerate(DRIFT_KINDS):
                s = scores[len(DRIFT_KINDS) * i + j]
                row[f"{kind}_score"] = s.logodds
                row[kind] = None if s.logodds is None else clears(s.logodds, threshold)
            rows.append(row)
        progress("drift", len(part), len(pairs))
    return rows


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _time_of(generation: str) -> str:
    """The first line of a drift_when answer, normalised; "none" when it names no time."""
    line = generation.strip().splitlines()[0] if generation.strip() else ""
    t = _norm(line)
    return t if t and t != NO_TIME else NO_TIME


def time_changed(earlier_time: str, later_time: str, earlier_text: str) -> bool:
    """The later version states a time that is neither the earlier version's nor written anywhere
    in the earlier text (a time dropped is not a change of time)."""
    if later_time == NO_TIME:
        return False
    return later_time != earlier_time and later_time not in _norm(earlier_text)


def judge_versions(backend: Backend, pairs: Sequence[Pair], progress: Callable[[str, int, int], None]
                   = lambda *_: None) -> list[dict[str, Any]]:
    """The `versions` method: each distinct text's status (done / planned / possible, from the
    options' log-odds) and time expression, then the pairs compared."""
    from ..models.base import option_probs

    texts = list(dict.fromkeys(t for p in pairs for t in (p.earlier, p.write.text)))
    letters = "ABC"
    prompts = [Prompt("", templates.render("drift_status", text=t),
                      verdict=((c,), tuple(x for x in letters if x != c))) for t in texts for c in letters]
    scores = backend.score(prompts)
    status: dict[str, tuple[str | None, list[float] | None]] = {}
    for i, t in enumerate(texts):
        probs = option_probs([s.logodds for s in scores[3 * i : 3 * i + 3]])
        status[t] = (None if probs is None else STATUS[max(range(3), key=lambda k, p=probs: p[k])], probs)
    progress("drift", len(pairs) // 2, len(pairs))
    gens = backend.generate([Prompt("", templates.render("drift_when", text=t)) for t in texts], max_new_tokens=16)
    when = {t: _time_of(g) for t, g in zip(texts, gens, strict=True)}
    rows = []
    for p in pairs:
        (se, pe), (sl, pl) = status[p.earlier], status[p.write.text]
        changed = None if pe is None or pl is None else 1.0 - sum(a * b for a, b in zip(pe, pl, strict=True))
        rows.append({"write_id": p.write.write_id, "conversation_id": p.write.conversation_id, "round": p.round,
                     "earlier_id": p.earlier_id, "earlier": p.earlier, "later": p.write.text,
                     "earlier_time": when[p.earlier], "later_time": when[p.write.text],
                     "temporal": time_changed(when[p.earlier], when[p.write.text], p.earlier),
                     "temporal_score": None,
                     "earlier_status": se, "later_status": sl,
                     "modality": None if se is None or sl is None else se != sl,
                     "modality_score": changed})
    progress("drift", len(pairs) - len(pairs) // 2, len(pairs))
    return rows


def why(example: dict[str, Any], kind: str) -> str:
    """What an example's drift rests on, for people: the two times or statuses, or the log-odds."""
    if "earlier_time" in example and kind == "temporal":
        return f"time: {example['earlier_time']} -> {example['later_time']}"
    if "earlier_status" in example and kind == "modality":
        return f"status: {example['earlier_status']} -> {example['later_status']}"
    score = example.get(f"{kind}_score")
    return "log-odds n/a" if score is None else f"log-odds {score:+.2f}"


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
        for kind in DRIFT_KINDS:
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
    """Drifted pairs of each kind, the most confident first (the pair method's log-odds, the
    versions method's chance that the statuses differ), latest rounds first among equals."""
    out = {}
    for kind in DRIFT_KINDS:
        hit = [r for r in rows if r[kind]]
        hit.sort(key=lambda r: (-(r[f"{kind}_score"] or 0.0), -r["round"]))
        keep = ("write_id", "round", "earlier", "later", f"{kind}_score", "earlier_time", "later_time",
                "earlier_status", "later_status")
        out[kind] = [{k: r[k] for k in keep if k in r} for r in hit[:per_kind]]
    return out


def drift(log: MemoryLog, backend: Backend, *, against: str = "root", method: str = "versions",
          threshold: float = 0.0, reps: int = 1000,
          progress: Callable[[str, int, int], None] = lambda *_: None) -> dict[str, Any]:
    """The drift report of a log: per-round rates of both kinds, examples, the pairs, and what
    could not be placed in a lineage."""
    if method not in METHODS:
        raise ValueError(f"--method must be {' or '.join(METHODS)}, not {method!r}")
    pairs, notes = lineage(log, against)
    rows = (judge_versions(backend, pairs, progress) if method == "versions"
            else judge(backend, pairs, threshold, progress=progress))
    gold = [(r, (w.meta or {}).get("drift")) for r, w in zip(rows, (p.write for p in pairs), strict=True)]
    known = [(r, g) for r, g in gold if isinstance(g, dict)]
    check = None
    if known:
        check = {kind: {"n": sum(kind in g for _, g in known),
                        "agreement": _share([r[kind] == bool(g[kind]) for r, g in known if kind in g
                                             and r[kind] is not None])} for kind in DRIFT_KINDS}
    return {"against": against, "method": method, "threshold": threshold if method == "pair" else None,
            "pairs": len(rows), "rounds": rates(rows, reps),
            "examples": examples(rows), "unplaced": notes, "expected": check, "rows": rows,
            "model": backend.identity()}


def _share(xs: Sequence[bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None
