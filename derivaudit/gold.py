"""Label accuracy against reference categories (`meta.gold` on a write): the number that says
whether an audit's labels can be believed.

A run's write gets one category from its two view labels: supported after expansion is
citation-supported when the citation-only label is supported too, else provenance-repaired;
unsupported or contradicted after expansion is that; anything else (ambiguous, or unlabeled) is
ambiguous. Accuracy is over the writes whose gold is one of the four categories; a predicted
"ambiguous" counts as wrong, and its share is reported beside accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .stats import cohen_kappa

CATEGORIES = ("citation-supported", "provenance-repaired", "unsupported", "contradicted")
GOLD_VALUES = (*CATEGORIES, "ambiguous")
PREDICTED = (*CATEGORIES, "ambiguous")


def category(citation_label: str | None, expanded_label: str | None) -> str:
    """One category for a write from its citation-only and expanded-view memory labels."""
    if expanded_label == "supported":
        return "citation-supported" if citation_label == "supported" else "provenance-repaired"
    if expanded_label in ("unsupported", "contradicted"):
        return expanded_label
    return "ambiguous"


def metric_name(cat: str) -> str:
    """`gold.recall.<name>`: gate names take no hyphens."""
    return cat.replace("-", "_")


def gold_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Accuracy, per-category recall, confusion matrix (gold x predicted), ambiguous share, Cohen's
    kappa and the majority-class baseline over rows carrying `gold` and `category`; None when no row
    has a gold category."""
    scored = [r for r in rows if r.get("gold") in CATEGORIES]
    if not scored:
        return None
    gold = [r["gold"] for r in scored]
    pred = [r.get("category") or "ambiguous" for r in scored]
    matrix = {g: {p: 0 for p in PREDICTED} for g in CATEGORIES}
    for g, p in zip(gold, pred, strict=True):
        matrix[g][p] += 1
    support = {g: gold.count(g) for g in CATEGORIES}
    recall = {g: (matrix[g][g] / support[g] if support[g] else None) for g in CATEGORIES}
    majority = max(CATEGORIES, key=lambda g: (support[g], -CATEGORIES.index(g)))
    correct = sum(g == p for g, p in zip(gold, pred, strict=True))
    return {
        "n": len(scored),
        "accuracy": correct / len(scored),
        "correct": correct,
        "ambiguous": pred.count("ambiguous") / len(scored),
        "kappa": cohen_kappa(gold, pred),
        "recall": recall,
        "support": support,
        "confusion": matrix,
        "baseline": {"category": majority, "accuracy": support[majority] / len(scored)},
        "gold_ambiguous": sum(r.get("gold") == "ambiguous" for r in rows),
        "errors": [{"write_id": r["write_id"], "gold": g, "predicted": p}
                   for r, g, p in zip(scored, gold, pred, strict=True) if g != p],
    }


def flat(g: dict[str, Any] | None) -> dict[str, float | None]:
    """The gate names: gold.accuracy, gold.ambiguous, gold.kappa, gold.baseline, gold.recall.<cat>."""
    out: dict[str, float | None] = {"gold.accuracy": None, "gold.ambiguous": None, "gold.kappa": None,
                                    "gold.baseline": None}
    out.update({f"gold.recall.{metric_name(c)}": None for c in CATEGORIES})
    if g:
        out.update({"gold.accuracy": g["accuracy"], "gold.ambiguous": g["ambiguous"], "gold.kappa": g["kappa"],
                    "gold.baseline": g["baseline"]["accuracy"]})
        out.update({f"gold.recall.{metric_name(c)}": g["recall"][c] for c in CATEGORIES})
    return out


HELP = {
    "gold.accuracy": "share of writes with a gold category whose audited category matches it",
    "gold.ambiguous": "share of writes with a gold category that the audit left ambiguous",
    "gold.kappa": "Cohen's kappa between audited and gold categories",
    "gold.baseline": "accuracy of always answering the most frequent gold category",
    **{f"gold.recall.{metric_name(c)}": f"share of gold {c} writes audited as {c}" for c in CATEGORIES},
}
