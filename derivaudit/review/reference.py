"""Reference labels for the corrected rates: a budgeted, blinded sample of whole writes for human
review, and the reviewers' categories back into the run.

    RUN/review_writes_sample.json  the design: strata, their sizes and draws (so each labelled write's
                                   chance of being drawn is known), which write each review id is, the
                                   run's labels checksum when drawn
    RUN/review_writes.jsonl        the imported categories, one row per reviewed write

Where the labels go. The judge's error is what a label measures, and it is larger where the judge is
unsure: the writes are stratified by the judge's category and by confidence (below or above 0.5),
and the budget is spread over the strata in proportion to size x the error's anticipated standard
deviation (Neyman allocation; 0.5 in low-confidence strata and for ambiguous labels, 0.35 elsewhere,
an assumption, not a measurement), at least two per stratum so each has a variance. A budget too
small for that merges the confidence bands, then the categories. Every draw is simple random
within its stratum and seeded, so the estimate stays unbiased whatever the allocation.
"""

from __future__ import annotations

import csv
import hashlib
import random
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from ..audit.gold import CATEGORIES
from ..rates.sampling import allocate
from ..rates.trust import category_of, write_confidence
from ..runs import folder as runs
from .obligations import ReviewError, raise_problems, read_sheet, sheet_passages, write_sheet

SAMPLE = "review_writes_sample.json"
REVIEWS = "review_writes.jsonl"
COLUMNS = ("review_id", "memory", "cited_passages", "earlier_history", "category", "reviewer_notes")
LOW = 0.5  # confidence below this is the low band
ANTICIPATED_SD = {"low": 0.5, "high": 0.35}


def labels_sha(run: Path) -> str:
    return hashlib.sha256(runs.path(run, runs.LABELS).read_bytes()).hexdigest()


def _strata(rows: list[dict[str, Any]], conf: dict[str, float | None], budget: int) -> tuple[dict[str, str], str]:
    """write id -> stratum, and how the strata were formed."""
    def band(w: str) -> str:
        c = conf.get(w)
        return "low" if c is None or c < LOW else "high"

    levels = [("category x confidence", lambda r: f"{category_of(r)}/{band(r['write_id'])}"),
              ("category", category_of), ("one stratum", lambda r: "all")]
    for how, key in levels:
        of = {r["write_id"]: key(r) for r in rows}
        if sum(min(2, s) for s in Counter(of.values()).values()) <= budget:
            return of, how
    return {r["write_id"]: "all" for r in rows}, "one stratum"


def neyman(sizes: dict[str, int], budget: int) -> dict[str, int]:
    """Draws per stratum: at least two (or the whole stratum), the rest in proportion to size x the
    anticipated standard deviation of the judge's error."""
    def sd(h: str) -> float:
        cat, _, band = h.partition("/")
        return ANTICIPATED_SD["low"] if band == "low" or cat == "ambiguous" else ANTICIPATED_SD["high"]

    return allocate(sizes, budget, minimum=2, weight={h: s * sd(h) for h, s in sizes.items()})


def sample(run: str | Path, output: str | Path, *, budget: int, seed: int = 0, bom: bool = True) -> dict[str, Any]:
    """Draw `budget` writes for review (see the module doc) and write the blinded sheet: memory,
    cited passages, earlier history (the expanded view), an empty category column."""
    run = Path(run)
    runs.require(run, (runs.LABELS, runs.VIEWS, runs.META, runs.PRIMITIVES),
                 f"run `derivaudit scan ... -o {run}` first")
    rows = [r for r in runs.read_rows(run, runs.LABELS) if r["citation_label"] and r["expanded_label"]]
    if not rows:
        raise ReviewError(f"{run}: no labelled write to review")
    budget = min(budget, len(rows))
    meta = runs.load_meta(run)
    conf = write_confidence(rows, runs.read_rows(run, runs.PRIMITIVES), meta.get("calibration") or {})
    of, how = _strata(rows, conf, budget)
    sizes = dict(Counter(of.values()))
    draws = neyman(sizes, budget)
    chosen: list[str] = []
    for h in sorted(sizes):
        pool = [r["write_id"] for r in rows if of[r["write_id"]] == h]
        chosen += random.Random(f"{seed}|{h}").sample(pool, draws[h])
    random.Random(f"{seed}|order").shuffle(chosen)
    sha = labels_sha(run)
    sample_id = hashlib.sha256(f"{sha}|{seed}|{budget}".encode()).hexdigest()[:6]
    views = {v["write_id"]: v for v in runs.read_rows(run, runs.VIEWS)}
    text = {r["write_id"]: r["text"] for r in rows}
    key, sheet = [], []
    for n, w in enumerate(chosen, start=1):
        rid = f"{sample_id}-{n:04d}"
        sheet.append({"review_id": rid, "memory": text[w], "cited_passages": sheet_passages(views[w]["citation_only"]),
                      "earlier_history": sheet_passages(views[w]["expanded"]), "category": "", "reviewer_notes": ""})
        key.append({"review_id": rid, "write_id": w, "stratum": of[w]})
    strata = {h: {"size": sizes[h], "drawn": draws[h], "inclusion": draws[h] / sizes[h]} for h in sorted(sizes)}
    why = (f"derivaudit review sheet {sample_id}: {len(chosen)} of {len(rows)} writes, seed {seed}. Strata: {how} "
           f"(the judge's category; confidence below {LOW} is 'low'); draws per stratum in proportion to size x the "
           f"anticipated spread of the judge's error, at least 2 each, so the labels narrow the corrected intervals "
           f"most: " + "; ".join(f"{h} {d['drawn']} of {d['size']}" for h, d in strata.items())
           + ". Fill the category column with one of: " + ", ".join(CATEGORIES)
           + " (leave a row blank to skip it), then run `derivaudit review import`.")
    write_sheet(output, COLUMNS, sheet, bom=bom, notes=textwrap.wrap(why, 100))
    doc = {"sample_id": sample_id, "budget": budget, "seed": seed, "file": str(output), "how": how, "why": why,
           "design": f"stratified ({how}), simple random within each stratum, inclusion probabilities recorded",
           "labels_sha": sha, "strata": strata, "strata_of": of, "rows": key}
    runs.write_json(run, SAMPLE, doc)
    return doc


def read(run: str | Path, path: str | Path) -> list[dict[str, Any]]:
    """Validate a filled write-level sheet against the run's sample; every problem collected and
    raised together (file, line, column). Blank rows are not reviewed."""
    run, path = Path(run), Path(path)
    if not runs.exists(run, SAMPLE):
        raise ReviewError(f"{runs.path(run, SAMPLE)} is missing: run `derivaudit review sample {run} --budget N "
                          "-o review.csv` first")
    doc = runs.read_json(run, SAMPLE)
    if labels_sha(run) != doc.get("labels_sha"):
        raise ReviewError(f"{runs.path(run, runs.LABELS)} changed since sheet {doc.get('sample_id')} was drawn "
                          f"(the run was scanned again): its writes' labels are not the ones sampled; draw a new "
                          f"sheet with `derivaudit review sample {run} --budget {doc.get('budget')} -o review.csv`")
    key = {r["review_id"]: r for r in doc["rows"]}

    def foreign(rid: str) -> str | None:
        other = rid.split("-", 1)[0]
        if "-" in rid and other != doc["sample_id"]:
            return f"belongs to another review sheet ({other}), not to this run's sheet {doc['sample_id']}"
        return None

    filled, problems = read_sheet(path, key, ("review_id", "category"), foreign)
    out: list[dict[str, Any]] = []
    for where, row in filled:
        cat = row["category"].strip().lower()
        if not cat:
            continue  # not reviewed
        if cat not in CATEGORIES:
            problems.append(f"{where}: column category: {cat!r} is not one of {', '.join(CATEGORIES)}")
            continue
        out.append({**key[row["review_id"].strip()], "category": cat})
    raise_problems(problems)
    if not out:
        raise ReviewError(f"{path}: no row has a category (fill the category column)")
    return out


def import_reviews(run: str | Path, path: str | Path) -> dict[str, Any]:
    """Validate and store the reviewers' categories (all or nothing); returns counts per stratum."""
    rows = read(run, path)
    runs.write_rows(run, REVIEWS, rows)
    per: dict[str, int] = {}
    for r in rows:
        per[r["stratum"]] = per.get(r["stratum"], 0) + 1
    return {"imported": len(rows), "by_stratum": dict(sorted(per.items())),
            "file": str(runs.path(run, REVIEWS))}


def is_write_sheet(path: str | Path) -> bool:
    """Whether a sheet is a write-level one (a category column) rather than an obligation review."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            for raw in fh:
                if raw.startswith("#"):
                    return True
                return "category" in [h.strip() for h in next(csv.reader([raw]))]
    except (OSError, UnicodeDecodeError, StopIteration):
        return False
    return False
