"""The report as rich tables in a terminal (`--format table`, and the summaries of scan, annotate
and replay). Every untrusted string goes through rich's `escape`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..safe import escape, escape_id
from .build import answer_key, flagged
from .text import (
    change_rows,
    confusion_rows,
    coverage_rows,
    gold_rows,
    review_rows,
    scope_interval_note,
    search_note,
    trust_rows,
)


def print_health(out: Console, cal: dict[str, Any] | None) -> None:
    """Annotator health from calibration: thresholds, TPR at the target FPR, AUC, yes/yes share."""
    for role, h in (cal or {}).items():
        if not h["items"]:
            out.print(f"annotator {escape(role)} calibration (0 items): not calibrated, E and R read at argmax")
        else:
            parts = []
            for k, t in h["thresholds"].items():
                auc = "–" if t["auc"] is None else f"{t['auc']:.2f}"
                tpr = "–" if t["tpr"] is None else f"{t['tpr']:.0%}"
                parts.append(f"{k.upper()} ≥ {float(t['value']):+.2f} (TPR {tpr} at FPR ≤ {h['target_fpr']:.0%}, "
                             f"AUC {auc})")
            yy = "–" if h["yes_yes"] is None else f"{h['yes_yes']:.0%}"
            corr = "–" if h["e_r_correlation"] is None else f"{h['e_r_correlation']:+.2f}"
            out.print(f"annotator {escape(role)} calibration ({h['items']} items): {'; '.join(parts)}; "
                      f"E and R both yes {yy}; E–R score correlation {corr}")
        if h.get("warning"):
            out.print(f"[bold red]WARNING[/bold red]: {escape(h['warning'])}")


def print_review(out: Console, m: dict[str, Any] | None) -> None:
    """Model vs human reviewers: agreement and κ per primitive and label, the confusion matrix."""
    if not m:
        return
    prim, head, conf = review_rows(m, "–")
    t = Table(title=f"Human review: the model's final primitives vs the reviewers' ({m['reviewed']} reviewed "
                    "obligation x view rows)", title_justify="left")
    for col in ("primitive", "n", "agreement", "Cohen's κ"):
        t.add_column(col, justify="left" if col == "primitive" else "right", no_wrap=True)
    for r in prim:
        t.add_row(*r)
    out.print(t)
    c = Table(title="Confusion: model label down, human label across; agreement within each model label",
              title_justify="left")
    for col in head:
        c.add_column(col, justify="left" if col.startswith("model") else "right", no_wrap=True)
    for r in conf:
        c.add_row(*r)
    out.print(c)
    if m.get("by_stratum"):
        out.print("label agreement by stratum: " + ", ".join(
            f"{escape(s)} {_pct(v['agreement'])} (n={v['n']})" for s, v in m["by_stratum"].items()))


def print_rubric(out: Console, m: dict[str, Any] | None) -> None:
    """Rubric stability: agreement between annotator A's two prompt wordings per primitive."""
    if not m:
        return
    t = Table(title=f"Rubric stability: annotator {escape(m['annotator'])} in wording {escape(m['original'])} "
                    f"vs {escape(m['wording'])} ({m['items']} obligation x view items; paper: primitives "
                    "0.81–0.91, typed labels 0.69–0.78)", title_justify="left")
    for col in ("primitive", "n", "agreement", "Cohen's κ"):
        t.add_column(col, justify="left" if col == "primitive" else "right", no_wrap=True)
    rows = list(m["primitives"].items())
    if m.get("typed"):
        rows.append(("typed label, asked directly", m["typed"]))
    for k, v in rows:
        t.add_row(k, str(v["n"]), _pct(v["agreement"]), "–" if v["kappa"] is None else f"{v['kappa']:.2f}")
    out.print(t)


def print_drift(out: Console, d: dict[str, Any]) -> None:
    """Drift per round: balanced rate (95% CI over conversations), weighted rate, counts; examples."""
    t = Table(title=f"Drift per rewriting round (method {escape(d.get('method', 'pair'))}, against the "
                    f"{escape(d['against'])}; round 0 = extraction, against the cited turns); conversation-balanced, "
                    "95% bootstrap CI over conversations",
              title_justify="left")
    for col in ("round", "pairs", "temporal", "temporal weighted", "modality", "modality weighted"):
        t.add_column(col, justify="right", no_wrap=True)
    for rnd, c in d["rounds"].items():
        cells = []
        for kind in ("temporal", "modality"):
            k = c[kind]
            cells += [_pct(k["balanced"]) + _ci(k["ci"]), f"{_pct(k['weighted'])} ({k['drifted']}/{k['judged']})"]
        t.add_row(rnd, str(c["pairs"]), *cells)
    out.print(t)
    from ..built.drift import why

    for kind, rows in d["examples"].items():
        for r in rows:
            out.print(f"{kind} drift, round {r['round']} ({escape(why(r, kind))}): "
                      f"{escape(' '.join(str(r['earlier']).split()))!r} → {escape(str(r['later']))!r}")
    if d.get("expected"):
        out.print("against meta.drift: " + ", ".join(
            f"{k} {_pct(v['agreement'])} (n={v['n']})" for k, v in d["expected"].items()))
    if d["unplaced"]:
        out.print(f"{len(d['unplaced'])} write(s) not in a lineage, e.g. {escape(d['unplaced'][0])}")


def print_families(out: Console, rep: dict[str, Any]) -> None:
    """Acceptance per cell, the valid-invalid gap and the controls, per view."""
    for view, m in rep["summary"].items():
        op = (rep.get("operating_points") or {}).get(view) or {"operating_point": "argmax", "threshold": 0.0}
        at = (f"{op['operating_point']}, threshold {op['threshold']:+.3f}" + (f" from {op['run']}" if op.get("run")
                                                                              else ""))
        t = Table(title=f"Matched families, view {escape(view)} ({rep['families']} families; acceptance at "
                        f"{escape(at)})", title_justify="left")
        for col in ("evidence", "valid accepted", "invalid accepted", "gap", "no relation: valid flipped to reject",
                    "swapped premises: valid / invalid accepted"):
            t.add_column(col, justify="left" if col == "evidence" else "right")
        for ev in ("local", "distributed"):
            c, k = m["cells"], m["controls"]
            gap = m["gap"][ev]
            t.add_row(ev, _pct(c[f"{ev}/valid"]["accepted"]), _pct(c[f"{ev}/invalid"]["accepted"]),
                      "–" if gap is None else f"{gap:+.1%}",
                      f"{_pct(k[f'{ev}/no_relation']['flipped_to_reject'])} (n={k[f'{ev}/no_relation']['n']})",
                      f"{_pct(k[f'{ev}/swapped_premises/valid']['accepted'])} / "
                      f"{_pct(k[f'{ev}/swapped_premises/invalid']['accepted'])}")
        out.print(t)


def print_probe(out: Console, rep: dict[str, Any]) -> None:
    """Controls first (nothing is read unless all pass), then failure rates and the two costs."""
    for name, v in rep["controls"].items():
        out.print(f"control: {name}: {v:.0%} ({'ok' if v >= rep['control_min'] else 'FAILED'}, needs "
                  f"{rep['control_min']:.0%})")
    if not rep["read"]:
        out.print(f"[bold red]not read[/bold red]: the reader failed {len(rep['failed_controls'])} control(s); the "
                  "failure rates below say nothing about admission errors")
    t = Table(title=f"Downstream probe ({rep['items']} items, all option orders x {rep['runs']} runs): failure rate "
                    "per query and slot, 95% bootstrap CI over items", title_justify="left")
    for col in ("query", "correct slot", "distorted slot", "empty slot"):
        t.add_column(col, justify="left" if col == "query" else "right")
    for kind in ("changed", "only"):
        t.add_row(kind, *(_pct(rep["failure_rates"][f"{kind}/{c}"]["failure"]) + _ci(rep["failure_rates"][
            f"{kind}/{c}"]["ci"]) for c in ("correct", "distorted", "empty")))
    out.print(t)
    for name, c in rep["costs"].items():
        d = "–" if c["difference"] is None else f"{c['difference'] * 100:+.1f} pp"
        out.print(f"cost of {name} ({c['query']} query): {d}{_ci(c['ci'])} (n={c['n']})")


def print_gold(out: Console, g: dict[str, Any] | None) -> None:
    """Label accuracy against `meta.gold`: nothing when the log carries no gold."""
    if not g:
        return
    t = Table(title="Labels against gold (meta.gold): is what the audit says true?", title_justify="left")
    t.add_column("metric", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    for a, b in gold_rows(g, dash="–"):
        t.add_row(escape(a), escape(b))
    out.print(t)
    head, rows = confusion_rows(g)
    c = Table(title="Confusion matrix", title_justify="left")
    for i, h in enumerate(head):
        c.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for r in rows:
        c.add_row(*r)
    out.print(c)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None:
        return ""
    return f" ({ci[0]:.0%}–{ci[1]:.0%})"



def print_scope(out: Console, report: dict[str, Any]) -> None:
    t = Table(title="Evidence scope (expanded view unless noted; metric meanings in docs/method.md)",
              title_justify="left")
    t.add_column("metric", no_wrap=True)
    for col in ("conv-balanced", "write-weighted", "difference", "writes"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, v in report["scope"].items():
        diff = "–" if v["difference"] is None else f"{v['difference']:+.3f}"
        t.add_row(name, _pct(v["balanced"]), _pct(v["weighted"]), diff, str(v["n_writes"]))
    out.print(t)
    lw = report["largest_weighting_difference"]
    if lw["metric"]:
        out.print(f"largest balanced-vs-weighted difference: {lw['metric']} {lw['difference']:+.3f}")
    ag = report["agreement"]
    kap = ", ".join(
        f"{k} {_pct(ag[k]['agreement'])} (κ {'–' if ag[k]['kappa'] is None else format(ag[k]['kappa'], '.2f')})"
        for k in ("D", "E", "R", "label"))
    out.print(f"annotator agreement: {kap}; adjudicated {ag['adjudicated']}/{ag['items']} "
              f"({_pct(ag['adjudication_rate'])})")
    print_health(out, report.get("calibration"))
    if report.get("slot_check"):
        out.print(f"slot check (a different time, place, count or person): {escape(report['slot_check'])}")
    print_gold(out, report.get("gold"))
    print_review(out, report.get("review"))
    print_rubric(out, report.get("rubric"))
    dec = report["decomposition"]
    out.print(f"decomposition: {dec['ok']} ok, {dec['retried']} after retry, {dec['fallback']} failed "
              f"(audited as the whole record; failure rate {_pct(dec['failure_rate'])}); "
              f"{dec['obligations']} obligations; scoring errors: {report['scoring_errors']}; bounded scores "
              f"(yes or no outside the top k): {report.get('bounded_scores', 0)}")


def print_replay(out: Console, report: dict[str, Any]) -> None:
    points = sorted({m["operating_point"] for m in report["settings"].values()})
    t = Table(title=f"Admission replay — operating point {report['operating_point']} ({', '.join(points)}), "
                    f"split views combined by {report['combine']}; {answer_key(report)}; "
                    "95% bootstrap CIs over conversations",
              title_justify="left")
    for col in ("setting", "valid kept", "unsupported admitted", "n+/n−", "AUC", "err", "repaired kept"):
        t.add_column(col, justify="left" if col == "setting" else "right", no_wrap=True)
    for name, m in report["settings"].items():
        auc = "–" if m["auc"] is None else f"{m['auc']:.2f}"
        t.add_row(name, _pct(m["valid_kept"]) + _ci(m["valid_kept_ci"]),
                  _pct(m["unsupported_admitted"]) + _ci(m["unsupported_admitted_ci"]),
                  f"{m['n_pos']}/{m['n_neg']}", auc, str(m["scoring_errors"]), f"{m['repaired_kept']}/{m['repaired']}")
    out.print(t)
    reasons = dict.fromkeys(k for m in report["settings"].values() for k in m["excluded"])
    excluded = {k: max(m["excluded"].get(k, 0) for m in report["settings"].values()) for k in reasons}
    out.print("excluded from ground truth (at most, per setting): "
              + ", ".join(f"{escape(k)} {v}" for k, v in excluded.items()))
    for d in report.get("differences", []):
        if d["difference"] is not None:
            out.print(f"{d['metric']}: {escape(d['from'])} → {escape(d['to'])}: {d['difference']:+.1%}{_ci(d['ci'])}"
                      f" (n={d['n']})")
    nz = report.get("noise")
    if nz:
        lv = ", ".join(f"+{k}: mean log-odds {'–' if v['mean_logodds'] is None else format(v['mean_logodds'], '.3f')}"
                       f", admitted {_pct(v['admitted_argmax'])}" for k, v in nz["levels"].items())
        out.print(f"noise probe ({nz['writes']} supported writes; {nz['skipped_too_few_extras']} with too few "
                  f"extras): {lv}")
        if "eligible" in nz:
            out.print("  could be probed per level: " + ", ".join(
                f"+{k}: {v} of {nz['candidates']}" for k, v in nz["eligible"].items()))
            for k, why in nz.get("why_not", {}).items():
                out.print(f"  +{k}: {escape(why)}")


def print_lifecycle(out: Console, life: dict[str, Any] | None, top: int = 10) -> None:
    if not life:
        return
    from .lifecycle import RATE_COLUMNS, rate_rows, unjustified_rows

    out.print(_table(f"Lifecycle: {life['operations']} operations judged against the turns after their target "
                     f"({life['outside_conversation']} made outside the conversation, counted apart)",
                     RATE_COLUMNS, rate_rows(life)))
    g = life.get("gold")
    if g:
        out.print(f"Lifecycle against gold ({g['n']}): accuracy {_pct(g['accuracy'])}, unjustified recall "
                  f"{_pct(g['unjustified_recall'])}, ambiguous {_pct(g['ambiguous_share'])}")
    rows = unjustified_rows(life)
    for case, kind, text, why, turns in rows[:top]:
        out.print(f"  unjustified {escape_id(case)} ({escape(kind)}): {escape(text)} — {escape(why)}"
                  + (f" [turns {escape(turns)}]" if turns else ""))
    if len(rows) > top:
        out.print(f"  ... and {len(rows) - top} more (--format json for all)")


def _table(title: str, head: list[str], rows: list[list[str]]) -> Table:
    """A titled table: the first column left-aligned, the rest right-aligned."""
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(head):
        t.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    return t


def print_trust(out: Console, report: dict[str, Any]) -> None:
    """The corrected rates (or the line saying they are uncorrected) and accuracy at coverage."""
    head, rows, notes = trust_rows(report, dash="–")
    if rows:
        out.print(_table("Corrected rates (the store's, 95% interval)", head, rows))
    for n in notes:
        out.print(escape(n))
    head, rows = coverage_rows(report)
    if rows:
        out.print(_table("Accuracy at coverage (most confident writes first)", head, rows))


def print_report(out: Console, report: dict[str, Any], top: int = 10) -> None:
    r = report["run"]
    out.print(f"[bold]derivaudit report[/bold] — {r['writes']} writes, {r['conversations']} conversations, "
              f"{escape(str(r['path']))}")
    t = Table(title=f"Scope: the judge's rates, conversation-balanced, write-weighted beside them; "
                    f"{scope_interval_note(report)}", title_justify="left")
    t.add_column("metric", no_wrap=True)
    for col in ("balanced", "95% CI", "write-weighted", "writes"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, v in report["scope"].items():
        lo, hi = v["balanced_ci"]
        t.add_row(name, _pct(v["balanced"]), "–" if lo is None else f"{lo:.1%}–{hi:.1%}", _pct(v["weighted"]),
                  str(v["n_writes"]))
    out.print(t)
    if note := search_note(report):
        out.print(escape(note), style="dim")
    print_trust(out, report)
    print_gold(out, report.get("gold"))
    print_lifecycle(out, report.get("lifecycle"), top)
    if report.get("replay"):
        print_replay(out, report["replay"])
    if "change" in report:
        c = Table(title=f"Change against the baseline {escape(report['baseline']['run']['path'])}",
                  title_justify="left")
        for col in ("metric", "baseline", "this run", "change"):
            c.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
        for row in change_rows(report, dash="–"):
            c.add_row(*row)
        out.print(c)
    bad = flagged(Path(r["path"]), report=report)
    if bad:
        out.print(f"[bold]Unsupported or contradicted after expansion[/bold] ({len(bad)}):")
        for w in bad[:top]:
            text = escape(" ".join(w["text"].split()))
            out.print(f"  {escape(w['expanded_label'])} {escape_id(w['write_id'])}: {text}")
        if len(bad) > top:
            out.print(f"  ... and {len(bad) - top} more (--format csv or export for all)")


def print_check(out: Console, doc: dict[str, Any]) -> None:
    """`check`'s verdict on one record (`gate.check_document`)."""
    if doc["error"]:
        out.print(f"[red]scoring error[/red]: {escape(doc['error'])}; top tokens: {escape(str(doc['top']))}")
        return
    t = Table(show_header=False)
    t.add_row("record", escape(doc["record"]))
    t.add_row("view", escape(doc["view"]))
    t.add_row("log-odds", f"{doc['logodds']:+.3f}" + (" (bounded)" if doc["bounded"] else ""))
    t.add_row("log p(yes) / log p(no)", f"{doc['logp_yes']:.3f} / {doc['logp_no']:.3f}")
    t.add_row("decision (argmax)", doc["decision"])
    t.add_row("top tokens", escape(", ".join(f"{tok!r} {lp:.2f}" for tok, lp in doc["top"])))
    out.print(t)


def print_cache_stats(out: Console, st: dict[str, Any]) -> None:
    out.print(f"{escape(st['path'])}: {st['entries']} entries, {st['bytes'] / 1e6:.1f} MB")
    t = Table("backend", "model", "kind", "entries")
    for r in st["by_model"]:
        t.add_row(escape(r["backend"]), escape(r["model"]), escape(r["kind"]), str(r["entries"]))
    out.print(t)


def _passages_table(title: str, passages: tuple[Any, ...]) -> Table:
    from ..log import timeref

    t = Table(title=title, title_justify="left", show_lines=False, expand=True)
    t.add_column("turn", no_wrap=True)
    t.add_column("speaker", no_wrap=True)
    t.add_column("time", no_wrap=True)
    t.add_column("text", ratio=1)
    for p in passages:
        text = timeref.annotate(p.text, p.time)  # as the evidence block shows it
        t.add_row(escape_id(p.turn_id), escape(p.speaker), escape(p.time or ""), escape(text))
    return t


def print_views(out: Console, v: Any) -> None:
    """One write's two evidence views (`views --format table`)."""
    w = v.write
    flag = " [yellow](search-limited)[/yellow]" if v.search_limited else ""
    out.rule(f"write {escape_id(w.write_id)} · conversation {escape_id(w.conversation_id)}{flag}")
    out.print(f"[bold]memory:[/bold] {escape(w.text)}")
    out.print(_passages_table(f"citation-only view ({len(v.citation_only)} passages)", v.citation_only))
    out.print(_passages_table(f"expanded-history view ({len(v.expanded)} passages)", v.expanded))
    out.print(f"[dim]retrieved by BM25: {escape(', '.join(v.retrieved) or 'none')}[/dim]")
