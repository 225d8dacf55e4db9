"""Family–Provenance–Authority (FPA), the Memory Echo paper's serving rule (§5.1, App. E), over a frozen
candidate pool. Stored history is never changed; FPA only decides what reaches the generator.

1. Family: one serving position per source family (ancestry, not wording); a verified correction and
   its descendants are a family of their own (the new claim), not a member of the family they
   correct. The family's position is its best pool rank among eligible records, and the record
   that takes it is the family's highest-scoring eligible record, where repeated writes and
   retrieval exposures lower a record's score (App. E). The paper states the direction, not the formula; ours:

       score(record) = relevance(rank) / (1 + writes + exposures)

   relevance(rank) = 1/log2(rank + 2) for the record's 0-based rank in the pool (the slot weight
   the echo metrics use); writes = the record's ancestors by `parent_id` (how many times its claim
   was re-written to make it); exposures = the earlier reads whose top k served it. Ties go to the
   better rank.
2. Provenance: a record marked `valid: false` is not eligible; after a verified correction, the
   records of the families it supersedes that *conflict* with it lose eligibility, and only those
   (§5.1: "nonconflicting records may remain eligible context"). Which conflict is a judgment
   (`conflicts`, the answer judge in `answers`); without one, every record of a superseded family
   is taken as conflicting, the provenance-only reading.
3. Authority: verified corrections are served first; the answer is then checked against them
   (`answers`), the raw and the constrained answer both kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..log.records import MemoryLog, Write, lineage_families
from .provenance import Correction, corrections, exposures, in_force, read_points

K = 5  # the five-record budget of the Memory Echo paper

Conflicts = Callable[[Write, Write], bool]  # (record, correction) -> does the record conflict with it?


def relevance(rank: int) -> float:
    return 1 / math.log2(rank + 2)


def depths(writes: Iterable[Write]) -> dict[str, int]:
    """Each write's number of ancestors by `parent_id` (a parent outside the log ends the chain)."""
    parent = {w.write_id: w.parent_id for w in writes}
    out: dict[str, int] = {}
    for wid in parent:
        seen, cur, n = {wid}, parent[wid], 0
        while cur is not None and cur in parent and cur not in seen:
            seen.add(cur)
            n += 1
            cur = parent[cur]
        out[wid] = n
    return out


@dataclass(frozen=True)
class Scored:
    write: Write
    rank: int
    score: float


def scores(pool: Sequence[Write], depth: Mapping[str, int], exposures: Mapping[str, int]) -> list[Scored]:
    return [Scored(w, r, relevance(r) / (1 + depth.get(w.write_id, 0) + exposures.get(w.write_id, 0)))
            for r, w in enumerate(pool)]


def serve_fpa(pool: Sequence[Write], fam: Mapping[str, str], ineligible: set[str] | frozenset[str], *, k: int = K,
          depth: Mapping[str, int] | None = None, exposures: Mapping[str, int] | None = None) -> list[Write]:
    """What FPA serves from a ranked pool: eligible records only (not `valid: false`, not in
    `ineligible`), the families holding a verified correction first, then one record per family at the family's position
    (its best eligible rank), the family's highest-scoring eligible record taking it; at most `k`."""
    scored = [s for s in scores(pool, depth or {}, exposures or {})
              if s.write.valid is not False and s.write.write_id not in ineligible]
    best: dict[str, Scored] = {}
    position: dict[str, int] = {}
    for s in scored:
        f = fam[s.write.write_id]
        position.setdefault(f, s.rank)
        if f not in best or s.score > best[f].score:
            best[f] = s
    authority = {fam[s.write.write_id] for s in scored if s.write.verified_correction}
    order = sorted(best, key=lambda f: (f not in authority, position[f]))
    return [best[f].write for f in order[:k]]


def conflicting(old: Iterable[Write], correction: Write, conflicts: Conflicts | None) -> frozenset[str]:
    """The old records (of the families a correction supersedes) that lose eligibility after it."""
    return frozenset(w.write_id for w in old if conflicts is None or conflicts(w, correction))


def serving_families(fam: Mapping[str, str], cors: Iterable[Correction]) -> dict[str, str]:
    """Lineage families, with each verified correction's new records (it and its descendants) a family
    of their own: the correction competes with the claim it corrects, it does not share its slot."""
    out = dict(fam)
    for c in cors:
        for i in c.new:
            out[i] = f"correction:{c.write.write_id}"
    return out


def served_by_fpa(log: MemoryLog, *, k: int = K, conflicts: Conflicts | None = None) -> dict[str, list[Write]]:
    """read id -> what FPA serves from the read's logged pool, with every correction in force at the
    read, the records' write depths and their exposures before it."""
    fam = lineage_families(log.writes)
    by_id = {w.write_id: w for w in log.writes}
    cors = corrections(log, fam)
    fam = serving_families(fam, cors)
    lost = {c.write.write_id: conflicting((by_id[i] for i in sorted(c.old)), c.write, conflicts) for c in cors}
    depth, seen, point = depths(log.writes), exposures(log, k), read_points(log)
    out = {}
    for r in log.reads:
        ineligible = frozenset().union(*(lost[c.write.write_id] for c in in_force(cors, r, point[r.read_id])))
        out[r.read_id] = serve_fpa([by_id[i] for i in r.retrieved], fam, ineligible, k=k, depth=depth,
                                   exposures=seen[r.read_id])
    return out
