"""Label accuracy against reference categories (`meta.gold` on a write): the number that says
whether an audit's labels can be believed.

A run's write gets one category from its two view labels: supported after expansion is
citation-supported when the citation-only label is supported too, provenance-repaired when it is
unsupported (insufficient), ambiguous when it is contradicted or ambiguous;
unsupported or contradicted after expansion is that; anything else (ambiguous, or unlabeled) is
ambiguous. Accuracy is over the writes whose gold is one of the four categories; a predicted
"ambiguous" counts as wrong, and its share is reported beside accuracy.

The error users pay for most is a false admit: a write whose gold is unsupported or contradicted
that the audit calls supported in either view (citation-only or expanded). Its share of those
writes is `false_supported`, with a one-sided 95% upper bound (Wilson), because on a small gold set
0 of 10 is not 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rates.stats import cohen_kappa, wilson_upper

CATEGORIES = ("citation-supported", "provenance-repaired", "unsupported", "contradicted")
NEGATIVE = ("unsupported", "contradicted")
GOLD_VALUES = (*CATEGORIES, "ambiguous")
PREDICTED = (*CATEGORIES, "ambiguous")


def provenance_repaired(citation_label: str | None, expanded_label: str | None) -> bool:
    """The one definition (DerivAudit §3.1: "insufficiently supported by its citations but
    supported after history expansion"): citation-only label unsupported (insufficient), expanded
    supported. A write whose citations are contradicted or ambiguous but whose expanded view is
    supported is not that; the scope table counts it apart (`provenance_repaired_other`).
    `category`, the write flag and the scope metrics all use it."""
    return expanded_label == "supported" and citation_label == "unsupported"


def category(citation_label: str | None, expanded_label: str | None) -> str:
    """One category for a write from its citation-only and expanded-view memory labels (supported
    after expansion over contradicted or ambiguous citations fits none of the four: ambiguous)."""
    if expanded_label == "supported":
        if citation_label == "supported":
            return "citation-supported"
        return "provenance-repaired" if provenance_repaired(citation_label, expanded_label) else "ambiguous"
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
    neg = [r for r in scored if r["gold"] in NEGATIVE]
    admitted = [r["write_id"] for r in neg if "supported" in (r.get("citation_label"), r.get("expanded_label"))]
    per_conv: dict[str, dict[str, Any]] = {}
    for r, g, p in zip(scored, gold, pred, strict=True):
        c = per_conv.setdefault(str(r.get("conversation_id")), {"n": 0, "correct": 0})
        c["n"] += 1
        c["correct"] += g == p
    for c in per_conv.values():
        c["accuracy"] = c["correct"] / c["n"]
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
        "false_supported": {"n": len(neg), "count": len(admitted),
                            "share": len(admitted) / len(neg) if neg else None,
                            "upper95": wilson_upper(len(admitted), len(neg)), "write_ids": admitted},
        "per_conversation": dict(sorted(per_conv.items())),
        "gold_ambiguous": sum(r.get("gold") == "ambiguous" for r in rows),
        "errors": [{"write_id": r["write_id"], "gold": g, "predicted": p}
                   for r, g, p in zip(scored, gold, pred, strict=True) if g != p],
    }


def flat(g: dict[str, Any] | None) -> dict[str, float | None]:
    """The gate names: gold.accuracy, gold.ambiguous, gold.kappa, gold.baseline, gold.recall.<cat>."""
    out: dict[str, float | None] = {"gold.accuracy": None, "gold.ambiguous": None, "gold.kappa": None,
                                    "gold.baseline": None, "gold.false_supported": None,
                                    "gold.false_supported_upper": None}
    out.update({f"gold.recall.{metric_name(c)}": None for c in CATEGORIES})
    if g:
        out.update({"gold.accuracy": g["accuracy"], "gold.ambiguous": g["ambiguous"], "gold.kappa": g["kappa"],
                    "gold.baseline": g["baseline"]["accuracy"],
                    "gold.false_supported": g["false_supported"]["share"],
                    "gold.false_supported_upper": g["false_supported"]["upper95"]})
        out.update({f"gold.recall.{metric_name(c)}": g["recall"][c] for c in CATEGORIES})
    return out


HELP = {
    "gold.accuracy": "share of writes with a gold category whose audited category matches it",
    "gold.ambiguous": "share of writes with a gold category that the audit left ambiguous",
    "gold.kappa": "Cohen's kappa between audited and gold categories",
    "gold.baseline": "accuracy of always answering the most frequent gold category",
    "gold.false_supported": "share of gold unsupported or contradicted writes the audit calls supported in "
                            "either view (a false admit)",
    "gold.false_supported_upper": "one-sided 95% upper bound (Wilson) on gold.false_supported",
    **{f"gold.recall.{metric_name(c)}": f"share of gold {c} writes audited as {c}" for c in CATEGORIES},
}
