"""One-file HTML pages for the built tests (`families run`, `drift`, `probe` with `--html FILE`) and
the read-path audits (`echo`, `overlap --format html`): tables and inline SVG plots, no scripts, no
network (the same Content-Security-Policy as the run report). Each page is a template of
`report/templates/` (`templating`: autoescaped, so every string from a family, log or probe file is
escaped); this module gathers its rows."""

from __future__ import annotations

from typing import Any

from . import plots, templating
from .html import gate_rows
from .templating import markup


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Any) -> str:
    return "" if not ci or ci[0] is None else f"{100 * ci[0]:.0f}–{100 * ci[1]:.0f}%"


def _page(template: str, title: str, **context: Any) -> bytes:
    return templating.render(template, title=title, **context).encode()


def families_html(rep: dict[str, Any]) -> bytes:
    points = rep.get("operating_points") or {v: {"operating_point": "argmax", "threshold": rep["threshold"]}
                                             for v in rep["summary"]}
    views = []
    for view, m in rep["summary"].items():
        rows = []
        for ev in ("local", "distributed"):
            k = m["controls"]
            rows.append([ev, _pct(m["cells"][f"{ev}/valid"]["accepted"]), _pct(m["cells"][f"{ev}/invalid"]["accepted"]),
                         "—" if m["gap"][ev] is None else f"{100 * m['gap'][ev]:+.1f} pp",
                         _pct(k[f"{ev}/no_relation"]["flipped_to_reject"]),
                         _pct(k[f"{ev}/swapped_premises/invalid"]["accepted"])])
        views.append({"name": view, "rows": rows, "svg": markup(plots.bars(
            {f"{ev}/{v}": m["cells"][f"{ev}/{v}"]["accepted"] for ev in ("local", "distributed")
             for v in ("valid", "invalid")}, "accepted"))})
    return _page("families.html.j2", "derivaudit families", families=rep["families"],
                 model=str(rep["model"].get("model")), views=views,
                 at="; ".join(f"{v}: {op['operating_point']}, accept at log-odds ≥ {op['threshold']}"
                              for v, op in points.items()))


def drift_html(rep: dict[str, Any]) -> bytes:
    from ..built.drift import why

    rows = [[r, str(c["pairs"]), _pct(c["temporal"]["balanced"]), _ci(c["temporal"]["ci"]),
             _pct(c["modality"]["balanced"]), _ci(c["modality"]["ci"])] for r, c in rep["rounds"].items()]
    svg = plots.rate_lines({kind: [(int(r), c[kind]["balanced"], c[kind]["ci"]) for r, c in rep["rounds"].items()]
                            for kind in ("temporal", "modality")}, "rewriting round", "drift rate")
    examples = [(kind, [[e["write_id"], str(e["round"]), e["earlier"], e["later"], why(e, kind)] for e in ex])
                for kind, ex in rep["examples"].items() if ex]
    return _page("drift.html.j2", "derivaudit drift", pairs=rep["pairs"], method=rep.get("method", "pair"),
                 against=rep["against"], rows=rows, svg=markup(svg), examples=examples,
                 unplaced=[[n] for n in rep["unplaced"]])


def probe_html(rep: dict[str, Any]) -> bytes:
    controls = [[k, _pct(v), "ok" if v >= rep["control_min"] else "FAILED"] for k, v in rep["controls"].items()]
    rates = [[kind, *(f"{_pct(rep['failure_rates'][f'{kind}/{c}']['failure'])} "
                      f"({_ci(rep['failure_rates'][f'{kind}/{c}']['ci'])})" for c in ("correct", "distorted", "empty"))]
             for kind in ("changed", "only")]
    costs = [[name, c["query"], "—" if c["difference"] is None else f"{100 * c['difference']:+.1f} pp",
              _ci(c["ci"]), str(c["n"])] for name, c in rep["costs"].items()]
    svg = plots.bars({f"{k}/{c}": rep["failure_rates"][f"{k}/{c}"]["failure"] for k in ("changed", "only")
                      for c in ("correct", "distorted", "empty")}, "failure rate")
    return _page("probe.html.j2", "derivaudit probe", read=rep["read"], controls=controls, rates=rates, costs=costs,
                 svg=markup(svg))


def _metric_rows(rows: list[tuple[Any, ...]]) -> list[list[str]]:
    return [[str(x) for x in r if x is not None] for r in rows]


def echo_html(doc: dict[str, Any]) -> bytes:
    """`echo --format html`: metrics, corrections, largest families, and Echo Density per read after
    each correction (logged, and served by FPA)."""
    from ..readpath.echo import share
    from .readrows import echo_rows

    s, fpa = doc["settings"], doc["settings"].get("serve") == "fpa"
    by_read = {r["read_id"]: r for r in doc["reads"]}
    corrections = []
    for c in doc["corrections"]:
        after = [r for r in doc["reads"] if r["conversation_id"] == c["conversation_id"]
                 and r["point"] >= c["point"]]
        series = {way: [(i + 1, share(by_read[r["read_id"]][way], set(c["old"]), s["k"]), ())
                        for i, r in enumerate(after)] for way in (("logged", "fpa") if fpa else ("logged",))}
        corrections.append({"write_id": c["write_id"], "supersedes": ", ".join(c["supersedes"]),
                            "old": ", ".join(c["old"]), "before": c["reads_before"], "after": c["reads_after"],
                            "svg": markup(plots.rate_lines(series, "read after the correction", "Echo Density"))
                            if after else None})
    families = [[f["family"], str(f["records"]), str(f["valid"]), ", ".join(f["write_ids"][:12])]
                for f in doc["families"][:20]]
    return _page("echo.html.j2", "Memory echo", k=s["k"], weights=s["weights"], window=s["window"],
                 gate_rows=gate_rows(doc.get("gates") or []), metrics=_metric_rows(echo_rows(doc)),
                 metric_head=["metric", "what", "logged", *(["served by FPA"] if fpa else [])],
                 corrections=corrections, families=families, **_answers(doc))


def _answers(doc: dict[str, Any]) -> dict[str, Any]:
    """The answer replay's tables for a read-path page (empty without --answers)."""
    from .readrows import ANSWER_HEAD, BAND_HEAD, answer_rows, band_rows, cost_line, peak_lines

    ans = doc.get("answers")
    if not ans:
        return {"answers": None}
    return {"answers": {"head": list(ANSWER_HEAD), "rows": answer_rows(ans), "band_head": list(BAND_HEAD),
                        "bands": band_rows(ans), "notes": [*peak_lines(ans), cost_line(ans)]}}


def overlap_html(doc: dict[str, Any]) -> bytes:
    """`overlap --format html`: metrics, the overlap histogram, and the reads in the risky band."""
    from .readrows import overlap_rows

    lo, hi = doc["settings"]["band"]
    total = sum(doc["histogram"]) or 1
    svg = plots.bars({f"{i / 10:.1f}–{(i + 1) / 10:.1f}": n / total for i, n in enumerate(doc["histogram"])},
                     "share of reads")
    risky = [[r["read_id"], f"{r['top_overlap']:.2f}", r.get("case") or "",
              "" if r["correct"] is None else str(r["correct"]).lower(),
              ", ".join(f"{k}: {v}" for k, v in (r["memtrim"] or {}).get("outcomes", {}).items())]
             for r in doc["reads"] if r["band"] == "middle"]
    return _page("overlap.html.j2", "Query–memory overlap", k=doc["settings"]["k"], lo=lo, hi=hi,
                 gate_rows=gate_rows(doc.get("gates") or []), metrics=_metric_rows(overlap_rows(doc)),
                 svg=markup(svg), risky=risky, **_answers(doc))
