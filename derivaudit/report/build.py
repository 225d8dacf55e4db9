"""Building the report document: one dict per run (or pair of runs) that follows
`schemas/report.v1.schema.json`. The renderers only present this dict, so every format shows the
same numbers; gates (`--fail-if`) read its flat `metrics` map, documented in METRICS."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..audit.gold import HELP as GOLD_HELP
from ..audit.gold import flat as gold_flat
from ..audit.gold import gold_metrics
from ..audit.labels import answers
from ..rates.stats import SCOPE_HELP, group_counts, rates
from ..rates.trust import (
    CORRECTED,
    accuracy_at_coverage,
    category_of,
    corrected,
    judge_sampling,
    reference_labels,
    write_confidence,
)
from ..review.obligations import review_metrics
from ..runs import folder as runs
from ..runs.folder import RunError
from ..safe import dumps as json_dumps
from .lifecycle import HELP as LIFECYCLE_HELP
from .lifecycle import flat as lifecycle_flat
from .lifecycle import summarize as summarize_lifecycle

REPORT_SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).parent.parent / "schemas" / "report.v1.schema.json"
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
    "bounded_scores": "scores the top-k cap decided (yes or no outside the top k, its log-probability bounded by "
                      "the k-th), scan plus replay",
    "skipped_records": "input records skipped as invalid",
    "writes": "writes in the run",
    "multi_passage_cited": "share of citation-supported writes whose citation view's minimal subsets span > 1 "
                           "passage (the paper's denominator; `multi_passage` is over expanded-supported writes)",
    "search_capped": "share of writes whose expanded search had more candidates than its budget (the paper's "
                     "search-limited); `search_limited` among them is derivaudit's flag (a left-out candidate "
                     "scoring >= limit_floor x the top)",
    **GOLD_HELP,
    **LIFECYCLE_HELP,
}
# suffixes of the corrected scope metrics: `unsupported.upper` and so on
TRUST_SUFFIXES = {
    "judge": "the judge's own rate over the store (conversation-balanced)",
    "corrected": "the rate corrected by reference labels (prediction-powered; none without labels)",
    "lower": "lower end of the 95% interval (corrected; else the sampling interval of a --sample scan)",
    "upper": "upper end of the 95% interval (corrected; else the sampling interval of a --sample scan)",
}


ReportError = RunError  # bad input or usage: exit code 2


# ---------------------------------------------------------------- building


def build(run: str | Path, *, min_confidence: float | None = None) -> dict[str, Any]:
    """The report of one run folder (scan required, replay optional). `min_confidence`: list only
    the writes whose label is at least this confident (rates always count every write)."""
    run = Path(run)
    runs.require(run, (runs.LABELS, runs.SCOPE, runs.META), f"run `derivaudit scan LOG.jsonl -o {run}` first")
    meta = runs.load_meta(run)
    labels = runs.read_rows(run, runs.LABELS)
    scan_report = runs.read_json(run, runs.SCOPE)
    labeled = [r for r in labels if r["citation_label"] and r["expanded_label"]]
    scope = rates(labeled)
    prim_rows = runs.read_rows_if(run, runs.PRIMITIVES)  # read once: confidence and multi-passage both use it
    trust = _trust(run, meta, labeled, prim_rows, min_confidence)
    for k, v in scope.items():
        est = trust["judge_sampling"].get(k)
        v["balanced_ci"] = [est["low"], est["high"]] if est else [None, None]
        v["meaning"] = SCOPE_HELP[k]
    diffs = [(k, v["difference"]) for k, v in scope.items() if v["difference"] is not None]
    largest = max(diffs, key=lambda kv: abs(kv[1])) if diffs else (None, None)
    replay = runs.read_json_if(run, runs.REPLAY)
    if replay is not None and not isinstance(replay.get("settings"), dict):
        raise ReportError(f"{runs.path(run, runs.REPLAY)}: no 'settings' table; rerun `derivaudit replay {run}`")
    report: dict[str, Any] = {
        "schema": "derivaudit-report",
        "schema_version": REPORT_SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "derivaudit": __version__,
        "run": {**_run_meta(run, meta, labels), "replay_model": (replay or {}).get("model")},
        "scope": scope,
        "largest_weighting_difference": {"metric": largest[0], "difference": largest[1]},
        "per_conversation": _per_conversation(labeled),
        "agreement": scan_report.get("agreement", {}),
        "decomposition": scan_report.get("decomposition", {}),
        "labels": scan_report.get("labels", {}),
        "gold": gold_metrics(labels),
        "review": review_metrics(run),
        "rubric": runs.read_json_if(run, runs.RUBRIC),
        "scoring_errors": {"scan": scan_report.get("scoring_errors", 0),
                           "replay": {k: v.get("scoring_errors", 0)
                                      for k, v in (replay or {}).get("settings", {}).items()},
                           "bounded": {"scan": scan_report.get("bounded_scores", 0),
                                       "replay": {k: v.get("bounded_scores", 0)
                                                  for k, v in (replay or {}).get("settings", {}).items()}}},
        "skipped_records": meta.get("skipped_records", []),
        "replay": replay,
        "lifecycle": summarize_lifecycle(runs.read_rows_if(run, runs.LIFECYCLE)),
        "search": search_caps(run, labeled, (meta.get("evidence") or {}).get("limit_floor")),
        "multi_passage": multi_passage_counts(labeled, prim_rows),
        "trust": trust,
        "interval": {"level": 0.95, "method": INTERVAL_METHOD},
    }
    report["metrics"] = flat_metrics(report)
    return report


def search_caps(run: Path, labeled: list[dict[str, Any]], floor: float | None) -> dict[str, Any]:
    """How many writes' expanded search hit its cap (more candidates than its budget: the paper's
    search-limited flag) and how many of those derivaudit flags (a left-out candidate scoring at
    least `floor` times the top, what makes an unsupported write `unresolved`)."""
    ids = {r["write_id"] for r in labeled}
    rows = [r for r in runs.read_rows_if(run, runs.VIEWS) if r["write_id"] in ids]
    prov = [r.get("provenance") or {} for r in rows]
    capped = sum(1 for p in prov if (p.get("candidates") or 0) > len(p.get("retrieved") or ()))
    return {"writes": len(rows), "capped": capped, "search_limited": sum(bool(r.get("search_limited")) for r in rows),
            "limit_floor": floor}


def multi_passage_counts(labeled: list[dict[str, Any]], prim_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Writes whose minimal implying subsets span more than one passage, on the paper's denominator
    (citation-supported writes, their citation view) beside the scope table's (expanded-supported
    writes, their expanded view)."""
    used: dict[tuple[str, str], set[int]] = {}
    for r in prim_rows:
        used.setdefault((r["write_id"], r["view"]), set()).update(answers(r).get("e_subset") or ())
    out: dict[str, Any] = {}
    for name, label, view in (("citation_supported", "citation_label", "citation_only"),
                              ("expanded_supported", "expanded_label", "expanded")):
        ws = [r["write_id"] for r in labeled if r[label] == "supported"]
        out[name] = {"writes": len(ws), "spanning": sum(len(used.get((w, view), ())) > 1 for w in ws)}
    return out


INTERVAL_METHOD = ("design-based: the store's rate, from the writes derivaudit drew (scan --sample) and the "
                   "labelled ones (review sample, meta.gold); no interval where every write was audited and none "
                   "labelled (the judge's rate is then exact, its error unknown)")


def _trust(run: Path, meta: dict[str, Any], labeled: list[dict[str, Any]], prim_rows: list[dict[str, Any]],
           min_confidence: float | None
           ) -> dict[str, Any]:
    """Corrected rates, the judge's sampling intervals, per-write confidence, accuracy at coverage."""
    ref = reference_labels(run, labeled)
    conf = write_confidence(labeled, prim_rows, meta.get("calibration") or {})
    n_ref = sum(1 for r in labeled if r["write_id"] in ref["labels"])
    listed = [{"write_id": r["write_id"], "conversation_id": r["conversation_id"], "category": category_of(r),
               "confidence": conf.get(r["write_id"]), "reference": ref["labels"].get(r["write_id"])}
              for r in labeled]
    shown = [w for w in listed if min_confidence is None
             or (w["confidence"] is not None and w["confidence"] >= min_confidence)]
    note = None
    if not n_ref:
        budget = max(20, min(100, len(labeled) // 10))
        note = (f"rates are the judge's own, uncorrected: label a random few writes to correct them "
                f"(`derivaudit review sample {run} --budget {budget} -o review.csv`, fill in the category "
                f"column, `derivaudit review import {run} review.csv`)")
    return {
        "reference": {"who": ref["who"], "file": ref["file"], "labels": n_ref, "design": ref["design"]},
        "sample": (meta.get("selection") or {}).get("sample"),
        "weighting": "conversation-balanced",
        "corrected": corrected(meta, labeled, ref) if n_ref else None,
        "judge_sampling": judge_sampling(meta, labeled),
        "note": note,
        "confidence_scale": "calibration items" if any(c is not None for c in conf.values()) else None,
        "accuracy_at_coverage": accuracy_at_coverage(labeled, conf, ref["labels"]),
        "min_confidence": min_confidence,
        "writes": shown,
        "writes_hidden": len(listed) - len(shown),
    }


def _run_meta(run: Path, meta: dict[str, Any], labels: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "path": str(run),
        "derivaudit": meta.get("derivaudit"),
        "input_files": meta.get("input_files", []),
        "input_sha": meta.get("input_sha"),
        "selection": meta.get("selection", {}),
        "annotators": meta.get("annotators", {}),
        "evidence": meta.get("evidence", {}),
        "config": meta.get("config"),
        "timings": meta.get("timings", {}),
        "usage": meta.get("usage", []),
        "writes": len(labels),
        "conversations": len({r["conversation_id"] for r in labels}),
        "scanned_at": runs.modified_at(run, runs.LABELS),
        "replayed_at": runs.modified_at(run, runs.REPLAY),
    }


def _per_conversation(labeled: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    groups, sizes, counts = group_counts(labeled)
    return [{"conversation_id": g, "writes": size,
             **{k: (float(hits[i] / n[i]) if n[i] > 0 else None) for k, (hits, n) in counts.items()}}
            for i, (g, size) in enumerate(zip(groups, sizes, strict=True))]


def answer_key(replay: dict[str, Any]) -> str:
    """Which labels a replay scored its settings against (older replays: each setting's own view)."""
    ref = replay.get("reference")
    if not ref:
        return "answer key: each setting's own view (replayed by an older derivaudit; rerun replay)"
    return f"answer key: {ref['labels']} labels of the {ref['view']} view, for every setting"


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
    trust = report.get("trust") or {}
    for k in CORRECTED:
        c = (trust.get("corrected") or {}).get(k) or {}
        s = (trust.get("judge_sampling") or {}).get(k) or {}
        m[f"{k}.judge"] = c.get("judge", s.get("judge", report["scope"].get(k, {}).get("balanced")))
        m[f"{k}.corrected"] = c.get("corrected")
        m[f"{k}.lower"] = c.get("low", s.get("low"))
        m[f"{k}.upper"] = c.get("high", s.get("high"))
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
    m["bounded_scores"] = float(se["bounded"]["scan"] + sum(se["bounded"]["replay"].values()))
    m["skipped_records"] = float(len(report["skipped_records"]))
    m["writes"] = float(report["run"]["writes"])
    cited = (report.get("multi_passage") or {}).get("citation_supported") or {}
    m["multi_passage_cited"] = cited["spanning"] / cited["writes"] if cited.get("writes") else None
    search = report.get("search") or {}
    m["search_capped"] = search["capped"] / search["writes"] if search.get("writes") else None
    m.update(gold_flat(report.get("gold")))
    m.update(lifecycle_flat(report.get("lifecycle")))
    return m


def judges(report: dict[str, Any]) -> dict[str, Any]:
    """The models whose answers a report's figures are: each annotator role's, and the replay's."""
    run = report["run"]
    return {"annotators": {role: (a or {}).get("model") for role, a in sorted((run.get("annotators") or {}).items())},
            "replay": run.get("replay_model")}


def _judge_names(j: dict[str, Any]) -> str:
    models = {str((m or {}).get("model")) for m in [*j["annotators"].values(), j["replay"]] if m}
    return ", ".join(sorted(models)) or "no recorded model"


def compare(current: dict[str, Any], baseline: dict[str, Any], *, across_judges: bool = False) -> dict[str, Any]:
    """Attach the baseline's metrics and the change (current − baseline) of every shared metric.
    Runs judged by different models are refused (ReportError): a change between judges is not a
    change in the store (DerivAudit compares within one verifier). `across_judges` compares them
    anyway, and every difference is then labelled as one across judges."""
    mine, theirs = judges(current), judges(baseline)
    if mine != theirs and not across_judges:
        raise ReportError(f"the baseline {baseline['run']['path']} was judged by {_judge_names(theirs)}, this run "
                          f"by {_judge_names(mine)}: a difference between two judges is not a change in the "
                          "store; compare runs of one judge, or pass --across-judges to compare anyway (every "
                          "difference then labelled across judges)")
    a, b = current["metrics"], baseline["metrics"]
    change = {k: (a[k] - b[k] if a.get(k) is not None and b.get(k) is not None else None) for k in a if k in b}
    current["baseline"] = {"run": baseline["run"], "metrics": b}
    if mine != theirs:
        current["baseline"]["across_judges"] = {"this_run": mine, "baseline": theirs}
    current["change"] = change
    return current


def to_json(report: dict[str, Any]) -> bytes:
    return json_dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def validate(report: dict[str, Any]) -> None:
    """Check a report against the packaged JSON Schema (raises jsonschema.ValidationError)."""
    import jsonschema

    schema = orjson.loads(SCHEMA_FILE.read_bytes())
    jsonschema.validate(orjson.loads(to_json(report)), schema)


def flagged(run: Path, limit: int | None = None, report: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Writes unsupported or contradicted in the expanded view (what JUnit fails and reports list);
    with a `report` built with `min_confidence`, only those at least that confident."""
    out = [r for r in runs.read_rows(run, runs.LABELS)
           if r["expanded_label"] in ("unsupported", "contradicted") and not r["unresolved"]]
    trust = (report or {}).get("trust") or {}
    if trust.get("min_confidence") is not None:
        shown = {w["write_id"] for w in trust.get("writes", [])}
        out = [r for r in out if r["write_id"] in shown]
    return out[:limit] if limit is not None else out


def json_bytes(report: dict[str, Any], gates: Sequence[dict[str, Any]] = ()) -> bytes:
    return to_json(report)
