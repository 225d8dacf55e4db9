"""One-file HTML pages for the built tests (`families run`, `drift`, `probe` with `--html FILE`) and
the read-path audits (`echo`, `overlap --format html`): tables and inline SVG plots, no scripts, no
network (the same Content-Security-Policy as the run report). Every string from a family, log or
probe file is escaped."""

from __future__ import annotations

from typing import Any

from ..safe import html_escape as escape
from . import plots
from .html import _table, ci_gates_html

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<title>%TITLE%</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f4f4f4}.note{color:#666}figure.plot svg{max-width:100%;height:auto}
.bad{color:#b00020;font-weight:600}
</style></head><body>
%BODY%
</body></html>
"""


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Any) -> str:
    return "" if not ci or ci[0] is None else f"{100 * ci[0]:.0f}–{100 * ci[1]:.0f}%"


def _page(title: str, body: str) -> bytes:
    return _PAGE.replace("%TITLE%", escape(title)).replace("%BODY%", body).encode()


def _figure(caption: str, svg: str) -> str:
    return f"<figure class=plot><figcaption>{escape(caption)}</figcaption>{svg}</figure>"


def families_html(rep: dict[str, Any]) -> bytes:
    points = rep.get("operating_points") or {v: {"operating_point": "argmax", "threshold": rep["threshold"]}
                                             for v in rep["summary"]}
    at = "; ".join(f"{v}: {op['operating_point']}, accept at log-odds ≥ {op['threshold']}" for v, op in points.items())
    parts = [f"<h1>Matched families</h1><p class=note>{rep['families']} families; model "
             f"{escape(str(rep['model'].get('model')))}; {escape(at)} (argmax: &gt; 0).</p>"]
    for view, m in rep["summary"].items():
        rows = []
        for ev in ("local", "distributed"):
            k = m["controls"]
            rows.append([ev, _pct(m["cells"][f"{ev}/valid"]["accepted"]), _pct(m["cells"][f"{ev}/invalid"]["accepted"]),
                         "—" if m["gap"][ev] is None else f"{100 * m['gap'][ev]:+.1f} pp",
                         _pct(k[f"{ev}/no_relation"]["flipped_to_reject"]),
                         _pct(k[f"{ev}/swapped_premises/invalid"]["accepted"])])
        parts.append(f"<h2>View {escape(view)}</h2>" + _table(
            ["evidence", "valid accepted", "invalid accepted", "gap", "relation removed: valid flipped to reject",
             "premises swapped: invalid accepted"], rows, "families"))
        parts.append(_figure(f"Acceptance per cell, view {view}", plots.bars(
            {f"{ev}/{v}": m["cells"][f"{ev}/{v}"]["accepted"] for ev in ("local", "distributed")
             for v in ("valid", "invalid")}, "accepted")))
    return _page("derivaudit families", "".join(parts))


def drift_html(rep: dict[str, Any]) -> bytes:
    rows = [[r, str(c["pairs"]), _pct(c["temporal"]["balanced"]), _ci(c["temporal"]["ci"]),
             _pct(c["modality"]["balanced"]), _ci(c["modality"]["ci"])] for r, c in rep["rounds"].items()]
    from ..built.drift import why

    parts = [f"<h1>Drift over rewriting rounds</h1><p class=note>{rep['pairs']} pairs, method "
             f"{escape(rep.get('method', 'pair'))}, against the "
             f"{escape(rep['against'])}; round 0 = extraction (against the cited turns); conversation-balanced "
             "rates, 95% bootstrap CI over conversations.</p>",
             _table(["round", "pairs", "temporal", "95% CI", "modality", "95% CI"], rows, "drift"),
             _figure("Drift rate per round", plots.rate_lines(
                 {kind: [(int(r), c[kind]["balanced"], c[kind]["ci"]) for r, c in rep["rounds"].items()]
                  for kind in ("temporal", "modality")}, "rewriting round", "drift rate"))]
    for kind, ex in rep["examples"].items():
        if ex:
            parts.append(f"<h2>Examples: {escape(kind)} drift</h2>" + _table(
                ["write", "round", "earlier", "later", "why"],
                [[e["write_id"], str(e["round"]), e["earlier"], e["later"], why(e, kind)] for e in ex], "examples"))
    if rep["unplaced"]:
        parts.append("<h2>Not in a lineage</h2>" + _table(["write"], [[n] for n in rep["unplaced"]], "unplaced"))
    return _page("derivaudit drift", "".join(parts))


def probe_html(rep: dict[str, Any]) -> bytes:
    ctl = [[k, _pct(v), "ok" if v >= rep["control_min"] else "FAILED"] for k, v in rep["controls"].items()]
    head = ("<h1>Downstream probe</h1>" + ("" if rep["read"] else
            "<p class=bad>Not read: the reader failed a control check; the rates below say nothing about "
            "admission errors.</p>"))
    rates = [[kind, *(f"{_pct(rep['failure_rates'][f'{kind}/{c}']['failure'])} "
                      f"({_ci(rep['failure_rates'][f'{kind}/{c}']['ci'])})" for c in ("correct", "distorted", "empty"))]
             for kind in ("changed", "only")]
    costs = [[name, c["query"], "—" if c["difference"] is None else f"{100 * c['difference']:+.1f} pp",
              _ci(c["ci"]), str(c["n"])] for name, c in rep["costs"].items()]
    body = (head + _table(["control", "value", "at 0.80"], ctl, "controls")
            + _table(["query", "correct slot", "distorted slot", "empty slot"], rates, "rates")
            + _table(["cost of", "query", "difference", "95% CI", "items"], costs, "costs")
            + _figure("Failure rate per query and slot", plots.bars(
                {f"{k}/{c}": rep["failure_rates"][f"{k}/{c}"]["failure"] for k in ("changed", "only")
                 for c in ("correct", "distorted", "empty")}, "failure rate")))
    return _page("derivaudit probe", body)


def _metric_table(rows: list[tuple[Any, ...]], head: list[str]) -> str:
    return _table(head, [[str(x) for x in r if x is not None] for r in rows], "metrics")


def echo_html(doc: dict[str, Any]) -> bytes:
    """`echo --format html`: metrics, corrections, largest families, and Echo Density per read after
    each correction (logged, and served by FPA)."""
    from ..readpath.echo import share
    from .readrows import echo_rows

    s, fpa = doc["settings"], doc["settings"].get("serve") == "fpa"
    parts = [f"<h1>Memory echo</h1><p class=note>Top {s['k']} slots weighted {escape(s['weights'])}; window "
             f"{s['window']} reads.</p>", ci_gates_html(doc.get("gates") or []),
             _metric_table(echo_rows(doc), ["metric", "what", "logged", *(["served by FPA"] if fpa else [])])]
    by_read = {r["read_id"]: r for r in doc["reads"]}
    for c in doc["corrections"]:
        parts.append(f"<h2>Correction {escape(c['write_id'])}</h2><p class=note>supersedes "
                     f"{escape(', '.join(c['supersedes']))}; old records {escape(', '.join(c['old']))}; "
                     f"{c['reads_before']} reads before, {c['reads_after']} after.</p>")
        after = [r for r in doc["reads"] if r["conversation_id"] == c["conversation_id"]
                 and r["point"] >= c["point"]]
        series = {way: [(i + 1, share(by_read[r["read_id"]][way], set(c["old"]), s["k"]), ())
                        for i, r in enumerate(after)] for way in (("logged", "fpa") if fpa else ("logged",))}
        if after:
            parts.append(_figure("Echo Density of each read after the correction",
                                 plots.rate_lines(series, "read after the correction", "Echo Density")))
    fams = [[f["family"], str(f["records"]), str(f["valid"]), ", ".join(f["write_ids"][:12])]
            for f in doc["families"][:20]]
    parts.append("<h2>Largest families</h2>" + _table(["family", "records", "still valid", "write ids"], fams, "fam"))
    return _page("Memory echo", "".join(parts))


def overlap_html(doc: dict[str, Any]) -> bytes:
    """`overlap --format html`: metrics, the overlap histogram, and the reads in the risky band."""
    from .readrows import overlap_rows

    lo, hi = doc["settings"]["band"]
    total = sum(doc["histogram"]) or 1
    parts = [f"<h1>Query–memory overlap</h1><p class=note>Top {doc['settings']['k']} memories; middle band "
             f"[{lo}, {hi}).</p>", ci_gates_html(doc.get("gates") or []),
             _metric_table(overlap_rows(doc), ["metric", "what", "value"]),
             _figure("Reads by overlap with their top memory (share per tenth)", plots.bars(
                 {f"{i / 10:.1f}–{(i + 1) / 10:.1f}": n / total for i, n in enumerate(doc["histogram"])},
                 "share of reads"))]
    risky = [[r["read_id"], f"{r['top_overlap']:.2f}", r.get("case") or "",
              "" if r["correct"] is None else str(r["correct"]).lower(),
              ", ".join(f"{k}: {v}" for k, v in (r["memtrim"] or {}).get("outcomes", {}).items())]
             for r in doc["reads"] if r["band"] == "middle"]
    if risky:
        parts.append("<h2>Reads in the risky band</h2>" + _table(
            ["read", "overlap", "case", "correct", "MemTrim outcome"], risky, "risky"))
    return _page("Query–memory overlap", "".join(parts))
