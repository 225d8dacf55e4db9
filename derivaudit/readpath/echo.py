"""Memory echo over retrieval logs (the Memory Echo paper): one source occupying several retrieval slots.

Write-back turns one claim into several records (a paraphrase, a consolidation, a re-extraction),
each of which retrieval may return as if it were independent evidence; after a verified correction
the old family keeps competing with it. This module measures it from the provenance the log
already carries (families and corrections: `provenance.py`).

Metrics (definitions are ours; the seed names them without formulas). Slot r of a read's top k
weighs 1/log2(r+1), as in DCG, and a read's share is over the slots it filled:
- Echo Density (ED): rank-weighted share of a read's top-k slots held by old records of a correction.
  `density` is its mean over the reads after each correction (`density_pre`: before it).
- excess: rank-weighted share of top-k slots whose family already holds a higher slot, with or
  without corrections (the same source counted as a second piece of evidence).
- Reconsolidation Resistance Index (RRI): over the post-correction reads where the old or the new
  records appear, the old records' rank-weighted share of the two (1: only the old family is served,
  0: only the correction); `rri_storage`: the same share in storage at the end of the log (records
  not marked `valid: false`), the unranked form for logs without reads.
- Windowed Echo Persistence (WEP): mean ED over the first `window` reads after a correction.

`serve="fpa"` replays each logged candidate pool as FPA (`fpa.py`, the paper's rule) would serve it
and computes the same metrics on what is served.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..log.records import MemoryLog, Read, Write, lineage_families
from .fpa import Conflicts, served_by_fpa
from .provenance import Correction, corrections, read_points

K = 5  # the five-record budget of the Memory Echo paper
SERVING = ("fpa",)  # the serving rules `audit_echo(serve=...)` replays
WINDOW = 30  # post-correction read-only probes


def _weights(n: int) -> list[float]:
    return [1 / math.log2(r + 2) for r in range(n)]


def share(ids: Sequence[str], hit: frozenset[str] | set[str], k: int) -> float | None:
    """Rank-weighted share of the top-k slots held by `hit` (over the slots filled)."""
    top = ids[:k]
    if not top:
        return None
    ws = _weights(len(top))
    return sum(w for w, i in zip(ws, top, strict=True) if i in hit) / sum(ws)


def _excess(ids: Sequence[str], fam: Mapping[str, str], k: int) -> float | None:
    top = ids[:k]
    if not top:
        return None
    ws, seen, extra = _weights(len(top)), set(), 0.0
    for w, i in zip(ws, top, strict=True):
        f = fam[i]
        if f in seen:
            extra += w
        seen.add(f)
    return extra / sum(ws)


def _rri(ids: Sequence[str], c: Correction, k: int) -> float | None:
    old, new = share(ids, c.old, k), share(ids, c.new, k)  # same denominator: the ratio is the slots'
    if old is None or new is None or old + new == 0:  # no slot filled, or neither family served
        return None
    return old / (old + new)


def mean_of(xs: Sequence[float | None]) -> float | None:
    """The mean of the values present (None when there is none): a rate over what could be measured."""
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


@dataclass
class EchoResult:
    settings: dict[str, Any]
    metrics: dict[str, float | None]
    families: list[dict[str, Any]]
    corrections: list[dict[str, Any]]
    reads: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, "metrics": self.metrics, "families": self.families,
                "corrections": self.corrections, "reads": self.reads}


def audit_echo(log: MemoryLog, *, k: int = K, window: int = WINDOW, serve: str | None = None,
               conflicts: Conflicts | None = None) -> EchoResult:
    """Families, corrections and the echo metrics of every read (as logged, and as FPA would serve
    them with `serve="fpa"`; `conflicts` judges which old records conflict with a correction)."""
    if serve not in (None, *SERVING):
        raise ValueError(f"unknown serving rule {serve!r} (known: {', '.join(SERVING)})")
    fam = lineage_families(log.writes)
    by_id = {w.write_id: w for w in log.writes}
    cors = corrections(log, fam)
    point = read_points(log)
    ways = ("logged", "fpa") if serve else ("logged",)
    fpa = served_by_fpa(log, k=k, conflicts=conflicts) if serve else {}

    def served(r: Read, way: str) -> list[str]:
        return list(r.retrieved[:k]) if way == "logged" else [w.write_id for w in fpa[r.read_id]]

    lists = {way: {r.read_id: served(r, way) for r in log.reads} for way in ways}
    reads = [{"read_id": r.read_id, "conversation_id": r.conversation_id, "point": point[r.read_id],
              **{f"{way}": lists[way][r.read_id] for way in ways},
              **{f"excess_{way}": _excess(lists[way][r.read_id], fam, k) for way in ways}} for r in log.reads]
    rows = []
    for c in cors:
        conv_reads = [r for r in log.reads if r.conversation_id == c.write.conversation_id]
        pre = [r for r in conv_reads if point[r.read_id] < c.point]
        post = [r for r in conv_reads if point[r.read_id] >= c.point]
        row: dict[str, Any] = {"write_id": c.write.write_id, "conversation_id": c.write.conversation_id,
                               "point": c.point,
                               "supersedes": list(c.superseded), "old": sorted(c.old), "new": sorted(c.new),
                               "reads_before": len(pre), "reads_after": len(post),
                               "rri_storage": _storage(c, by_id)}
        for way in ways:
            ids = lists[way]
            after = [share(ids[r.read_id], c.old, k) for r in post]
            row[f"density_pre_{way}"] = mean_of([share(ids[r.read_id], c.old, k) for r in pre])
            row[f"density_{way}"] = mean_of(after)
            row[f"rri_{way}"] = mean_of([_rri(ids[r.read_id], c, k) for r in post])
            row[f"wep_{way}"] = mean_of(after[:window])
            row[f"wep_reads_{way}"] = len(post[:window])
        rows.append(row)
    sizes: dict[str, list[str]] = {}
    for w in log.writes:
        sizes.setdefault(fam[w.write_id], []).append(w.write_id)
    fams = sorted(({"family": f, "records": len(ids), "write_ids": ids,
                    "valid": sum(by_id[i].valid is not False for i in ids)} for f, ids in sizes.items()),
                  key=lambda x: (-x["records"], x["family"]))
    metrics: dict[str, float | None] = {
        "writes": float(len(log.writes)), "reads": float(len(log.reads)), "families": float(len(fams)),
        "corrections": float(len(cors)),
        "multiplicity": statistics.fmean(f["records"] for f in fams) if fams else None,
        "max_multiplicity": float(fams[0]["records"]) if fams else None,
        "rri_storage": mean_of([r["rri_storage"] for r in rows]),
    }
    for way in ways:
        sfx = "" if way == "logged" else f".{way}"
        metrics[f"excess{sfx}"] = mean_of([x[f"excess_{way}"] for x in reads])
        for m in ("density_pre", "density", "rri", "wep"):
            metrics[f"{m}{sfx}"] = mean_of([r[f"{m}_{way}"] for r in rows])
    return EchoResult({"k": k, "window": window, "serve": serve, "weights": "1/log2(rank+1)"},
                      {f"echo.{n}": v for n, v in metrics.items()}, fams, rows, reads)


def _storage(c: Correction, by_id: Mapping[str, Write]) -> float | None:
    old = sum(by_id[i].valid is not False for i in c.old)
    new = sum(by_id[i].valid is not False for i in c.new)
    return old / (old + new) if old + new else None
