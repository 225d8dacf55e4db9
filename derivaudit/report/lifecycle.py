"""The lifecycle part of a report, from a run's lifecycle.jsonl (no model, no scan pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from ..rates.stats import rates

OPERATION_NOUNS = {"delete": "deletion", "invalidate": "invalidation", "update": "update"}
OPERATION_LABELS = ("justified", "unjustified", "ambiguous")
METRICS = {f"{lab}_{noun}": (pl.col("label") == lab, (pl.col("kind") == kind) & ~pl.col("outside_conversation"))
           for kind, noun in OPERATION_NOUNS.items() for lab in OPERATION_LABELS}
HELP = {
    **{f"lifecycle.{lab}_{noun}": f"share of {noun}s judged {lab} (conversation-balanced; `.weighted` beside it; "
       "origin api/ui left out)" for noun in OPERATION_NOUNS.values() for lab in OPERATION_LABELS},
    "lifecycle.operations": "deletions, invalidations and updates judged",
    "lifecycle.gold.accuracy": "operation-label accuracy against meta.gold",
    "lifecycle.gold.unjustified_recall": "share of gold-unjustified operations the audit calls unjustified",
    "lifecycle.gold.ambiguous_share": "share of gold-labelled operations the audit calls ambiguous",
}
LISTED = ("case_id", "kind", "conversation_id", "target", "target_text", "new_text", "why", "origin",
          "deciding_turns")


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Rates per operation kind over the operations the conversation answered for (conversation-
    balanced, corrected by operations' meta.gold with an interval where they carry it, write-weighted
    beside it); operations the store marks as made outside the conversation (origin api/ui) are
    counted apart; every unjustified operation listed with its target and why; gold accuracy where
    operations carry meta.gold."""
    if not rows:
        return None
    flat = [{k: r[k] for k in ("conversation_id", "kind", "label", "outside_conversation")} for r in rows]
    rs = rates(flat, METRICS)
    corrected = _corrected(rows)
    for k, v in rs.items():
        # every operation of the log was judged: the judge's rate has no sampling error; its error is
        # corrected (with an interval) where operations carry meta.gold
        c = corrected.get(k)
        v["balanced_ci"] = [c["low"], c["high"]] if c else [None, None]
        v["corrected"] = c
    out: dict[str, Any] = {
        "operations": len(rows),
        "by_kind": {k: sum(r["kind"] == k for r in rows) for k in OPERATION_NOUNS},
        "outside_conversation": sum(bool(r["outside_conversation"]) for r in rows),
        "unknown_origin": sum(r.get("origin") in (None, "unknown") for r in rows),
        "rates": rs,
        "unjustified": [{k: r.get(k) for k in LISTED} for r in rows if r["label"] == "unjustified"],
    }
    graded = [r for r in rows if r.get("gold") in OPERATION_LABELS]
    if graded:
        unj = [r for r in graded if r["gold"] == "unjustified"]
        out["gold"] = {
            "n": len(graded), "accuracy": sum(r["label"] == r["gold"] for r in graded) / len(graded),
            "unjustified_recall": sum(r["label"] == "unjustified" for r in unj) / len(unj) if unj else None,
            "ambiguous_share": sum(r["label"] == "ambiguous" for r in graded) / len(graded),
            "confusion": {g: {p: sum(r["gold"] == g and r["label"] == p for r in graded) for p in OPERATION_LABELS}
                          for g in OPERATION_LABELS},
        }
    return out


def _corrected(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rate with operations of its kind carrying meta.gold: the judge's rate corrected by them
    (estimate.py; the gold operations taken as a simple random sample of the judged ones)."""
    import numpy as np

    from ..rates.estimate import balanced_design, estimate

    out: dict[str, dict[str, Any]] = {}
    if not any(r.get("gold") in OPERATION_LABELS for r in rows):
        return out
    for kind, noun in OPERATION_NOUNS.items():
        sub = [r for r in rows if r["kind"] == kind and not r["outside_conversation"]]
        if not sub or not any(r.get("gold") in OPERATION_LABELS for r in sub):
            continue
        design = balanced_design([r["conversation_id"] for r in sub], [r.get("gold") in OPERATION_LABELS for r in sub])
        ones = np.ones(len(sub))
        for lab_name in OPERATION_LABELS:
            f = np.array([r["label"] == lab_name for r in sub], dtype=float)
            y = np.array([r.get("gold") == lab_name for r in sub], dtype=float)
            out[f"{lab_name}_{noun}"] = estimate(f, ones, y, ones, design).to_dict()
    return out


def flat(doc: dict[str, Any] | None) -> dict[str, float | None]:
    """`--fail-if` names: lifecycle.<label>_<kind> (balanced), .weighted, lifecycle.gold.accuracy..."""
    if not doc:
        return {}
    m: dict[str, float | None] = {}
    for k, v in doc["rates"].items():
        m[f"lifecycle.{k}"] = v["balanced"]
        m[f"lifecycle.{k}.weighted"] = v["weighted"]
        c = v.get("corrected") or {}
        m[f"lifecycle.{k}.corrected"] = c.get("corrected")
        m[f"lifecycle.{k}.lower"] = c.get("low")
        m[f"lifecycle.{k}.upper"] = c.get("high")
    m["lifecycle.operations"] = float(doc["operations"])
    for k in ("accuracy", "unjustified_recall", "ambiguous_share"):
        if doc.get("gold"):
            m[f"lifecycle.gold.{k}"] = doc["gold"][k]
    return m


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


RATE_COLUMNS = ["metric", "judge (balanced)", "corrected", "95% CI", "labels", "weighted", "n"]


def rate_rows(doc: dict[str, Any]) -> list[list[str]]:
    """RATE_COLUMNS for the kinds the run has: the judge's rate, the rate corrected by operations'
    meta.gold with its interval and the labels used (– without), the write-weighted rate, n."""
    out = []
    for k, v in doc["rates"].items():
        if v["n_writes"]:
            lo, hi = v.get("balanced_ci") or (None, None)
            c = v.get("corrected") or {}
            out.append([k, _pct(v["balanced"]), _pct(c.get("corrected")),
                        "–" if lo is None else f"{lo:.1%}–{hi:.1%}", str(c.get("labels", "–")), _pct(v["weighted"]),
                        str(v["n_writes"])])
    return out


def unjustified_rows(doc: dict[str, Any]) -> list[list[str]]:
    """operation, kind, target text, why, deciding turns (raw text: each renderer escapes it)."""
    return [[u["case_id"], u["kind"], " ".join(str(u["target_text"]).split()), u["why"],
             ", ".join(u.get("deciding_turns") or [])] for u in doc.get("unjustified") or []]
