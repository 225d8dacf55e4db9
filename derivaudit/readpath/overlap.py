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

MemTrim's decisions (`memtrim.py`) are shown here where the log carries evidence units
(`meta.evidence` on writes and reads); no model runs here. `answers.py` (`overlap --answers`)
parses units with a model, builds the trie, and measures what trimming does to the answers.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ..audit.evidence import tokenize
from ..log.records import MemoryLog, Read, Write
from .bands import band_of
from .echo import mean_of
from .memtrim import Structured, evidence_of, trim
from .memtrim import normalise as _norm

BAND = (0.2, 0.6)
K = 5


# ---------------------------------------------------------------- overlap


def words(text: str) -> set[str]:
    return set(tokenize(text))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def correct(answer: str | None, expected: str | None) -> bool | None:
    """The expected answer, normalised (case, spaces, end punctuation), equals or occurs in the answer."""
    if answer is None or expected is None or not _norm(expected):
        return None
    a, e = _norm(answer), _norm(expected)
    return a == e or f" {e} " in f" {a} "


def memory_overlap(query: str, memory: Write) -> float:
    outcome = evidence_of(memory.meta).get("outcome")
    return jaccard(words(query), words(memory.text) - (words(outcome) if isinstance(outcome, str) else set()))


# ---------------------------------------------------------------- the audit


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
                               "band": band_of(ov[0], band) if ov else None, "correct": correct(r.answer, r.expected)}
        stored = evidence_of(top[0].meta).get("outcome") if top else None
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
