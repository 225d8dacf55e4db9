"""How far a run's numbers can be trusted: the scope rates corrected by reference labels
(`estimate`), each write's confidence, and accuracy at coverage.

Reference labels, in this order: a write-level human review imported into the run
(`review sample --budget N` then `review import`: RUN/review_writes.jsonl, drawn by a recorded
stratified design), else `meta.gold` on the log's writes (taken as a simple random sample of the
audited writes). A reference label is one of the four categories (gold may also say ambiguous).

Confidence. Each primitive answer that decides a label sits at some log-odds from its
annotator's threshold; its confidence is read on the calibration items of that annotator and
primitive (never on gold): for a yes, the share of the calibration items answered no that score
below it; for a no, the share of those answered yes that score above it. The score read is the
lower of the view's and its checked subset's. An obligation's confidence is the lower of its E and
R answers' (D is read at argmax and has no scale; an answer set by a rule, arithmetic or a
refutation carried from another view, counts as certain; an obligation sent to the adjudicator is
read on the adjudicator's scale). A memory label is as confident as its weakest needed obligation
(supported: all of them; otherwise the strongest obligation that carries the label); a write's
category as the lower of the views it reads (citation-only and expanded for the two supported
categories, expanded for the others); an ambiguous label has confidence 0.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..audit.gold import CATEGORIES, category, provenance_repaired
from ..audit.labels import answers
from ..runs import folder as runs
from .estimate import Estimate, Sample, balanced_design, estimate, labels_to_halve

REFERENCE_VALUES = (*CATEGORIES, "ambiguous")

# metric -> (judge numerator, judge denominator, reference numerator, reference denominator); judge
# functions read a labels.jsonl row, reference functions a category
CORRECTED: dict[str, tuple[Any, Any, Any, Any]] = {
    "citation_supported": (lambda r: r["citation_label"] == "supported", lambda r: True,
                           lambda c: c == "citation-supported", lambda c: True),
    "expanded_supported": (lambda r: r["expanded_label"] == "supported", lambda r: True,
                           lambda c: c in ("citation-supported", "provenance-repaired"), lambda c: True),
    "provenance_repaired": (lambda r: provenance_repaired(r["citation_label"], r["expanded_label"]),
                            lambda r: r["citation_label"] == "unsupported",
                            lambda c: c == "provenance-repaired", lambda c: c != "citation-supported"),
    "unsupported": (lambda r: r["expanded_label"] == "unsupported" and not r["search_limited"], lambda r: True,
                    lambda c: c == "unsupported", lambda c: True),
    "contradicted": (lambda r: r["expanded_label"] == "contradicted", lambda r: True,
                     lambda c: c == "contradicted", lambda c: True),
}
COVERAGE = (0.25, 0.5, 0.75, 1.0)


def category_of(row: Mapping[str, Any]) -> str:
    """A labels.jsonl row's category (runs scanned before the field existed: from its two labels)."""
    return row.get("category") or category(row.get("citation_label"), row.get("expanded_label"))


# ---------------------------------------------------------------- reference labels


def reference_labels(run: str | Path, labels: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The reference labels a report uses: {"who": human | gold | None, "file", "labels":
    {write_id: category}, "strata": {write_id: stratum} (every audited write) or None}."""
    run = Path(run)
    from ..review.reference import REVIEWS, SAMPLE

    human = runs.read_rows_if(run, REVIEWS)
    if human:
        from ..review.reference import labels_sha

        doc = runs.read_json(run, SAMPLE)
        strata = dict(doc.get("strata_of") or {})
        design = doc.get("design")
        if labels_sha(run) != doc.get("labels_sha"):
            # the reviewers' categories still hold (they judge the write, not the judge), but the strata
            # were drawn over the earlier labels: writes outside them are corrected by no label
            new = sum(r["write_id"] not in strata for r in labels)
            design = (f"{design}; the run was scanned again since sheet {doc.get('sample_id')} was drawn"
                      + (f": {new} audited write(s) are in none of its strata and no label corrects them" if new
                         else "") + " (draw a new sheet with `derivaudit review sample --budget`)")
        return {"who": "human", "file": str(runs.path(run, REVIEWS)), "source": doc.get("file"),
                "labels": {h["write_id"]: h["category"] for h in human},
                "strata": {r["write_id"]: strata.get(r["write_id"], "not drawn") for r in labels}, "design": design}
    gold = {r["write_id"]: r["gold"] for r in labels if r.get("gold") in REFERENCE_VALUES}
    if gold:
        return {"who": "gold", "file": "meta.gold in the log", "source": None, "labels": gold, "strata": None,
                "design": "the writes with meta.gold, taken as a simple random sample of the audited writes"}
    return {"who": None, "file": None, "source": None, "labels": {}, "strata": None, "design": None}


# ---------------------------------------------------------------- corrected rates


def store_sample(meta: Mapping[str, Any], rows: Sequence[dict[str, Any]],
                 labelled: Mapping[str, str] | None = None, strata: Mapping[str, str] | None = None) -> Sample:
    """The conversation-balanced design of a run's audited writes (`rows`: labels.jsonl rows with
    both view labels): the store's conversation sizes from `scan --sample` (else the audited writes
    are the store)."""
    drawn = (meta.get("selection") or {}).get("sample")
    return balanced_design([r["conversation_id"] for r in rows], [r["write_id"] in (labelled or {}) for r in rows],
                           [(strata or {}).get(r["write_id"], "all") for r in rows],
                           store=(drawn or {}).get("store_conversations"), sampled=bool(drawn))


def judge_indicators(rows: Sequence[dict[str, Any]], name: str) -> tuple[np.ndarray, np.ndarray]:
    """The judge's numerator and denominator indicators of a corrected rate, per labels.jsonl row."""
    fn, fd, _, _ = CORRECTED[name]
    return (np.array([bool(fn(r)) for r in rows], dtype=float), np.array([bool(fd(r)) for r in rows], dtype=float))


def reference_indicators(categories: Sequence[str | None], name: str) -> tuple[np.ndarray, np.ndarray]:
    """The same from reference categories (0 where a write has none)."""
    _, _, yn, yd = CORRECTED[name]
    return (np.array([bool(yn(c)) if c else 0 for c in categories], dtype=float),
            np.array([bool(yd(c)) if c else 0 for c in categories], dtype=float))


def judge_sampling(meta: Mapping[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per corrected rate of a `scan --sample` run: the judge's own rate over the store, estimated
    from the sample, with its sampling interval ({} for a scan of every write: nothing to estimate)."""
    if not (meta.get("selection") or {}).get("sample"):
        return {}
    design = store_sample(meta, rows)
    out = {}
    for name in CORRECTED:
        f_num, f_den = judge_indicators(rows, name)
        out[name] = estimate(f_num, f_den, f_num, f_den, design).to_dict()
    return out


def corrected(meta: Mapping[str, Any], rows: Sequence[dict[str, Any]], ref: Mapping[str, Any]
              ) -> dict[str, dict[str, Any]]:
    """Per metric: the judge's rate, the corrected estimate, its 95% interval, the labels used,
    and about how many labels in all would halve the interval."""
    labelled = {w: c for w, c in ref["labels"].items() if c in REFERENCE_VALUES}
    sample = store_sample(meta, rows, labelled, ref.get("strata"))
    cats = [labelled.get(r["write_id"]) for r in rows]
    out = {}
    for name in CORRECTED:
        f_num, f_den = judge_indicators(rows, name)
        y_num, y_den = reference_indicators(cats, name)
        est: Estimate = estimate(f_num, f_den, y_num, y_den, sample, lam=None)
        d = est.to_dict()
        d["labels_to_halve"] = labels_to_halve(est.labels, len(rows)) if est.width else None
        out[name] = d
    return out


# ---------------------------------------------------------------- confidence


def _scale(calibration: Mapping[str, Any], role: str, which: str) -> tuple[list[float], list[float]] | None:
    sc = ((calibration.get(role) or {}).get("scale") or {}).get(which)
    if not sc:
        return None
    return sorted(sc.get("pos") or []), sorted(sc.get("neg") or [])


def answer_confidence(score: float | None, yes: bool, scale: tuple[list[float], list[float]] | None) -> float | None:
    """A yes: the share of the calibration items answered no that score below `score`; a no: the
    share of those answered yes that score above it. None without a scale or a score."""
    if score is None or scale is None:
        return None
    pos, neg = scale
    if yes:
        return bisect.bisect_left(neg, score) / len(neg) if neg else None
    return (len(pos) - bisect.bisect_right(pos, score)) / len(pos) if pos else None


def _deciding_score(scores: Mapping[str, Any], which: str, yes: bool) -> float | None:
    """The score that decided an answer: a yes had to clear on the whole view and on its named
    subset (the lower of the two); a no is the subset's score where the subset check refused it,
    else the view's."""
    whole, subset = scores.get(which), scores.get(f"{which}_subset")
    if subset is None or whole is None:
        return whole
    return min(whole, subset)


def obligation_confidence(row: Mapping[str, Any], calibration: Mapping[str, Any]) -> float | None:
    """The lower of the E and R answers' confidences of a primitive row (see the module doc)."""
    if row["label"] == "ambiguous":
        return 0.0
    who = "adjudicator" if row.get("adjudicator") else "A"
    prim = row.get("adjudicator") or row["A"]
    final = answers(row)
    ruled = set()
    if row.get("settled"):
        ruled = {k for k in ("e", "r") if final.get(k) != prim.get(k)}
    vals = []
    for k in ("e", "r"):
        if k in ruled:
            vals.append(1.0)
            continue
        c = answer_confidence(_deciding_score(prim.get("scores") or {}, k, bool(final.get(k))), bool(final.get(k)),
                              _scale(calibration, who, k))
        if c is not None:
            vals.append(c)
    return min(vals) if vals else None


def _memory_confidence(label: str | None, obligations: Sequence[tuple[str, float | None]]) -> float | None:
    if label is None:
        return None
    if label == "ambiguous":
        return 0.0
    confs = [c for lab, c in obligations if c is not None]
    if not confs:
        return None
    if label == "supported":
        return min(confs)
    want = "insufficient" if label == "unsupported" else label
    carrying = [c for lab, c in obligations if lab == want and c is not None]
    return max(carrying) if carrying else None


def write_confidence(labels: Sequence[dict[str, Any]], prims: Sequence[dict[str, Any]],
                     calibration: Mapping[str, Any]) -> dict[str, float | None]:
    """write id -> the confidence of its category (see the module doc); None where the run has no
    calibration scale (uncalibrated, or scanned by an older derivaudit)."""
    per: dict[tuple[str, str], list[tuple[str, float | None]]] = {}
    for p in prims:
        per.setdefault((p["write_id"], p["view"]), []).append((p["label"], obligation_confidence(p, calibration)))
    out: dict[str, float | None] = {}
    for r in labels:
        exp = _memory_confidence(r.get("expanded_label"), per.get((r["write_id"], "expanded"), []))
        if r.get("expanded_label") == "supported":
            cit = _memory_confidence(r.get("citation_label"), per.get((r["write_id"], "citation_only"), []))
            both = [c for c in (exp, cit) if c is not None]
            out[r["write_id"]] = min(both) if both and len(both) == 2 else None
        else:
            out[r["write_id"]] = exp
    return out


def accuracy_at_coverage(rows: Sequence[dict[str, Any]], confidence: Mapping[str, float | None],
                         ref: Mapping[str, str]) -> dict[str, Any] | None:
    """Accuracy of the most confident 25/50/75/100% of the writes with a reference label (ties
    broken by write order), and of the top half against the bottom half. None without labels or
    confidences."""
    graded = [(confidence.get(r["write_id"]), category_of(r) == ref[r["write_id"]])
              for r in rows if ref.get(r["write_id"]) in REFERENCE_VALUES]
    graded = [(c, ok) for c, ok in graded if c is not None]
    if not graded:
        return None
    order = sorted(range(len(graded)), key=lambda i: (-graded[i][0], i))
    ranked = [graded[i] for i in order]
    table = []
    for cov in COVERAGE:
        k = max(1, round(cov * len(ranked)))
        top = ranked[:k]
        table.append({"coverage": cov, "writes": k, "accuracy": sum(ok for _, ok in top) / k,
                      "min_confidence": top[-1][0]})
    half = len(ranked) // 2
    top, bottom = ranked[:half], ranked[half:]
    return {"n": len(ranked), "table": table,
            "top_half": sum(ok for _, ok in top) / len(top) if top else None,
            "bottom_half": sum(ok for _, ok in bottom) / len(bottom) if bottom else None}
