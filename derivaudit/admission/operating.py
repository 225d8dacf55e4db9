"""Operating points of a verifier: argmax (admit at log-odds > 0), or crossfit (per held-out
conversation, the lowest threshold whose conversation-balanced false-positive rate on the other
conversations is at most TARGET_FPR), and `auto`, which picks argmax for near-binary verifiers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

TARGET_FPR = 0.10  # DerivAudit App. F: thresholds at FPR <= 0.10 (calibration and replay alike)
NEAR_BINARY_LOGODDS = math.log(99)  # |log-odds| >= 4.6 means p >= 0.99 for one word
NEAR_BINARY_SHARE = 0.8


def argmax_decision(score: float) -> bool:
    return score > 0


def balanced_fpr(neg_scores_by_conv: dict[str, list[float]], threshold: float) -> float | None:
    """Conversation-balanced share of negatives admitted (score >= threshold)."""
    rates = [sum(s >= threshold for s in xs) / len(xs) for xs in neg_scores_by_conv.values() if xs]
    return sum(rates) / len(rates) if rates else None


def pick_threshold(neg_scores_by_conv: dict[str, list[float]], target: float = TARGET_FPR) -> float:
    """The lowest threshold (admit when score >= threshold) whose conversation-balanced false-
    positive rate is at most `target`. The rate only changes at negative scores, so the candidates
    are -inf and the values just above each negative score. With no negatives: -inf."""
    negs = sorted({s for xs in neg_scores_by_conv.values() for s in xs})
    for t in [-math.inf] + [math.nextafter(c, math.inf) for c in negs]:
        fpr = balanced_fpr(neg_scores_by_conv, t)
        if fpr is None or fpr <= target:
            return t
    return math.inf


def crossfit_thresholds(rows: Sequence[dict[str, Any]], target: float = TARGET_FPR) -> dict[str, float]:
    """For each conversation, a threshold picked only on the other conversations' negatives."""
    convs = sorted({r["conversation_id"] for r in rows})
    out = {}
    for held_out in convs:
        negs: dict[str, list[float]] = {}
        for r in rows:
            if r["conversation_id"] != held_out and r["truth"] is False and r["score"] is not None:
                negs.setdefault(r["conversation_id"], []).append(r["score"])
        out[held_out] = pick_threshold(negs, target)
    return out


def near_binary(scores: Sequence[float]) -> bool:
    """Documented rule for `auto`: a verifier is near-binary when at least 80% of its scores have
    |log-odds| >= ln 99 (one word at p >= 0.99)."""
    if not scores:
        return False
    return sum(abs(s) >= NEAR_BINARY_LOGODDS for s in scores) / len(scores) >= NEAR_BINARY_SHARE


def resolve_point(rows: Sequence[dict[str, Any]], point: str) -> str:
    """`auto` → argmax or crossfit from these rows' scores (all settings of one verifier together)."""
    if point != "auto":
        return point
    return "argmax" if near_binary([r["score"] for r in rows if r["score"] is not None]) else "crossfit"


def decide(rows: list[dict[str, Any]], point: str) -> str:
    """Fill `threshold` and `decision` in place; returns the operating point actually used."""
    used = resolve_point(rows, point)
    if used == "crossfit" and len({r["conversation_id"] for r in rows}) < 2:
        used = "argmax"  # nothing to fit on: one conversation only
    th = crossfit_thresholds(rows) if used == "crossfit" else {}
    for r in rows:
        t = th.get(r["conversation_id"], 0.0) if used == "crossfit" else 0.0
        r["threshold"] = t
        if r["score"] is None:
            r["decision"] = None
        elif used == "crossfit":
            r["decision"] = r["score"] >= t
        else:
            r["decision"] = argmax_decision(r["score"])
    return used


def held_out_threshold(rows: Sequence[dict[str, Any]], point: str) -> float:
    """The threshold for items held out from every one of these rows' conversations (built families,
    probes): at crossfit, picked as for a held-out conversation, on the negatives of all of them
    (each is held in); at argmax, 0 (admit when log-odds > 0)."""
    if point != "crossfit":
        return 0.0
    negs: dict[str, list[float]] = {}
    for r in rows:
        if r["truth"] is False and r["score"] is not None:
            negs.setdefault(r["conversation_id"], []).append(r["score"])
    return pick_threshold(negs)
