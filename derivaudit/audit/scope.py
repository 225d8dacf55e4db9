"""What a scan's rows come to: a primitive row per obligation and view, each write's labels in both
views with its category and flags, and the scope report (rates, annotator agreement, decomposition
health, gold accuracy when the log has gold)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..log.records import Write
from ..rates.stats import SCOPE_HELP, cohen_kappa, rates
from ..runs.folder import VIEW_NAMES
from . import gold
from .annotate import BOUNDED, Annotation
from .decompose import Decomposition
from .evidence import EvidenceViews
from .labels import answers, memory_label, obligation_label


def _primitive_row(x: Annotation) -> dict[str, Any]:
    it = x.item
    return {
        "obligation_id": it.obligation.obligation_id, "write_id": it.write.write_id,
        "conversation_id": it.write.conversation_id, "view": it.view,
        "passages": [t.turn_id for t in it.passages],
        "A": x.a.to_dict(), "B": x.b.to_dict(),
        "adjudicator": x.adjudicated.to_dict() if x.adjudicated else None,
        "adjudicated": x.adjudicated is not None,
        "label_A": obligation_label(*x.a.answers), "label_B": obligation_label(*x.b.answers),
        "label": x.label,
    }


def label_writes(writes: Sequence[Write], views: Sequence[EvidenceViews], decs: Sequence[Decomposition],
                 prim_rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    view_of = {v.write.write_id: v for v in views}
    dec_of = {d.write_id: d for d in decs}
    rows_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in prim_rows:
        rows_of.setdefault((r["write_id"], r["view"]), []).append(r)
    out = []
    for w in writes:
        v, d = view_of[w.write_id], dec_of[w.write_id]
        per_view = {}
        for vn in VIEW_NAMES:
            rs = rows_of.get((w.write_id, vn), [])
            per_view[vn] = {
                "label": memory_label([r["label"] for r in rs]) if rs else None,
                "obligations": {r["obligation_id"]: r["label"] for r in rs},
            }
        cit, exp = per_view["citation_only"]["label"], per_view["expanded"]["label"]
        final = [answers(r) for r in rows_of.get((w.write_id, "expanded"), [])]
        used = {n for p in final for n in (p["e_subset"] or [])}
        out.append({
            "write_id": w.write_id, "conversation_id": w.conversation_id, "text": w.text,
            "citations": list(w.citations), "search_limited": v.search_limited,
            "decomposition": d.status, "citation_label": cit, "expanded_label": exp,
            "citation_only": per_view["citation_only"], "expanded": per_view["expanded"],
            "category": gold.category(cit, exp),
            "gold": (w.meta or {}).get("gold"),
            "provenance_repaired": gold.provenance_repaired(cit, exp),
            "unresolved": exp == "unsupported" and v.search_limited,
            "multi_passage": exp == "supported" and len(used) > 1,
        })
    return out


def scope_report(labels: Sequence[dict[str, Any]], prim_rows: Sequence[dict[str, Any]],
                 decs: Sequence[Decomposition]) -> dict[str, Any]:
    labeled = [r for r in labels if r["citation_label"] and r["expanded_label"]]
    scope = rates(labeled)
    for k, v in scope.items():
        v["meaning"] = SCOPE_HELP[k]
    diffs = [(k, v["difference"]) for k, v in scope.items() if v["difference"] is not None]
    largest = max(diffs, key=lambda kv: abs(kv[1])) if diffs else (None, None)
    agreement = {}
    for p in ("d", "e", "r"):
        xa = [r["A"][p] for r in prim_rows]
        xb = [r["B"][p] for r in prim_rows]
        agreement[p.upper()] = {"agreement": _share(xa, xb), "kappa": cohen_kappa(xa, xb)}
    la, lb = [r["label_A"] for r in prim_rows], [r["label_B"] for r in prim_rows]
    agreement["label"] = {"agreement": _share(la, lb), "kappa": cohen_kappa(la, lb)}
    n_adj = sum(r["adjudicated"] for r in prim_rows)
    status = {s: sum(d.status == s for d in decs) for s in ("ok", "retried", "fallback")}
    notes = [n for r in prim_rows for who in ("A", "B", "adjudicator") if r[who] for n in r[who]["notes"]]
    errors = sum("scoring error" in n for n in notes)
    out = {
        "scope": scope,
        "largest_weighting_difference": {"metric": largest[0], "difference": largest[1]},
        "agreement": {**agreement, "adjudication_rate": n_adj / len(prim_rows) if prim_rows else None,
                      "adjudicated": n_adj, "items": len(prim_rows)},
        "decomposition": {**status, "failure_rate": status["fallback"] / len(decs) if decs else None,
                          "obligations": sum(len(d.obligations) for d in decs)},
        "scoring_errors": errors,
        "bounded_scores": sum(BOUNDED in n for n in notes),
        "labels": {vn: _counts([r[f"{'citation' if vn == 'citation_only' else 'expanded'}_label"] for r in labels])
                   for vn in VIEW_NAMES},
    }
    g = gold.gold_metrics(labels)
    if g is not None:
        out["gold"] = g
    return out


def _share(x: Sequence[Any], y: Sequence[Any]) -> float | None:
    return sum(i == j for i, j in zip(x, y, strict=True)) / len(x) if x else None


def _counts(xs: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[str(x)] = out.get(str(x), 0) + 1
    return out
