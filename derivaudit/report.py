"""`report`: one document per run (or per pair of runs) that people and CI take away.

`build()` gathers a run folder into one dict that follows `schemas/report.v1.schema.json`; the
renderers below (table, Markdown, CSV, JUnit, HTML) only present that dict, so every format shows the
same numbers. Gates (`--fail-if`) read the flat `metrics` map, documented in METRICS.
"""

from __future__ import annotations

import csv
import io
import operator
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from . import __version__
from .export import neutralise
from .scan import load_meta, read_jsonl
from .stats import SCOPE_HELP, cluster_bootstrap_ci, group_counts, rates

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).parent / "schemas" / "report.v1.schema.json"
GATE_SETTINGS = ("obligation/expanded", "holistic/expanded")  # the first present one backs the bare replay names

# name -> what it means; scope names are conversation-balanced shares (`<name>.weighted` for write-weighted)
METRICS: dict[str, str] = {
    **{k: v for k, v in SCOPE_HELP.items()},
    "unsupported_admitted": "unsupported memories admitted by the gate setting (obligation/expanded, else "
                            "holistic/expanded); `unsupported_admitted@VIEW/EVIDENCE` for another setting",
    "valid_kept": "valid memories kept by the gate setting; `valid_kept@VIEW/EVIDENCE` likewise",
    "auc": "ROC AUC of the gate setting's log-odds; `auc@VIEW/EVIDENCE` likewise",
    "kappa_label": "Cohen's kappa of annotators A and B on obligation labels",
    "agreement_label": "share of obligation labels on which A and B agree",
    "adjudication_rate": "share of obligation items sent to the adjudicator",
    "decomposition_failure_rate": "share of writes whose decomposition fell back to the whole record",
    "scoring_errors": "scoring errors in the scan plus those in the replay",
    "skipped_records": "input records skipped as invalid",
    "writes": "writes in the run",
}


class ReportError(ValueError):
    """Bad input or usage: exit code 2."""


# ---------------------------------------------------------------- building


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e})") from e


def build(run: str | Path, *, reps: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The report of one run folder (scan required, replay optional)."""
    run = Path(run)
    if not run.is_dir():
        raise ReportError(f"{run}: no such run folder")
    for name in ("labels.jsonl", "scope.json", "meta.json"):
        if not (run / name).exists():
            raise ReportError(f"{run / name} is missing: run `derivaudit scan LOG.jsonl -o {run}` first")
    meta = load_meta(run)
    labels = read_jsonl(run / "labels.jsonl")
    scan_report = _read_json(run / "scope.json")
    labeled = [r for r in labels if r["citation_label"] and r["expanded_label"]]
    scope = rates(labeled)
    cis = cluster_bootstrap_ci(labeled, reps=reps, seed=seed)
    for k, v in scope.items():
        v["balanced_ci"] = list(cis[k])
        v["meaning"] = SCOPE_HELP[k]
    diffs = [(k, v["difference"]) for k, v in scope.items() if v["difference"] is not None]
    largest = max(diffs, key=lambda kv: abs(kv[1])) if diffs else (None, None)
    replay = _read_json(run / "replay.json") if (run / "replay.json").exists() else None
    if replay is not None and not isinstance(replay.get("settings"), dict):
        raise ReportError(f"{run / 'replay.json'}: no 'settings' table; rerun `derivaudit replay {run}`")
    report: dict[str, Any] = {
        "schema": "derivaudit-report",
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "derivaudit": __version__,
        "run": {**_run_meta(run, meta, labels), "replay_model": (replay or {}).get("model")},
        "scope": scope,
        "largest_weighting_difference": {"metric": largest[0], "difference": largest[1]},
        "per_conversation": _per_conversation(labeled),
        "agreement": scan_report.get("agreement", {}),
        "decomposition": scan_report.get("decomposition", {}),
        "labels": scan_report.get("labels", {}),
        "scoring_errors": {"scan": scan_report.get("scoring_errors", 0),
                           "replay": {k: v.get("scoring_errors", 0)
                                      for k, v in (replay or {}).get("settings", {}).items()}},
        "skipped_records": meta.get("skipped_records", []),
        "replay": replay,
        "bootstrap": {"reps": reps, "seed": seed, "unit": "conversation", "interval": 0.95},
    }
    report["metrics"] = flat_metrics(report)
    return report


def _run_meta(run: Path, meta: dict[str, Any], labels: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def stamp(name: str) -> str | None:
        p = run / name
        return datetime.fromtimestamp(p.stat().st_mtime, UTC).isoformat(timespec="seconds") if p.exists() else None

    return {
        "path": str(run),
        "derivaudit": meta.get("derivaudit"),
        "input_files": meta.get("input_files", []),
        "input_sha": meta.get("input_sha"),
        "selection": meta.get("selection", {}),
        "annotators": meta.get("annotators", {}),
        "evidence": meta.get("evidence", {}),
        "cli": meta.get("cli"),
        "timings": meta.get("timings", {}),
        "usage": meta.get("usage", []),
        "writes": len(labels),
        "conversations": len({r["conversation_id"] for r in labels}),
        "scanned_at": stamp("labels.jsonl"),
        "replayed_at": stamp("replay.json"),
    }


def _per_conversation(labeled: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    groups, sizes, counts = group_counts(labeled)
    return [{"conversation_id": g, "writes": size,
             **{k: (float(hits[i] / n[i]) if n[i] > 0 else None) for k, (hits, n) in counts.items()}}
            for i, (g, size) in enumerate(zip(groups, sizes, strict=True))]


def gate_setting(report: dict[str, Any]) -> str | None:
    settings = (report.get("replay") or {}).get("settings", {})
    return next((s for s in GATE_SETTINGS if s in settings), next(iter(settings), None))


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None if x is None else float(x)
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, str):  # infinities are written as strings in replay.json
        try:
            return float(x)
        except ValueError:
            return None
    return None


def flat_metrics(report: dict[str, Any]) -> dict[str, float | None]:
    """The names `--fail-if` accepts, each with this run's value (None when the run cannot tell)."""
    m: dict[str, float | None] = {}
    for k, v in report["scope"].items():
        m[k] = v["balanced"]
        m[f"{k}.weighted"] = v["weighted"]
    settings = (report.get("replay") or {}).get("settings", {})
    gate = gate_setting(report)
    for key, s in settings.items():
        for name in ("unsupported_admitted", "valid_kept", "auc"):
            m[f"{name}@{key}"] = _num(s.get(name))
    if gate:
        for name in ("unsupported_admitted", "valid_kept", "auc"):
            m[name] = m[f"{name}@{gate}"]
    ag = report.get("agreement", {})
    m["kappa_label"] = _num(ag.get("label", {}).get("kappa"))
    m["agreement_label"] = _num(ag.get("label", {}).get("agreement"))
    m["adjudication_rate"] = _num(ag.get("adjudication_rate"))
    m["decomposition_failure_rate"] = _num(report.get("decomposition", {}).get("failure_rate"))
    se = report["scoring_errors"]
    m["scoring_errors"] = float(se["scan"] + sum(se["replay"].values()))
    m["skipped_records"] = float(len(report["skipped_records"]))
    m["writes"] = float(report["run"]["writes"])
    return m


def compare(current: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Attach the baseline's metrics and the change (current − baseline) of every shared metric."""
    a, b = current["metrics"], baseline["metrics"]
    change = {k: (a[k] - b[k] if a.get(k) is not None and b.get(k) is not None else None) for k in a if k in b}
    current["baseline"] = {"run": baseline["run"], "metrics": b}
    current["change"] = change
    return current


# ---------------------------------------------------------------- gates

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
_GATE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:@[\w.-]+/[\w.-]+)?)\s*(<=|>=|==|!=|<|>)\s*([-+]?\d*\.?\d+(?:e[-+]?\d+)?)"
                   r"\s*(%?)\s*$", re.IGNORECASE)


def parse_gate(expr: str) -> tuple[str, str, float]:
    m = _GATE.match(expr)
    if not m:
        raise ReportError(f"--fail-if {expr!r}: expected NAME OP NUMBER, e.g. \"unsupported_admitted>0.25\" "
                          f"(OP one of < <= > >= == !=; NUMBER may end in %)")
    name, op, value, pct = m.groups()
    base = name.split("@", 1)[0].removesuffix(".weighted")
    if base not in METRICS:
        raise ReportError(f"--fail-if {expr!r}: unknown metric {name!r} (known: {', '.join(METRICS)})")
    return name, op, float(value) / (100 if pct else 1)


def evaluate_gates(report: dict[str, Any], exprs: Sequence[str]) -> list[dict[str, Any]]:
    """Each gate fails when its expression holds. With a baseline the gate reads the change. A
    metric this run cannot tell (no replay, no negatives) fails its gate: CI should not pass on
    missing evidence. An unknown name or a setting not in the run is a usage error."""
    parsed = [(e, *parse_gate(e)) for e in exprs]
    values = report.get("change", report["metrics"])
    out = []
    for expr, name, op, threshold in parsed:
        if name not in values:
            known = sorted(k for k in values if "@" in k)
            raise ReportError(f"--fail-if {expr!r}: {name!r} is not in this run"
                              + (f" (settings: {', '.join(known)})" if "@" in name and known else
                                 " (run `derivaudit replay` first)" if "@" in name or name in
                                 ("unsupported_admitted", "valid_kept", "auc") else ""))
        value = values[name]
        failed = True if value is None else _OPS[op](value, threshold)
        out.append({"expr": expr, "metric": name, "op": op, "threshold": threshold, "value": value,
                    "on": "change" if "change" in report else "run", "failed": failed,
                    "why": "no value in this run" if value is None else None})
    return out


# ---------------------------------------------------------------- JSON and CSV


def to_json(report: dict[str, Any]) -> bytes:
    return orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def validate(report: dict[str, Any]) -> None:
    """Check a report against the packaged JSON Schema (raises jsonschema.ValidationError)."""
    import jsonschema

    schema = orjson.loads(SCHEMA_FILE.read_bytes())
    jsonschema.validate(orjson.loads(to_json(report)), schema)


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
        w.writerow({k: neutralise(v) for k, v in r.items()})
    return buf.getvalue()


# ---------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def md_escape(text: Any) -> str:
    """Inert in GitHub Markdown: HTML entities for <, >, &, backslashes before Markdown syntax, one line."""
    s = " ".join(str(text).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def pct(x: Any) -> str:
    x = _num(x)
    return "—" if x is None else f"{100 * x:.1f}%"


def _ci(ci: Sequence[Any] | None) -> str:
    if not ci or ci[0] is None:
        return "—"
    return f"{pct(ci[0])}–{pct(ci[1])}"


def flagged(run: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Writes unsupported or contradicted in the expanded view (what JUnit fails and reports list)."""
    out = [r for r in read_jsonl(run / "labels.jsonl")
           if r["expanded_label"] in ("unsupported", "contradicted") and not r["unresolved"]]
    return out[:limit] if limit is not None else out


def to_markdown(report: dict[str, Any], gates: Sequence[dict[str, Any]] = (), top: int = 10) -> str:
    r = report["run"]
    lines = [f"## derivaudit report — {r['writes']} writes, {r['conversations']} conversations", ""]
    if gates:
        lines += ["| gate | value | result |", "|---|---|---|"]
        for g in gates:
            v = "n/a" if g["value"] is None else f"{g['value']:.4g}"
            lines.append(f"| `{md_escape(g['expr'])}` | {v} | {'❌ failed' if g['failed'] else '✅ passed'} |")
        lines.append("")
    lines += ["### Scope (conversation-balanced, 95% bootstrap interval over conversations)", "",
              "| metric | balanced | 95% CI | write-weighted | n writes |", "|---|---:|---|---:|---:|"]
    for k, v in report["scope"].items():
        lines.append(f"| {k} | {pct(v['balanced'])} | {_ci(v['balanced_ci'])} | {pct(v['weighted'])} | "
                     f"{v['n_writes']} |")
    rp = report.get("replay")
    if rp:
        lines += ["", f"### Admission replay (operating point {md_escape(rp.get('operating_point'))}, "
                      f"combine {md_escape(rp.get('combine'))})", "",
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
    bad = flagged(Path(r["path"]))
    if bad:
        lines += ["", f"### Unsupported or contradicted after expansion ({len(bad)})", ""]
        for w in bad[:top]:
            lines.append(f"- **{md_escape(w['expanded_label'])}** `{md_escape(w['write_id'])}`: {md_escape(w['text'])}")
        if len(bad) > top:
            lines.append(f"- … and {len(bad) - top} more")
    skipped = report.get("skipped_records") or []
    lines += ["", f"Scoring errors: {int(report['metrics']['scoring_errors'] or 0)}; skipped records: {len(skipped)}."]
    return "\n".join(lines) + "\n"


def _fmt(x: Any, dash: str = "—", sign: str = "") -> str:
    return dash if x is None else f"{x:{sign}.4g}"


def change_rows(report: dict[str, Any], dash: str = "—") -> list[list[str]]:
    """[metric, baseline, this run, change] for the headline metrics (no per-setting or weighted
    variants), formatted once for every renderer."""
    base, cur = report["baseline"]["metrics"], report["metrics"]
    return [[k, _fmt(base.get(k), dash), _fmt(cur.get(k), dash), _fmt(d, dash, "+")]
            for k, d in report["change"].items() if "@" not in k and not k.endswith(".weighted")]


# ---------------------------------------------------------------- JUnit


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: Any) -> str:
    return _XML_BAD.sub("\ufffd", str(text))


def to_junit(report: dict[str, Any]) -> str:
    """One test case per write, grouped in one suite per conversation: failing when the memory is
    unsupported or contradicted in the expanded view, skipped when it is ambiguous or unresolved."""
    import xml.etree.ElementTree as ET

    run = Path(report["run"]["path"])
    labels = read_jsonl(run / "labels.jsonl")
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
    for conv, el in suites.items():
        for k, v in counts[conv].items():
            el.set(k, str(v))
    root.set("tests", str(sum(c["tests"] for c in counts.values())))
    root.set("failures", str(sum(c["failures"] for c in counts.values())))
    root.set("skipped", str(sum(c["skipped"] for c in counts.values())))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
