"""Rubric stability (DerivAudit App. B: agreement between rubric wordings, 0.81–0.91 per primitive
against 0.69–0.78 for typed labels): annotator A's D/E/R primitives asked again with the other
prompt wording, on the same model, items and protocol (calibrated on that wording), and the
agreement between the two wordings; beside it the baseline the paper compares them with, the typed
four-way label asked directly in each wording (`typed_label_{a,b}.txt`) on the same items.

    RUN/rubric_<wording>.jsonl  A's primitives under the other wording, one row per obligation x view,
                                with `typed` (the typed label in that wording) and `typed_original`
    RUN/rubric.json             agreement and Cohen's κ per primitive, for the label the primitives
                                give, and for the typed label (`typed`)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import templates
from ..log.records import MemoryLog
from ..models.base import Backend, Prompt, option_probs
from ..rates.stats import cohen_kappa
from ..runs import folder as runs
from . import calibrate
from .annotate import Annotator, Item, primitives
from .labels import OBLIGATION_LABELS, obligation_label

WORDINGS = ("a", "b")
TYPED = OBLIGATION_LABELS  # the letters A-D of typed_label_*.txt, in this order
LETTERS = "ABCD"


def typed_labels(backend: Backend, items: Sequence[Item], wording: str) -> list[str | None]:
    """The typed label of each item asked directly in `wording`: the likeliest of the four letters,
    each read against the other three (None when one could not be scored)."""
    prompts = [Prompt(it.shared, templates.render(f"typed_label_{wording}",
                                                  obligation=templates.line(it.obligation.text)),
                      verdict=((x,), tuple(y for y in LETTERS if y != x)))
               for it in items for x in LETTERS]
    scores = backend.score(prompts)
    out: list[str | None] = []
    for i in range(len(items)):
        probs = option_probs([s.logodds for s in scores[4 * i : 4 * i + 4]])
        out.append(None if probs is None else TYPED[max(range(4), key=probs.__getitem__)])
    return out


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
        typed = typed_labels(annotator.backend, part, wording)
        typed_original = typed_labels(annotator.backend, part, annotator.wording)
        for it, p, t, t0 in zip(part, primitives(part, other), typed, typed_original, strict=True):
            rows.append({"obligation_id": it.obligation.obligation_id, "write_id": it.write.write_id,
                         "view": it.view, "wording": wording, **p.to_dict(), "label": obligation_label(*p.answers),
                         "typed": t, "typed_original": t0})
        progress(f"rubric {wording}", len(part), len(items))
    runs.write_rows(run, rows_file(wording), rows)
    original = {(p["obligation_id"], p["view"]): p[annotator.role] for p in runs.read_rows(run, runs.PRIMITIVES)}
    report = {"annotator": annotator.role, "original": annotator.wording, "wording": wording,
              "thresholds": th, **agreement(original, rows)}
    if cal is not None:
        report["calibration_items"] = cal["items"]
    runs.write_json(run, runs.RUBRIC, report)
    return report


def _agree(both: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """n, agreement and Cohen's κ of answer pairs (both answered)."""
    return {"n": len(both), "agreement": sum(x == y for x, y in both) / len(both) if both else None,
            "kappa": cohen_kappa([x for x, _ in both], [y for _, y in both]) if both else None}


def agreement(original: dict[tuple[str, str], dict[str, Any]], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Agreement and κ between the wordings per primitive (D, E, R), for the obligation label, and for
    the typed label asked directly (`typed`, when the rows carry it)."""
    pairs = [(original[k], r) for r in rows if (k := (r["obligation_id"], r["view"])) in original]
    out: dict[str, Any] = {"items": len(pairs), "primitives": {}}
    for k in ("d", "e", "r", "label"):
        def get(p: dict[str, Any], k: str = k) -> Any:
            return obligation_label(p["d"], p["e"], p["r"]) if k == "label" else p[k]

        out["primitives"][k.upper() if k != "label" else "label"] = _agree(
            [(get(a), get(b)) for a, b in pairs if get(a) is not None and get(b) is not None])
    if any("typed" in r for r in rows):
        out["typed"] = _agree([(r["typed_original"], r["typed"]) for r in rows
                               if r.get("typed") is not None and r.get("typed_original") is not None])
    return out
