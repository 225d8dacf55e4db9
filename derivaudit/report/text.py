"""Text formats of the report: CSV (one row per metric), Markdown (for a PR comment) and JUnit XML
(one test case per write). Untrusted memory text is made inert in each."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..audit.gold import CATEGORIES, PREDICTED
from ..audit.gold import flat as gold_flat
from ..models.base import DEFAULT_TOP_K
from ..runs import folder as runs
from ..safe import cell, visible
from .build import _num, answer_key, flagged
from .lifecycle import RATE_COLUMNS, rate_rows


def metric_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: the long table behind CSV and Markdown."""
    rows = []
    for k, v in report["scope"].items():
        lo, hi = v["balanced_ci"]
        rows.append({"section": "scope", "metric": k, "setting": "", "balanced": v["balanced"], "ci_low": lo,
                     "ci_high": hi, "weighted": v["weighted"], "n": v["n_writes"]})
    for key, s in (report.get("replay") or {}).get("settings", {}).items():
        for name in ("valid_kept", "unsupported_admitted"):
            lo, hi = s.get(f"{name}_ci") or (None, None)
            rows.append({"section": "replay", "metric": name, "setting": key, "balanced": s.get(name), "ci_low": lo,
                         "ci_high": hi, "weighted": None, "n": s.get("n_pos" if name == "valid_kept" else "n_neg")})
        rows.append({"section": "replay", "metric": "auc", "setting": key, "balanced": _num(s.get("auc")),
                     "ci_low": None, "ci_high": None, "weighted": None, "n": None})
    trust = report.get("trust") or {}
    for k, c in (trust.get("corrected") or {}).items():
        rows.append({"section": "corrected", "metric": k, "setting": "", "balanced": c["corrected"],
                     "ci_low": c["low"], "ci_high": c["high"], "weighted": None, "n": c["labels"]})
        rows.append({"section": "judge", "metric": k, "setting": "", "balanced": c["judge"], "ci_low": None,
                     "ci_high": None, "weighted": None, "n": c["audited"]})
    for row in (trust.get("accuracy_at_coverage") or {}).get("table", []):
        rows.append({"section": "accuracy_at_coverage", "metric": f"top {row['coverage']:.0%}", "setting": "",
                     "balanced": row["accuracy"], "ci_low": None, "ci_high": None, "weighted": None,
                     "n": row["writes"]})
    for name, value in gold_flat(report.get("gold")).items():
        if report.get("gold"):
            rows.append({"section": "gold", "metric": name, "setting": "", "balanced": value, "ci_low": None,
                         "ci_high": None, "weighted": None, "n": report["gold"]["n"]})
    life = report.get("lifecycle") or {}
    for k, v in (life.get("rates") or {}).items():
        lo, hi = v.get("balanced_ci") or (None, None)
        rows.append({"section": "lifecycle", "metric": k, "setting": "", "balanced": v["balanced"], "ci_low": lo,
                     "ci_high": hi, "weighted": v["weighted"], "n": v["n_writes"]})
    for k in ("accuracy", "unjustified_recall", "ambiguous_share"):
        if life.get("gold"):
            rows.append({"section": "lifecycle_gold", "metric": k, "setting": "", "balanced": life["gold"][k],
                         "ci_low": None, "ci_high": None, "weighted": None, "n": life["gold"]["n"]})
    for name, value in report.get("change", {}).items():
        rows.append({"section": "change", "metric": name, "setting": "", "balanced": value, "ci_low": None,
                     "ci_high": None, "weighted": None, "n": None})
    return rows


def to_csv(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    rows = metric_rows(report)
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["section", "metric"], lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: cell(v) for k, v in r.items()})
    return buf.getvalue()


# ---------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def md_escape(text: Any) -> str:
    """Inert in GitHub Markdown and a terminal: controls made visible, HTML entities for <, >, &,
    backslashes before Markdown syntax, one line."""
    s = " ".join(visible(str(text), newlines=True).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def pct(x: Any) -> str:
    x = _num(x)
    return "—" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Sequence[Any] | None) -> str:
    if not ci or ci[0] is None:
        return "—"
    return f"{pct(ci[0])}–{pct(ci[1])}"




def scope_interval_note(report: dict[str, Any]) -> str:
    """What the scope table's interval is."""
    sample = (report.get("trust") or {}).get("sample")
    if sample:
        return (f"95% interval: the store's rate from a random sample of {report['run']['writes']} writes "
                f"(seed {sample.get('seed')})")
    return "every write audited: no sampling interval; the judge's error is in the corrected rates"


def search_note(report: dict[str, Any]) -> str:
    """The search cap and the multi-passage share on the paper's denominator, for every renderer
    (raw text: each escapes it)."""
    s = report.get("search") or {}
    if not s.get("writes"):
        return ""
    mp = (report.get("multi_passage") or {}).get("citation_supported") or {}
    multi = (f" Multi-passage, the paper's way: {mp['spanning']} of {mp['writes']} citation-supported writes need "
             "more than one cited passage." if mp.get("writes") else "")
    return (f"Search cap: {s['capped']} of {s['writes']} writes had more candidates than their expanded view's "
            f"budget (the paper's search-limited); {s['search_limited']} of them with a left-out candidate "
            + (f"at least {s['limit_floor']} x the top score" if s.get("limit_floor") is not None
               else "scoring near the top") + " (derivaudit's flag: such an unsupported write is `unresolved`)."
            + multi)


def trust_rows(report: dict[str, Any], dash: str = "—") -> tuple[list[str], list[list[str]], list[str]]:
    """The corrected rates: header, rows (metric, judge, corrected, 95% CI, labels, labels to halve)
    and the lines that say what they rest on (raw text: each renderer escapes it)."""
    trust = report.get("trust") or {}
    ref = trust.get("reference") or {}
    notes = []
    if trust.get("note"):
        notes.append(trust["note"])
    else:
        notes.append(f"reference labels: {ref.get('labels')} ({ref.get('who')}, {ref.get('file')}); design: "
                     f"{ref.get('design')}. The corrected rate is the judge's rate plus its error measured on the "
                     "labelled writes (prediction-powered inference); its 95% interval holds whatever the judge's "
                     "accuracy, for this store.")
    head = ["metric", "judge", "corrected", "95% CI", "labels", "labels to halve"]
    rows = []
    for k, c in (trust.get("corrected") or {}).items():
        exact = c["labels"] and c["labels"] >= c["audited"] and not trust.get("sample")
        rows.append([k, pct(c["judge"]), pct(c["corrected"]), "exact (every write labelled)" if exact
                     else _ci((c["low"], c["high"])), str(c["labels"]),
                     dash if c.get("labels_to_halve") is None else str(c["labels_to_halve"])])
    widest = max((c for c in (trust.get("corrected") or {}).values() if c.get("low") is not None),
                 key=lambda c: c["high"] - c["low"], default=None)
    if widest and widest.get("labels_to_halve"):
        notes.append(f"about {widest['labels_to_halve'] - widest['labels']} more labels would roughly halve the "
                     f"widest interval ({pct(widest['high'] - widest['low'])} wide)")
    return head, rows, notes


def coverage_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Accuracy of the most confident 25/50/75/100% of the labelled writes."""
    acc = (report.get("trust") or {}).get("accuracy_at_coverage")
    if not acc:
        return [], []
    head = ["most confident", "writes", "accuracy", "confidence at least"]
    rows = [[f"{r['coverage']:.0%}", str(r["writes"]), pct(r["accuracy"]), f"{r['min_confidence']:.2f}"]
            for r in acc["table"]]
    rows.append(["top half / bottom half", str(acc["n"]), f"{pct(acc['top_half'])} / {pct(acc['bottom_half'])}", ""])
    return head, rows


def to_markdown(report: dict[str, Any], gates: Sequence[dict[str, Any]] = (), top: int = 10) -> str:
    r = report["run"]
    lines = [f"## derivaudit report — {r['writes']} writes, {r['conversations']} conversations", ""]
    if gates:
        lines += ["| gate | value | result |", "|---|---|---|"]
        for g in gates:
            v = "n/a" if g["value"] is None else f"{g['value']:.4g}"
            lines.append(f"| `{md_escape(g['expr'])}` | {v} | {'❌ failed' if g['failed'] else '✅ passed'} |")
        lines.append("")
    lines += [f"### Scope (the judge's rates, conversation-balanced; {md_escape(scope_interval_note(report))})", "",
              "| metric | balanced | 95% CI | write-weighted | n writes |", "|---|---:|---|---:|---:|"]
    for k, v in report["scope"].items():
        lines.append(f"| {k} | {pct(v['balanced'])} | {_ci(v['balanced_ci'])} | {pct(v['weighted'])} | "
                     f"{v['n_writes']} |")
    if note := search_note(report):
        lines += ["", md_escape(note)]
    head, rows, notes = trust_rows(report)
    lines += ["", "### Corrected rates", ""] + [md_escape(n) for n in notes]
    if rows:
        lines += ["", "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]  # names and numbers only
    head, rows = coverage_rows(report)
    if rows:
        lines += ["", "### Accuracy at coverage (most confident writes first, against the reference labels)", "",
                  "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]  # names and numbers only
    g = report.get("gold")
    if g:
        lines += ["", "### Labels against gold (`meta.gold`)", "", "| metric | value |", "|---|---:|"]
        lines += [f"| {md_escape(a)} | {md_escape(b)} |" for a, b in gold_rows(g)]
        head, rows = confusion_rows(g)
        lines += ["", "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    rv = report.get("review")
    if rv:
        prim, head, conf = review_rows(rv)
        lines += ["", f"### Human review ({rv['reviewed']} reviewed obligation × view rows)", "",
                  "| primitive | n | agreement | Cohen's κ |", "|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in prim]
        lines += ["", "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in conf]
    rp = report.get("replay")
    if rp:
        lines += ["", f"### Admission replay (operating point {md_escape(rp.get('operating_point'))}, "
                      f"combine {md_escape(rp.get('combine'))}; {md_escape(answer_key(rp))})", "",
                  "| view / evidence | valid kept | 95% CI | unsupported admitted | 95% CI | AUC | pos | neg |",
                  "|---|---:|---|---:|---|---:|---:|---:|"]
        for key, s in rp.get("settings", {}).items():
            auc = _num(s.get("auc"))
            lines.append(f"| {md_escape(key)} | {pct(s.get('valid_kept'))} | {_ci(s.get('valid_kept_ci'))} | "
                         f"{pct(s.get('unsupported_admitted'))} | {_ci(s.get('unsupported_admitted_ci'))} | "
                         f"{'—' if auc is None else f'{auc:.3f}'} | {s.get('n_pos')} | {s.get('n_neg')} |")
    if "change" in report:
        lines += ["", "### Change against the baseline", "", "| metric | baseline | this run | change |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {' | '.join(row)} |" for row in change_rows(report)]
    ag = report.get("agreement", {})
    if ag:
        lines += ["", "### Annotators", "", "| primitive | agreement | Cohen's κ |", "|---|---:|---:|"]
        for p in ("D", "E", "R", "label"):
            if p in ag:
                k = _num(ag[p].get("kappa"))
                lines.append(f"| {p} | {pct(ag[p].get('agreement'))} | {'—' if k is None else f'{k:.2f}'} |")
        lines.append(f"\nAdjudicated {ag.get('adjudicated')} of {ag.get('items')} items "
                     f"({pct(ag.get('adjudication_rate'))}).")
    bad = flagged(Path(r["path"]), report=report)
    if bad:
        lines += ["", f"### Unsupported or contradicted after expansion ({len(bad)})", ""]
        for w in bad[:top]:
            lines.append(f"- **{md_escape(w['expanded_label'])}** `{md_escape(w['write_id'])}`: {md_escape(w['text'])}")
        if len(bad) > top:
            lines.append(f"- … and {len(bad) - top} more")
    lines += lifecycle_markdown(report.get("lifecycle"), top)
    skipped = report.get("skipped_records") or []
    caps = sorted({int((a.get("model") or {}).get("top_logprobs_cap") or DEFAULT_TOP_K)
                   for a in (report["run"].get("annotators") or {}).values() if isinstance(a, dict)}) or [DEFAULT_TOP_K]
    lines += ["", f"Scoring errors: {int(report['metrics']['scoring_errors'] or 0)}; bounded scores (yes or no "
              f"outside the top {'/'.join(map(str, caps))} first tokens): "
              f"{int(report['metrics'].get('bounded_scores') or 0)}; skipped records: {len(skipped)}."]
    return "\n".join(lines) + "\n"


def lifecycle_markdown(life: dict[str, Any] | None, top: int = 10) -> list[str]:
    """The lifecycle part: rates per kind, gold, and the unjustified operations (memory text escaped)."""
    if not life:
        return []
    lines = ["", f"### Lifecycle ({life['operations']} operations; {life['outside_conversation']} made outside "
             "the conversation, counted apart)", "", "| " + " | ".join(RATE_COLUMNS) + " |",
             "|---" + "|---:" * (len(RATE_COLUMNS) - 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rate_rows(life)]  # names and numbers only
    g = life.get("gold")
    if g:
        lines.append(f"\nAgainst gold ({g['n']} operations): accuracy {pct(g['accuracy'])}, unjustified recall "
                     f"{pct(g['unjustified_recall'])}, ambiguous {pct(g['ambiguous_share'])}.")
    bad = life.get("unjustified") or []
    if bad:
        lines += ["", f"Unjustified ({len(bad)}):", ""]
        for u in bad[:top]:
            lines.append(f"- `{md_escape(u['case_id'])}` ({md_escape(u['kind'])}) {md_escape(u['target_text'])}: "
                         f"{md_escape(u['why'])}")
        if len(bad) > top:
            lines.append(f"- … and {len(bad) - top} more")
    return lines


def gold_rows(g: dict[str, Any], dash: str = "—") -> list[list[str]]:
    """[metric, value] for the gold section of every renderer."""
    k = g["kappa"]
    rows = [["writes with a gold category", str(g["n"])],
            ["accuracy (4-way)", f"{pct(g['accuracy'])} ({g['correct']}/{g['n']})"],
            [f"majority-class baseline ({g['baseline']['category']})", pct(g["baseline"]["accuracy"])],
            ["ambiguous share", pct(g["ambiguous"])],
            ["Cohen's κ against gold", dash if k is None else f"{k:.2f}"]]
    fs = g.get("false_supported") or {}
    if fs.get("n"):
        rows.append(["false supported: gold unsupported/contradicted called supported in either view",
                     f"{pct(fs['share'])} ({fs['count']}/{fs['n']}; 95% upper bound {pct(fs['upper95'])})"])
    rows += [[f"recall: {c}", f"{pct(g['recall'][c])} (n={g['support'][c]})" if g["support"][c] else dash]
             for c in CATEGORIES]
    per = g.get("per_conversation") or {}
    if len(per) > 1:
        rows += [[f"accuracy in {c}", f"{pct(v['accuracy'])} ({v['correct']}/{v['n']})"] for c, v in per.items()]
    return rows


def review_rows(m: dict[str, Any], dash: str = "—") -> tuple[list[list[str]], list[str], list[list[str]]]:
    """The human-review section of every renderer: [primitive, n, agreement, κ] rows, then the
    confusion matrix (model label down, human across, agreement within each model label)."""
    prim = [[k, str(v["n"]), pct(v["agreement"]), dash if v["kappa"] is None else f"{v['kappa']:.2f}"]
            for k, v in m["primitives"].items()]
    labels = list(m["confusion"])
    head = ["model ↓ / human →", *labels, "agreement"]
    rows = [[lab, *(str(m["confusion"][lab][h]) for h in labels), pct(m["by_model_label"][lab]["agreement"])]
            for lab in labels]
    return prim, head, rows


def confusion_rows(g: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the confusion matrix: gold categories down, audited categories across."""
    head = ["gold ↓ / audited →", *PREDICTED]
    return head, [[c, *(str(g["confusion"][c][p]) for p in PREDICTED)] for c in CATEGORIES]


def _fmt(x: Any, dash: str = "—", sign: str = "") -> str:
    return dash if x is None else f"{x:{sign}.4g}"


def change_rows(report: dict[str, Any], dash: str = "—") -> list[list[str]]:
    """[metric, baseline, this run, change] for the headline metrics (no per-setting or weighted
    variants), formatted once for every renderer."""
    base, cur = report["baseline"]["metrics"], report["metrics"]
    label = " (across judges)" if report["baseline"].get("across_judges") else ""
    return [[k + label, _fmt(base.get(k), dash), _fmt(cur.get(k), dash), _fmt(d, dash, "+")]
            for k, d in report["change"].items() if "@" not in k and not k.endswith(".weighted")]


# ---------------------------------------------------------------- JUnit


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: Any) -> str:
    return _XML_BAD.sub("\ufffd", visible(str(text), newlines=True))


def to_junit(report: dict[str, Any], gates: Sequence[dict[str, Any]] = ()) -> str:
    """One test case per write, grouped in one suite per conversation: failing when the memory is
    unsupported or contradicted in the expanded view, skipped when it is ambiguous or unresolved; and
    one case per `--fail-if` gate in the suite `derivaudit.gates` (name, threshold, value, and the
    failure message). A run of zero writes is one failing case."""
    import xml.etree.ElementTree as ET

    run = Path(report["run"]["path"])
    labels = runs.read_rows(run, runs.LABELS)
    root = ET.Element("testsuites", name="derivaudit")
    suites: dict[str, ET.Element] = {}
    counts: dict[str, dict[str, int]] = {}
    for r in labels:
        conv = r["conversation_id"]
        if conv not in suites:
            suites[conv] = ET.SubElement(root, "testsuite", name=_x(f"derivaudit.{conv}"))
            counts[conv] = {"tests": 0, "failures": 0, "skipped": 0}
        case = ET.SubElement(suites[conv], "testcase", classname=_x(f"derivaudit.{conv}"), name=_x(r["write_id"]))
        counts[conv]["tests"] += 1
        label = r["expanded_label"]
        obligations = (r.get("expanded") or {}).get("obligations", {})
        detail = (f"expanded view: {label}; citation-only view: {r['citation_label']}\n"
                  + "".join(f"  {oid}: {lab}\n" for oid, lab in obligations.items()))
        if label in ("unsupported", "contradicted") and not r["unresolved"]:
            f = ET.SubElement(case, "failure", message=_x(f"memory is {label} in the expanded view"), type=label)
            f.text = _x(detail)
            counts[conv]["failures"] += 1
        elif r["unresolved"] or label in ("ambiguous", None):
            ET.SubElement(case, "skipped", message=_x("unresolved (search-limited)" if r["unresolved"]
                                                      else f"{label or 'unlabeled'}: no reference verdict"))
            counts[conv]["skipped"] += 1
        out = ET.SubElement(case, "system-out")
        out.text = _x(f"{r['text']}\n{detail}")
    if not labels:  # CI must not pass on nothing
        suite = ET.SubElement(root, "testsuite", name="derivaudit.run")
        case = ET.SubElement(suite, "testcase", classname="derivaudit.run", name="writes")
        ET.SubElement(case, "failure", message="the run has no write: nothing was audited", type="empty")
        suites["derivaudit.run"], counts["derivaudit.run"] = suite, {"tests": 1, "failures": 1, "skipped": 0}
    trust = report.get("trust") or {}
    if trust.get("corrected") or trust.get("note"):
        # the rates as properties of a suite of their own, so a CI viewer shows them beside the cases
        rates = ET.SubElement(root, "testsuite", name="derivaudit.rates")
        suites["derivaudit.rates"], counts["derivaudit.rates"] = rates, {"tests": 0, "failures": 0, "skipped": 0}
        props = ET.SubElement(rates, "properties")
        for k, c in (trust.get("corrected") or {}).items():
            for field in ("judge", "corrected", "low", "high", "labels"):
                ET.SubElement(props, "property", name=f"{k}.{field}", value=_x(c[field]))
        for row in (trust.get("accuracy_at_coverage") or {}).get("table", []):
            ET.SubElement(props, "property", name=f"accuracy_at_coverage.top_{row['coverage']:.0%}",
                          value=_x(row["accuracy"]))
        if trust.get("note"):
            ET.SubElement(props, "property", name="uncorrected", value=_x(trust["note"]))
    if gates:
        suite = ET.SubElement(root, "testsuite", name="derivaudit.gates")
        suites["derivaudit.gates"], counts["derivaudit.gates"] = suite, {"tests": 0, "failures": 0, "skipped": 0}
        for g in gates:
            case = ET.SubElement(suite, "testcase", classname="derivaudit.gates", name=_x(g["expr"]))
            props = ET.SubElement(case, "properties")
            for key in ("metric", "op", "threshold", "value", "on"):
                ET.SubElement(props, "property", name=key, value=_x("" if g.get(key) is None else g[key]))
            counts["derivaudit.gates"]["tests"] += 1
            if g["failed"]:
                value = "no value" if g["value"] is None else f"{g['value']:.4g}"
                msg = (f"gate failed: {g['metric']} = {value} {g['op']} {g['threshold']:.4g}"
                       + (f" ({g['why']})" if g.get("why") else ""))
                ET.SubElement(case, "failure", message=_x(msg), type="gate").text = _x(msg)
                counts["derivaudit.gates"]["failures"] += 1
    for conv, el in suites.items():
        for k, v in counts[conv].items():
            el.set(k, str(v))
    root.set("tests", str(sum(c["tests"] for c in counts.values())))
    root.set("failures", str(sum(c["failures"] for c in counts.values())))
    root.set("skipped", str(sum(c["skipped"] for c in counts.values())))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def markdown_bytes(report: dict[str, Any], gates: Sequence[dict[str, Any]] = ()) -> bytes:
    return to_markdown(report, gates).encode()


def csv_bytes(report: dict[str, Any], gates: Sequence[dict[str, Any]] = ()) -> bytes:
    return to_csv(report).encode()


def junit_bytes(report: dict[str, Any], gates: Sequence[dict[str, Any]] = ()) -> bytes:
    return to_junit(report, gates).encode()
