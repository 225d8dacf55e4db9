"""The HTML report: one self-contained file (inline styles, script and SVG plots; a CSP that forbids
any network access) with a per-memory drill-down.

Everything that comes from the memory log is untrusted: the static parts go through `html.escape`,
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
from ..safe import html_escape as escape
from . import plots
from .build import _num, answer_key, gate_setting
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


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def ci_gates_html(gates: list[dict[str, Any]]) -> str:
    if not gates:
        return ""
    rows = [[g["expr"], "n/a" if g["value"] is None else f"{g['value']:.4g}", "FAILED" if g["failed"] else "passed"]
            for g in gates]
    return "<h2>Gates</h2>" + _table(["gate", "value", "result"], rows, "gates")


def _plots(report: dict[str, Any], rows_by_setting: dict[str, list[dict[str, Any]]]) -> str:
    rp = report.get("replay") or {}
    figs = []
    if rows_by_setting:
        figs.append(("Log-odds by reference label, per view", "plot-dist", plots.distributions(rows_by_setting)))
        figs.append(("ROC curves per view", "plot-roc", plots.roc(rows_by_setting)))
    if report["per_conversation"]:
        figs.append(("Per-conversation rates", "plot-conv", plots.per_conversation(report["per_conversation"])))
    if rp.get("noise", {}).get("levels"):
        figs.append(("Verification-noise probe", "plot-noise", plots.noise_curve(rp["noise"])))
    plot_html = "".join(f'<figure class="plot" id="{fid}"><figcaption>{escape(t)}</figcaption>{svg}</figure>'
                        for t, fid, svg in figs)
    if not rows_by_setting:
        plot_html += ("<p class=note>No replay in this run: run <code>derivaudit replay RUN/</code> for the score "
                      "plots.</p>")
    return plot_html


def _meta(report: dict[str, Any]) -> str:
    r = report["run"]
    models = sorted({str((a.get("model") or {}).get("model")) for a in r.get("annotators", {}).values()})
    meta_rows = [["input", ", ".join(r.get("input_files") or []) + f" (sha {r.get('input_sha')})"],
                 ["writes / conversations", f"{r['writes']} / {r['conversations']}"],
                 ["annotator models", ", ".join(models)], ["scanned", r.get("scanned_at") or "—"],
                 ["replayed", r.get("replayed_at") or "—"], ["derivaudit", report["derivaudit"]],
                 ["generated", report["generated_at"]]]
    return _table(["", ""], meta_rows, "meta")


def _scope(report: dict[str, Any]) -> str:
    scope_rows = [[k, pct(v["balanced"]), _ci(v["balanced_ci"]), pct(v["weighted"]), v["n_writes"], v["meaning"]]
                  for k, v in report["scope"].items()]
    note = search_note(report)
    return f"""<h2>Scope</h2><p class=note>The judge's rates, conversation-balanced (each conversation counts equally),
write-weighted beside them; {escape(scope_interval_note(report))}.</p>
{_table(["metric", "balanced", "95% CI", "write-weighted", "n writes", "meaning"], scope_rows, "scope")}""" + (
        f"<p class=note>{escape(note)}</p>" if note else "")


def _replay(report: dict[str, Any]) -> str:
    rp = report.get("replay") or {}
    replay_rows = []
    for key, s in rp.get("settings", {}).items():
        auc = _num(s.get("auc"))
        replay_rows.append([key, pct(s.get("valid_kept")), _ci(s.get("valid_kept_ci")),
                            pct(s.get("unsupported_admitted")), _ci(s.get("unsupported_admitted_ci")),
                            "—" if auc is None else f"{auc:.3f}", s.get("n_pos"), s.get("n_neg"),
                            s.get("scoring_errors"), s.get("operating_point")])
    if not replay_rows:
        return ""
    return ("<h2>Admission replay</h2><p class=note>Operating point " + escape(str(rp.get("operating_point")))
            + ", combine " + escape(str(rp.get("combine"))) + "; " + escape(answer_key(rp)) + ". Gate setting: "
            + escape(str(gate_setting(report))) + ".</p>"
            + _table(["view / evidence", "valid kept", "95% CI", "unsupported admitted", "95% CI", "AUC", "pos",
                      "neg", "scoring errors", "point"], replay_rows, "replay"))


def _annotators(report: dict[str, Any]) -> str:
    ag = report.get("agreement", {})
    ag_rows = [[p, pct(ag[p].get("agreement")), "—" if _num(ag[p].get("kappa")) is None else f"{ag[p]['kappa']:.2f}"]
               for p in ("D", "E", "R", "label") if p in ag]
    if not ag_rows:
        return ""
    return ("<h2>Annotators</h2>" + _table(["primitive", "agreement", "Cohen's κ"], ag_rows)
            + f"<p>Adjudicated {ag.get('adjudicated')} of {ag.get('items')} items.</p>")


def _change(report: dict[str, Any]) -> str:
    if "change" not in report:
        return ""
    return (f"<h2>Change against the baseline</h2><p>baseline: {escape(report['baseline']['run']['path'])}</p>"
            + _table(["metric", "baseline", "this run", "change"], change_rows(report)))


def _review(report: dict[str, Any]) -> str:
    rv = report.get("review")
    if not rv:
        return ""
    prim, head, conf = review_rows(rv)
    return (f"<h2>Human review</h2><p class=note>{rv['reviewed']} reviewed obligation × view rows "
            "(derivaudit review import): the model's final primitives against the reviewers'.</p>"
            + _table(["primitive", "n", "agreement", "Cohen's κ"], prim, "review")
            + _table(head, conf, "review-confusion"))


def _gold(report: dict[str, Any]) -> str:
    g = report.get("gold")
    if not g:
        return ""
    head, rows = confusion_rows(g)
    return ("<h2>Labels against gold</h2><p class=note>Writes carrying <code>meta.gold</code>: the audited "
            "category (from the citation-only and expanded labels) against the reference.</p>"
            + _table(["metric", "value"], gold_rows(g), "gold") + _table(head, rows, "confusion"))


def _trust(report: dict[str, Any]) -> str:
    head, rows, notes = trust_rows(report)
    trust_html = ("<h2>Corrected rates</h2>" + "".join(f"<p class=note>{escape(n)}</p>" for n in notes)
                  + (_table(head, rows, "corrected") if rows else ""))
    head, rows = coverage_rows(report)
    if rows:
        acc = report["trust"]["accuracy_at_coverage"]
        trust_html += ("<h2>Accuracy at coverage</h2><p class=note>The writes with a reference label, most confident "
                       "first (confidence read on the calibration items, never on the labels).</p>"
                       + _table(head, rows, "coverage"))
        trust_html += ('<figure class="plot" id="plot-coverage"><figcaption>Accuracy at coverage</figcaption>'
                       f"{plots.accuracy_at_coverage(acc)}</figure>")
    return trust_html


def _lifecycle(report: dict[str, Any]) -> str:
    life = report.get("lifecycle")
    if not life:
        return ""
    from .lifecycle import RATE_COLUMNS, rate_rows, unjustified_rows

    return (f"<h2>Lifecycle</h2><p class=note>{life['operations']} deletions, invalidations and updates "
            "judged against the turns after their target's write; "
            f"{life['outside_conversation']} made outside the conversation, counted apart.</p>"
            + _table(RATE_COLUMNS, rate_rows(life), "lifecycle")
            + (_table(["operation", "kind", "target", "why", "deciding turns"], unjustified_rows(life),
                      "lifecycle-unjustified") if life.get("unjustified") else ""))


_MEMORIES = """<h2>Memories</h2>
<div class=controls><input id=q type=search placeholder="filter by text or id"> <select id=lab>
<option value="">every expanded label</option><option>supported</option><option>unsupported</option>
<option>contradicted</option><option>ambiguous</option></select> <span id=count></span></div>
<table id=writes><thead><tr><th>write</th><th>conversation</th><th>memory</th><th>citation-only</th>
<th>expanded</th><th>flags</th></tr></thead><tbody></tbody></table>
<div id=pager></div>
<section id=drill hidden></section>
"""


def render(report: dict[str, Any], gates: list[dict[str, Any]] | None = None) -> str:
    """The page: its sections in order, then the drill-down data the page's script decodes."""
    run = Path(report["run"]["path"])
    score_rows = runs.read_rows_if(run, runs.REPLAY_SCORES)
    rows_by_setting: dict[str, list[dict[str, Any]]] = {}
    for s in score_rows:
        rows_by_setting.setdefault(s["setting"], []).append(s)
    body = f"""
<header><h1>derivaudit report</h1>{_meta(report)}</header>
{ci_gates_html(gates or [])}
{_scope(report)}
{_trust(report)}
{_replay(report)}
{_gold(report)}
{_lifecycle(report)}
{_review(report)}
{_change(report)}
{_annotators(report)}
<h2>Plots</h2>{_plots(report, rows_by_setting)}
{_MEMORIES}"""
    return _PAGE.replace("%BODY%", body).replace("%DATA%", pack(drilldown_data(run, score_rows)))


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; \
style-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<title>derivaudit report</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f4f4f4}.note{color:#666}figure.plot{margin:1em 0}figcaption{font-weight:600}
figure.plot svg{max-width:100%;height:auto}#writes tbody tr{cursor:pointer}#writes tbody tr:hover{background:#eef6f5}
.lab{padding:0 5px;border-radius:3px;font-size:12px}.supported{background:#d8f0ec}.unsupported{background:#fde2d9}
.contradicted{background:#f7c1c1}.ambiguous,.insufficient{background:#eee}#drill{border:2px solid #2a9d8f;
padding:1em;margin:1em 0;border-radius:6px}.cited{background:#fff5cc}.retrieved{background:#e6f0ff}
.implied{font-weight:600}.passages li{margin:2px 0}.mark{font-size:11px;color:#555;margin-left:4px}
#pager button{margin:2px}.why{font-size:11px;color:#555}
</style></head><body>
%BODY%
<script type="application/octet-stream" id="data">%DATA%</script>
<script>
"use strict";
const PAGE = 100;
let DATA = null, shown = [], page = 0;
function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined && text !== null)
  e.textContent = String(text); if (cls) e.className = cls; return e; }
function lab(x) { return el("span", x || "—", "lab " + (x || "")); }
async function load() {
  const raw = atob(document.getElementById("data").textContent.trim());
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
function filter() {
  const q = document.getElementById("q").value.toLowerCase(), l = document.getElementById("lab").value;
  shown = DATA.writes.filter(w => (!l || w.el === l) &&
    (!q || w.t.toLowerCase().includes(q) || w.id.toLowerCase().includes(q)));
  page = 0; draw();
}
function draw() {
  const tb = document.querySelector("#writes tbody"); tb.replaceChildren();
  for (const w of shown.slice(page * PAGE, (page + 1) * PAGE)) {
    const tr = el("tr"); tr.dataset.id = w.id;
    tr.append(el("td", w.id), el("td", w.c), el("td", w.t));
    const a = el("td"); a.append(lab(w.cl)); const b = el("td"); b.append(lab(w.el));
    tr.append(a, b, el("td", w.f.join(", ")));
    tr.addEventListener("click", () => open(w));
    tb.append(tr);
  }
  document.getElementById("count").textContent = shown.length + " of " + DATA.writes.length + " memories";
  const pg = document.getElementById("pager"); pg.replaceChildren();
  const pages = Math.ceil(shown.length / PAGE);
  if (pages > 1) for (let i = 0; i < pages; i++) {
    const bt = el("button", i + 1); bt.disabled = i === page; bt.addEventListener("click", () => { page = i; draw(); });
    pg.append(bt);
  }
}
function prim(p) {
  if (!p) return "—";
  let s = "D" + (p[0] ? "+" : "−") + " E" + (p[1] ? "+" : "−") + " R" + (p[2] ? "+" : "−");
  if (p[3].length) s += " E⊂[" + p[3].join(",") + "]";
  if (p[4].length) s += " R⊂[" + p[4].join(",") + "]";
  return s;
}
function open(w) {
  const d = document.getElementById("drill"); d.replaceChildren(); d.hidden = false;
  d.append(el("h3", "Memory " + w.id + " (" + w.c + ")"), el("p", w.t, "memory"));
  const info = el("p"); info.append("citation-only: ", lab(w.cl), "  expanded: ", lab(w.el),
    "  decomposition: " + (w.d || "—") + (w.f.length ? "  flags: " + w.f.join(", ") : ""));
  d.append(info);
  const settings = DATA.settings.map((k, i) => [k, w.s[i]]).filter(x => x[1]);
  if (settings.length) {
    const t = el("table"); const h = el("tr");
    for (const x of ["view / evidence", "log-odds", "threshold", "decision"]) h.append(el("th", x));
    t.append(h);
    for (const [k, [s, dec, th]] of settings) { const r = el("tr");
      r.append(el("td", k), el("td", s === null ? "error" : s.toFixed(3)), el("td", th === null ? "—" : th.toFixed(3)),
               el("td", dec === null ? "—" : (dec ? "admit" : "reject"))); t.append(r); }
    d.append(el("h4", "Verification views"), t);
  }
  const ot = el("table"); const oh = el("tr");
  for (const x of ["obligation", "kind", "view", "label", "A", "B", "adjudicator"]) oh.append(el("th", x));
  ot.append(oh);
  const implied = {co: new Set(), ex: new Set()};
  for (const [oid, kind, text, per] of w.o) for (const v of ["co", "ex"]) if (per[v]) {
    const [label, A, B, J, why, S] = per[v]; const r = el("tr");
    r.append(el("td", w.id + oid + ": " + text), el("td", kind), el("td", v === "co" ? "citation-only" : "expanded"));
    const c = el("td"); c.append(lab(label));
    if (why && why.length) c.append(el("div", why.join("; "), "why"));  // a rule after the annotation
    r.append(c, el("td", prim(A)), el("td", prim(B)), el("td", prim(J)));
    ot.append(r);
    const fin = S || J || A; if (fin) for (const n of fin[3]) implied[v].add(n);
  }
  d.append(el("h4", "Obligations"), ot);
  const turns = DATA.turns[w.c] || {}, cited = new Set(w.cit);
  for (const [v, name] of [["co", "Citation-only view"], ["ex", "Expanded-history view"]]) {
    d.append(el("h4", name));
    const ol = el("ol", null, "passages");
    w.p[v].forEach((tid, i) => {
      const [speaker, time, text, refs] = turns[tid] || [null, null, "(missing)"];
      const li = el("li", null, cited.has(tid) ? "cited" : "retrieved");
      if (implied[v].has(i + 1)) li.classList.add("implied");
      li.append(el("span", "[" + tid + "] " + (time ? time + " " : "") + (speaker ? speaker + ": " : "")),
                el("span", text), el("span", cited.has(tid) ? "cited" : "retrieved", "mark"));
      if (implied[v].has(i + 1)) li.append(el("span", "in a minimal E subset", "mark"));
      if (refs) li.append(el("span", "time: " + refs.map(([e, d]) => e + " = " + d).join("; "), "mark"));
      ol.append(li);
    });
    if (!w.p[v].length) ol.append(el("li", "(no passages)"));
    d.append(ol);
  }
  d.scrollIntoView();
}
load().then(x => { DATA = x; document.getElementById("q").addEventListener("input", filter);
  document.getElementById("lab").addEventListener("change", filter); filter();
  document.body.dataset.ready = "1"; });
</script></body></html>
"""


def html_bytes(report: dict[str, Any], gates: list[dict[str, Any]] | None = None) -> bytes:
    return render(report, list(gates or [])).encode()
