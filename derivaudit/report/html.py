"""The HTML report: one self-contained file (inline styles, script and SVG plots; a CSP that forbids
any network access) with a per-memory drill-down.

Everything that comes from the memory log is untrusted: the static parts are autoescaped by the
template engine (`templating`, `templates/report.html.j2`),
and the drill-down data travels as gzip+base64 JSON that the page decodes and inserts with
`textContent` only, so no memory or passage text is ever parsed as HTML. Compression keeps a
10,000-write run to a few MB.
"""

from __future__ import annotations

import base64
import gzip
from pathlib import Path
from typing import Any

import orjson

from ..runs import folder as runs
from . import plots, templating
from .build import _num, answer_key, gate_setting
from .templating import markup
from .text import (
    _ci,
    change_rows,
    confusion_rows,
    coverage_rows,
    gold_rows,
    pct,
    review_rows,
    scope_interval_note,
    search_note,
    trust_rows,
)

VIEW_KEYS = {"citation_only": "co", "expanded": "ex"}


def _prims(p: dict[str, Any] | None) -> list[Any] | None:
    if not p:
        return None
    return [int(bool(p["d"])), int(bool(p["e"])), int(bool(p["r"])), p["e_subset"], p["r_subset"]]


def _r3(x: Any) -> float | None:
    """Scores to 3 decimals: enough to read, and random digits would not compress."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return round(v, 3) if v == v and abs(v) != float("inf") else None


def drilldown_data(run: Path, score_rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Compact per-write data: turns stored once per conversation, obligations with the primitives
    of A, B and the adjudicator per view, passages per view, and each replayed setting's score."""
    labels = runs.read_rows(run, runs.LABELS)
    views = {r["write_id"]: r for r in runs.read_rows_if(run, runs.VIEWS)}
    obls = {r["write_id"]: r["obligations"] for r in runs.read_rows_if(run, runs.OBLIGATIONS)}
    prims = {(p["obligation_id"], p["view"]): p for p in runs.read_rows_if(run, runs.PRIMITIVES)}
    if score_rows is None:
        score_rows = runs.read_rows_if(run, runs.REPLAY_SCORES)
    settings = list(dict.fromkeys(s["setting"] for s in score_rows))
    col = {k: i for i, k in enumerate(settings)}
    scores: dict[str, list[Any]] = {}
    for s in score_rows:
        row = scores.setdefault(s["write_id"], [None] * len(settings))
        row[col[s["setting"]]] = [_r3(s["score"]), s["decision"], _r3(s["threshold"])]
    turns: dict[str, dict[str, list[Any]]] = {}
    writes = []
    for r in labels:
        conv, wid = r["conversation_id"], r["write_id"]
        v = views.get(wid, {})
        table = turns.setdefault(conv, {})
        passages = {}
        for view, short in VIEW_KEYS.items():
            ids = []
            for t in v.get(view, []):
                refs = [[x["expression"], x["shown"]] for x in t.get("time_refs") or []]
                row = [t.get("speaker"), t.get("time"), t.get("text")]
                table.setdefault(t["turn_id"], [*row, refs] if refs else row)
                ids.append(t["turn_id"])
            passages[short] = ids
        ob = []
        for o in obls.get(wid, []):
            per_view = {}
            for view, short in VIEW_KEYS.items():
                p = prims.get((o["obligation_id"], view))
                if p:
                    per_view[short] = [p["label"], _prims(p["A"]), _prims(p["B"]), _prims(p["adjudicator"]),
                                       p.get("settled_by") or [], _prims(p.get("settled"))]
            kind = o["kind"] + (f" ({o['subtype']})" if o.get("subtype") else "")
            ob.append([o["obligation_id"].removeprefix(wid), kind, o["text"], per_view])
        flags = [name for name in ("provenance_repaired", "unresolved", "multi_passage", "search_limited")
                 if r.get(name)]
        writes.append({"id": wid, "c": conv, "t": r["text"], "cl": r["citation_label"], "el": r["expanded_label"],
                       "f": flags, "cit": r.get("citations", []), "d": r.get("decomposition"), "p": passages,
                       "o": ob, "s": scores.get(wid, [])})
    return {"turns": turns, "writes": writes, "settings": settings}


def pack(data: Any) -> str:
    return base64.b64encode(gzip.compress(orjson.dumps(data), compresslevel=6, mtime=0)).decode("ascii")


def gate_rows(gates: list[dict[str, Any]]) -> list[list[str]]:
    return [[g["expr"], "n/a" if g["value"] is None else f"{g['value']:.4g}", "FAILED" if g["failed"] else "passed"]
            for g in gates]


def _plots(report: dict[str, Any], rows_by_setting: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, Any]]:
    rp = report.get("replay") or {}
    figs = []
    if rows_by_setting:
        figs.append(("Log-odds by reference label, per view", "plot-dist", plots.distributions(rows_by_setting)))
        figs.append(("ROC curves per view", "plot-roc", plots.roc(rows_by_setting)))
    if report["per_conversation"]:
        figs.append(("Per-conversation rates", "plot-conv", plots.per_conversation(report["per_conversation"])))
    if rp.get("noise", {}).get("levels"):
        figs.append(("Verification-noise probe", "plot-noise", plots.noise_curve(rp["noise"])))
    return [(t, fid, markup(svg)) for t, fid, svg in figs]


def _meta(report: dict[str, Any]) -> list[list[str]]:
    r = report["run"]
    models = sorted({str((a.get("model") or {}).get("model")) for a in r.get("annotators", {}).values()})
    return [["input", ", ".join(r.get("input_files") or []) + f" (sha {r.get('input_sha')})"],
            ["writes / conversations", f"{r['writes']} / {r['conversations']}"],
            ["annotator models", ", ".join(models)], ["scanned", r.get("scanned_at") or "—"],
            ["replayed", r.get("replayed_at") or "—"], ["derivaudit", report["derivaudit"]],
            ["generated", report["generated_at"]]]


def _replay(report: dict[str, Any]) -> dict[str, Any]:
    rp = report.get("replay") or {}
    rows = []
    for key, s in rp.get("settings", {}).items():
        auc = _num(s.get("auc"))
        rows.append([key, pct(s.get("valid_kept")), _ci(s.get("valid_kept_ci")),
                     pct(s.get("unsupported_admitted")), _ci(s.get("unsupported_admitted_ci")),
                     "—" if auc is None else f"{auc:.3f}", s.get("n_pos"), s.get("n_neg"),
                     s.get("scoring_errors"), s.get("operating_point")])
    return {"rows": rows, "point": str(rp.get("operating_point")), "combine": str(rp.get("combine")),
            "answer_key": answer_key(rp) if rows else "", "gate": str(gate_setting(report)) if rows else ""}


def _trust(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    head, rows, notes = trust_rows(report)
    c_head, c_rows = coverage_rows(report)
    svg = markup(plots.accuracy_at_coverage(report["trust"]["accuracy_at_coverage"])) if c_rows else None
    return {"head": head, "rows": rows, "notes": notes}, {"head": c_head, "rows": c_rows, "svg": svg}


def _sections(report: dict[str, Any]) -> dict[str, Any]:
    """The context of the report's sections other than the plots (a section with nothing is None)."""
    ag = report.get("agreement", {})
    ag_rows = [[p, pct(ag[p].get("agreement")), "—" if _num(ag[p].get("kappa")) is None else f"{ag[p]['kappa']:.2f}"]
               for p in ("D", "E", "R", "label") if p in ag]
    g, rv, life = report.get("gold"), report.get("review"), report.get("lifecycle")
    gold = None
    if g:
        head, rows = confusion_rows(g)
        gold = {"rows": gold_rows(g), "head": head, "confusion": rows}
    review = None
    if rv:
        prim, head, conf = review_rows(rv)
        review = {"reviewed": rv["reviewed"], "primitives": prim, "head": head, "confusion": conf}
    lifecycle = None
    if life:
        from .lifecycle import RATE_COLUMNS, rate_rows, unjustified_rows

        lifecycle = {"operations": life["operations"], "outside": life["outside_conversation"],
                     "head": RATE_COLUMNS, "rows": rate_rows(life),
                     "unjustified": unjustified_rows(life) if life.get("unjustified") else []}
    trust, coverage = _trust(report)
    return {"meta_rows": _meta(report), "scope_note": scope_interval_note(report), "search_note": search_note(report),
            "scope_rows": [[k, pct(v["balanced"]), _ci(v["balanced_ci"]), pct(v["weighted"]), v["n_writes"],
                            v["meaning"]] for k, v in report["scope"].items()],
            "trust": trust, "coverage": coverage, "replay": _replay(report), "gold": gold, "lifecycle": lifecycle,
            "review": review, "agreement": {"rows": ag_rows, "adjudicated": ag.get("adjudicated"),
                                            "total": ag.get("items")},
            "change": {"path": report["baseline"]["run"]["path"], "rows": change_rows(report)}
            if "change" in report else None}


def render(report: dict[str, Any], gates: list[dict[str, Any]] | None = None) -> str:
    """The page: its sections in order, then the drill-down data the page's script decodes."""
    run = Path(report["run"]["path"])
    score_rows = runs.read_rows_if(run, runs.REPLAY_SCORES)
    rows_by_setting: dict[str, list[dict[str, Any]]] = {}
    for s in score_rows:
        rows_by_setting.setdefault(s["setting"], []).append(s)
    return templating.render("report.html.j2", **_sections(report), gate_rows=gate_rows(gates or []),
                             plots=_plots(report, rows_by_setting), replayed=bool(rows_by_setting),
                             data=pack(drilldown_data(run, score_rows)))


def html_bytes(report: dict[str, Any], gates: list[dict[str, Any]] | None = None) -> bytes:
    return render(report, list(gates or [])).encode()
