"""Memory overreliance over retrieval logs (the MemTrim paper): partial query–memory overlap, and MemTrim.

A retrieved memory that shares much of the query's evidence but not its answer-relevant part pulls
the answer toward its stored conclusion; the seed finds failures concentrated at partial overlap,
and successes near both ends of the range. This module measures, for every read:

- overlap: content-word Jaccard between the query and each retrieved memory, the stored answer
  (`meta.evidence.outcome` of the write, when given) excluded; a read's overlap is its top memory's.
  Reads whose overlap falls in the middle band (default [0.2, 0.6), our choice: the seed gives a
  figure, not numbers) are flagged as risky;
- where answers and expected answers are logged: accuracy by band, and TA vs TD-Dup — task-aligned
  when the top memory's stored answer is the expected one, task-divergent with duplicated evidence
  when it differs while the overlap is at least the band's lower edge — with how often the given
  answer adopted the stale stored one.

MemTrim (the MemTrim paper, §3) is the read-time mitigation, as a library (`EvidenceIndex`, `trim`) and in
the report when the log carries evidence units (`meta.evidence` on writes and reads: `units`
[[key, value], ...], `task`, and for writes `outcome` and `support`, the units the outcome
depends on; all units when not given, the seed's conservative rule). No parser is run here: units
come from the memory system or from whoever prepared the log.
"""

from __future__ import annotations

import statistics
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..audit.evidence import tokenize
from ..log.records import MemoryLog, Read, Write
from .echo import mean_of

BAND = (0.2, 0.6)
K = 5


# ---------------------------------------------------------------- overlap


def words(text: str) -> set[str]:
    return set(tokenize(text))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _norm(text: str | None) -> str:
    return " ".join(unicodedata.normalize("NFKC", text or "").casefold().split()).strip(" .!?")


def correct(answer: str | None, expected: str | None) -> bool | None:
    """The expected answer, normalised (case, spaces, end punctuation), equals or occurs in the answer."""
    if answer is None or expected is None or not _norm(expected):
        return None
    a, e = _norm(answer), _norm(expected)
    return a == e or f" {e} " in f" {a} "


def _evidence(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    ev = (meta or {}).get("evidence")
    return ev if isinstance(ev, Mapping) else {}


def memory_overlap(query: str, memory: Write) -> float:
    outcome = _evidence(memory.meta).get("outcome")
    return jaccard(words(query), words(memory.text) - (words(outcome) if isinstance(outcome, str) else set()))


# ---------------------------------------------------------------- MemTrim


@dataclass(frozen=True, order=True)
class Unit:
    """One evidence unit (key, value), compared after normalisation (case, spaces, NFKC)."""

    key: str
    value: str

    @classmethod
    def of(cls, key: Any, value: Any) -> Unit:
        return cls(_norm(str(key)), _norm(str(value)))


@dataclass(frozen=True)
class Structured:
    """A memory (or a query) in evidence space: units, task signature, stored outcome, support set."""

    ident: str
    units: frozenset[Unit]
    task: str | None = None
    outcome: str | None = None
    support: frozenset[Unit] = frozenset()
    time: str | None = None

    @classmethod
    def from_meta(cls, ident: str, meta: Mapping[str, Any] | None, time: str | None = None) -> Structured | None:
        ev = _evidence(meta)
        if not ev.get("units"):
            return None
        units = frozenset(Unit.of(*u) for u in ev["units"])
        support = frozenset(Unit.of(*u) for u in ev["support"]) if ev.get("support") is not None else units
        task = _norm(ev["task"]) if ev.get("task") else None
        return cls(ident, units, task, ev.get("outcome"), support & units, time)


class EvidenceIndex:
    """The write-time trie: key -> value -> memories holding that unit (and whether it supports their
    outcome). Identical units share a node; different values of one key branch under it."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, dict[str, bool]]] = {}

    def add(self, m: Structured) -> None:
        for u in m.units:
            self.nodes.setdefault(u.key, {}).setdefault(u.value, {})[m.ident] = u in m.support

    def values(self, key: str, among: Iterable[str] | None = None) -> dict[str, set[str]]:
        """value -> memories holding it, restricted to `among` (the retrieved set) when given."""
        keep = set(among) if among is not None else None
        return {v: {m for m in ms if keep is None or m in keep} for v, ms in self.nodes.get(key, {}).items()
                if keep is None or keep & set(ms)}


@dataclass
class Trimmed:
    """What MemTrim passes on for one query, and why."""

    context: list[Unit]
    outcomes: dict[str, str]  # memory id -> keep | convert | suppress | none
    shared: dict[str, list[Unit]] = field(default_factory=dict)
    conflicting: dict[str, list[Unit]] = field(default_factory=dict)
    memory_only: dict[str, list[Unit]] = field(default_factory=dict)
    withheld: list[str] = field(default_factory=list)  # keys whose retrieved values conflict, unresolved

    def to_dict(self) -> dict[str, Any]:
        def units(d: Mapping[str, list[Unit]]) -> dict[str, list[list[str]]]:
            return {k: [[u.key, u.value] for u in v] for k, v in d.items()}
        return {"context": [[u.key, u.value] for u in self.context], "outcomes": self.outcomes,
                "shared": units(self.shared), "conflicting": units(self.conflicting),
                "memory_only": units(self.memory_only), "withheld": self.withheld}


def trim(query: Structured, retrieved: Sequence[Structured], index: EvidenceIndex | None = None,
         *, by_time: bool = False) -> Trimmed:
    """MemTrim's read-time rule (the MemTrim paper, eq. 1). Per memory: shared units (key and value in the
    query) and conflicting ones (key in the query, other value) are dropped, memory-only ones kept;
    the stored outcome is kept when no supporting unit conflicts and the task is the query's,
    converted into a unit labelled by its task when the task differs, suppressed when a supporting
    unit conflicts. Then units are merged, each once; a key the query does not settle on which the
    retrieved memories disagree is withheld (or, with `by_time`, settled by the latest memory)."""
    if index is None:
        index = EvidenceIndex()
        for m in retrieved:
            index.add(m)
    q = {u.key: u.value for u in query.units}
    out = Trimmed([], {})
    kept: dict[str, list[tuple[str, Unit]]] = {}
    for m in retrieved:
        s = [u for u in sorted(m.units) if q.get(u.key) == u.value]
        d = [u for u in sorted(m.units) if u.key in q and q[u.key] != u.value]
        only = [u for u in sorted(m.units) if u.key not in q]
        out.shared[m.ident], out.conflicting[m.ident], out.memory_only[m.ident] = s, d, only
        extra: list[Unit] = []
        if m.outcome is None:
            out.outcomes[m.ident] = "none"
        elif set(d) & m.support:
            out.outcomes[m.ident] = "suppress"
        elif m.task == query.task:
            out.outcomes[m.ident] = "keep"
            extra = [Unit("answer", _norm(m.outcome))]
        else:
            out.outcomes[m.ident] = "convert"
            extra = [Unit(m.task or "previous answer", _norm(m.outcome))]
        for u in only + extra:
            kept.setdefault(u.key, []).append((m.ident, u))
    order = {m.ident: i for i, m in enumerate(retrieved)}
    times = {m.ident: m.time or "" for m in retrieved}
    for key, items in kept.items():
        values = {u.value for _, u in items}
        if len(values) > 1:
            if not by_time:
                out.withheld.append(key)
                continue
            latest = max(items, key=lambda x: (times[x[0]], -order[x[0]]))[1]
            items = [(i, u) for i, u in items if u.value == latest.value]
        seen: set[Unit] = set()
        for _, u in items:
            if u not in seen:
                seen.add(u)
                out.context.append(u)
    return out


# ---------------------------------------------------------------- the audit


def _band_of(x: float, band: tuple[float, float]) -> str:
    return "low" if x < band[0] else "middle" if x < band[1] else "high"


def check_band(band: tuple[float, float]) -> None:
    if not 0 <= band[0] < band[1] <= 1:
        raise ValueError(f"band {band}: expected 0 <= low < high <= 1")


def audit_overlap(log: MemoryLog, *, k: int = K, band: tuple[float, float] = BAND) -> dict[str, Any]:
    """Overlap of every read with its retrieved memories, bands, TA/TD-Dup accuracy, and MemTrim
    decisions where the log carries evidence units."""
    check_band(band)
    by_id = {w.write_id: w for w in log.writes}
    reads = []
    for r in log.reads:
        top = [by_id[i] for i in r.retrieved[:k]]
        ov = [memory_overlap(r.query, w) for w in top]
        row: dict[str, Any] = {"read_id": r.read_id, "conversation_id": r.conversation_id,
                               "overlap": [round(x, 4) for x in ov], "top_overlap": ov[0] if ov else None,
                               "band": _band_of(ov[0], band) if ov else None, "correct": correct(r.answer, r.expected)}
        stored = _evidence(top[0].meta).get("outcome") if top else None
        if r.expected is not None and isinstance(stored, str):
            same = correct(stored, r.expected)
            row["case"] = "TA" if same else "TD-Dup" if ov[0] >= band[0] else "TD"
            row["adopted_stale"] = (correct(r.answer, stored) if row["case"] == "TD-Dup" and r.answer is not None
                                    else None)
        row["memtrim"] = _memtrim(r, top)
        reads.append(row)
    tops = [x["top_overlap"] for x in reads if x["top_overlap"] is not None]
    m: dict[str, float | None] = {
        "reads": float(len(reads)),
        "mean": statistics.fmean(tops) if tops else None,
        "risky": (sum(x["band"] == "middle" for x in reads if x["band"]) / len(tops)) if tops else None,
        "accuracy": mean_of([x["correct"] for x in reads]),
    }
    for b in ("low", "middle", "high"):
        m[f"accuracy.{b}"] = mean_of([x["correct"] for x in reads if x["band"] == b])
    for case, name in (("TA", "ta"), ("TD-Dup", "td_dup")):
        sel = [x for x in reads if x.get("case") == case]
        m[f"{name}"] = float(len(sel))
        m[f"accuracy.{name}"] = mean_of([x["correct"] for x in sel])
    m["adopted_stale"] = mean_of([x.get("adopted_stale") for x in reads if x.get("case") == "TD-Dup"])
    trimmed = [x["memtrim"] for x in reads if x["memtrim"]]
    m["memtrim.reads"] = float(len(trimmed))
    decisions = [d for t in trimmed for d in t["outcomes"].values() if d != "none"]
    m["memtrim.suppressed"] = (decisions.count("suppress") / len(decisions)) if decisions else None
    m["memtrim.withheld"] = (sum(bool(t["withheld"]) for t in trimmed) / len(trimmed)) if trimmed else None
    hist = [0] * 10
    for x in tops:
        hist[min(int(x * 10), 9)] += 1
    return {"settings": {"k": k, "band": list(band), "words": "lower-cased \\w+ minus stop words"},
            "metrics": {f"overlap.{n}": v for n, v in m.items()}, "histogram": hist, "reads": reads}


def _memtrim(r: Read, top: Sequence[Write]) -> dict[str, Any] | None:
    q = Structured.from_meta(r.read_id, r.meta, r.time)
    ms = [s for w in top if (s := Structured.from_meta(w.write_id, w.meta, w.time)) is not None]
    if q is None or not ms:
        return None
    return trim(q, ms).to_dict()
