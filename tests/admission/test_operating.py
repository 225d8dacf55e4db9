"""Operating points: the held-out threshold for items outside every conversation of a replay."""

from __future__ import annotations

import math

from derivaudit.admission.operating import balanced_fpr, held_out_threshold, pick_threshold


def _rows():
    out = []
    for c, negs in {"c1": [-2.0, -1.0, 0.5], "c2": [-0.5, 1.5], "c3": [-3.0, -2.5, -1.0, 0.2]}.items():
        out += [{"conversation_id": c, "truth": False, "score": s} for s in negs]
        out += [{"conversation_id": c, "truth": True, "score": 2.0}, {"conversation_id": c, "truth": None,
                                                                       "score": 9.0}]
    out.append({"conversation_id": "c1", "truth": False, "score": None})  # a scoring error: not a negative
    return out


def test_held_out_threshold_is_fit_on_every_conversations_negatives():
    rows = _rows()
    negs = {}
    for r in rows:
        if r["truth"] is False and r["score"] is not None:
            negs.setdefault(r["conversation_id"], []).append(r["score"])
    t = held_out_threshold(rows, "crossfit")
    assert t == pick_threshold(negs) and balanced_fpr(negs, t) <= 0.10
    assert balanced_fpr(negs, math.nextafter(t, -math.inf)) > 0.10  # the lowest such threshold
    assert held_out_threshold(rows, "argmax") == 0.0
