"""Rubric stability (DerivAudit App. B: agreement between rubric wordings, 0.81–0.91 per primitive):
annotator A's D/E/R primitives asked again with the other prompt wording, on the same model, items
and protocol (calibrated on that wording), and the agreement between the two wordings.

    RUN/rubric_<wording>.jsonl  A's primitives under the other wording, one row per obligation x view
    RUN/rubric.json             agreement and Cohen's κ per primitive and for the label
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..log.records import MemoryLog
from ..rates.stats import cohen_kappa
from ..runs import folder as runs
from . import calibrate
from .annotate import Annotator, Item, primitives
from .labels import obligation_label

WORDINGS = ("a", "b")


def rows_file(wording: str) -> str:
    return f"rubric_{wording}.jsonl"


def rerun(run: Any, cal_log: MemoryLog, annotator: Annotator, wording: str, items: Sequence[Item], *,
          use_calibration: bool = True, chunk: int = 64,
          progress: Callable[[str, int, int], None] = lambda *_: None) -> dict[str, Any]:
    """Ask `annotator`'s primitives again in `wording` and compare with its original answers in
    RUN/primitives.jsonl; `cal_log` holds the turns its calibration items come from. Writes
    RUN/rubric_<wording>.jsonl and RUN/rubric.json; returns the agreement."""
    if wording not in WORDINGS:
        raise ValueError(f"--rubric must be one of {', '.join(WORDINGS)}, not {wording!r}")
    if wording == annotator.wording:
        raise ValueError(f"annotator {annotator.role} already uses wording {wording}; the other is "
                         f"{next(w for w in WORDINGS if w != wording)}")
    th = {}
    cal = None
    if use_calibration:
        cal = calibrate.calibrate(annotator.backend, wording, cal_log)
        th = {k: calibrate.usable(t) for k, t in cal["thresholds"].items()}
    other = Annotator(annotator.role, annotator.backend, wording, th)
    rows = []
    for start in range(0, len(items), chunk):
        part = items[start : start + chunk]
        for it, p in zip(part, primitives(part, other), strict=True):
            rows.append({"obligation_id": it.obligation.obligation_id, "write_id": it.write.write_id,
                         "view": it.view, "wording": wording, **p.to_dict(), "label": obligation_label(*p.answers)})
        progress(f"rubric {wording}", len(part), len(items))
    runs.write_rows(run, rows_file(wording), rows)
    original = {(p["obligation_id"], p["view"]): p[annotator.role] for p in runs.read_rows(run, runs.PRIMITIVES)}
    report = {"annotator": annotator.role, "original": annotator.wording, "wording": wording,
              "thresholds": th, **agreement(original, rows)}
    if cal is not None:
        report["calibration_items"] = cal["items"]
    runs.write_json(run, runs.RUBRIC, report)
    return report


def agreement(original: dict[tuple[str, str], dict[str, Any]], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Agreement and κ between the wordings per primitive (D, E, R) and for the obligation label."""
    pairs = [(original[k], r) for r in rows if (k := (r["obligation_id"], r["view"])) in original]
    out: dict[str, Any] = {"items": len(pairs), "primitives": {}}
    for k in ("d", "e", "r", "label"):
        def get(p: dict[str, Any], k: str = k) -> Any:
            return obligation_label(p["d"], p["e"], p["r"]) if k == "label" else p[k]

        both = [(get(a), get(b)) for a, b in pairs if get(a) is not None and get(b) is not None]
        out["primitives"][k.upper() if k != "label" else "label"] = {
            "n": len(both), "agreement": sum(x == y for x, y in both) / len(both) if both else None,
            "kappa": cohen_kappa([x for x, _ in both], [y for _, y in both]) if both else None}
    return out
