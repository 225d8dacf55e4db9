"""The read-path metrics as rows (name, meaning, value): one source for the terminal tables, the
Markdown and the HTML pages of `echo` and `overlap` (a leaf module, so `readpath` and `built` both
read it without importing each other).
"""

from __future__ import annotations

from typing import Any

_ECHO_ROWS = (
    ("density_pre", "Echo Density before the correction"),
    ("density", "Echo Density after the correction"),
    ("wep", "Windowed Echo Persistence"),
    ("rri", "Reconsolidation Resistance (ranked)"),
    ("excess", "repeated-family share of top-k slots"),
)


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def echo_rows(doc: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """(metric name, what it is, as logged, as FPA serves it or None)."""
    m, fpa = doc["metrics"], doc["settings"].get("serve") == "fpa"
    return [(f"echo.{n}", what, fmt(m[f"echo.{n}"]), fmt(m[f"echo.{n}.fpa"]) if fpa else None)
            for n, what in _ECHO_ROWS]


_OVERLAP_ROWS = (
    ("mean", "mean query–top-memory overlap (Jaccard)"),
    ("risky", "reads in the middle (risky) band"),
    ("accuracy", "answers matching the expected one"),
    ("accuracy.low", "… in the low band"),
    ("accuracy.middle", "… in the middle band"),
    ("accuracy.high", "… in the high band"),
    ("accuracy.ta", "… task-aligned (stored answer = expected)"),
    ("accuracy.td_dup", "… task-divergent with duplicated evidence"),
    ("adopted_stale", "TD-Dup answers that repeat the stale stored answer"),
    ("memtrim.suppressed", "MemTrim: stored answers suppressed"),
    ("memtrim.withheld", "MemTrim: reads with an unresolved conflict withheld"),
)


def overlap_rows(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    m = doc["metrics"]
    return [(f"overlap.{n}", what, fmt(m[f"overlap.{n}"])) for n, what in _OVERLAP_ROWS]


# ---------------------------------------------------------------- the answer replay (echo/overlap --answers)

ANSWER_HEAD = ("method", "reads", "accuracy [95% CI]", "Δ vs no memory [CI]", "✓→✗", "✗→✓",
               "Δ vs budget [CI]", "old-answer adoption", "DCE [CI]", "errors")
BAND_HEAD = ("context", "band", "reads", "accuracy [CI]", "without memory [CI]", "ΔAcc [CI]")
_METHOD_NAMES = {"none": "no memory", "budget": "budget (logged top k)", "fpa_raw": "FPA, raw answer",
                 "fpa": "FPA (authority-checked)", "memtrim": "MemTrim"}


def _ci(x: float | None, ci: list[float | None] | None) -> str:
    if x is None:
        return "—"
    if not ci or ci[0] is None:
        return fmt(x)
    return f"{x:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def answer_rows(ans: dict[str, Any]) -> list[list[str]]:
    """One row per method of an answer replay, in ANSWER_HEAD's order."""
    rows = []
    for m, d in ans["methods"].items():
        rows.append([_METHOD_NAMES.get(m, m), str(d["reads"]), _ci(d["accuracy"], d["accuracy_ci"]),
                     _ci(d.get("delta_none"), d.get("delta_none_ci")),
                     str(d.get("right_to_wrong_none", "—")), str(d.get("wrong_to_right_none", "—")),
                     _ci(d.get("delta_budget"), d.get("delta_budget_ci")),
                     "—" if d["adoption"] is None else f"{d['adoption']:.3f} ({d['historical_reads']})",
                     _ci(d["dce"], d["dce_ci"]), str(d["errors"])])
    return rows


def band_rows(ans: dict[str, Any]) -> list[list[str]]:
    """Accuracy by overlap band, with and without memory, for the budget and MemTrim contexts."""
    rows = []
    for m in ("budget", "memtrim"):
        for b, d in ((ans.get("overlap") or {}).get(m) or {}).get("bands", {}).items():
            rows.append([_METHOD_NAMES[m], b, str(d["reads"]), _ci(d["accuracy"], d["accuracy_ci"]),
                         _ci(d["accuracy_without"], d["accuracy_without_ci"]), _ci(d["delta"], d["delta_ci"])])
    return rows


def _p(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def peak_lines(ans: dict[str, Any]) -> list[str]:
    """The quadratic and two-lines tests of a dip in the memory effect at middle overlap."""
    out = []
    for m in ("budget", "memtrim"):
        t = (ans.get("overlap") or {}).get(m)
        if not t:
            continue
        q, tl = t["quadratic"], t["two_lines"]
        quad = "too few distinct overlaps" if q is None else f"b2 = {q['b2']:.3f} (p {_p(q['p'])})"
        if tl is None:
            two = "too few reads"
        else:
            side = {s: "—" if tl[s] is None else f"{tl[s]['slope']:.3f} (p {_p(tl[s]['p'])})" for s in ("low", "high")}
            two = (f"break {tl['break']:.2f}, slope below {side['low']}, above {side['high']}: "
                   f"{'a dip in the middle' if tl['dip'] else 'no significant dip'}")
        out.append(f"{_METHOD_NAMES[m]}: ΔAcc over overlap ({t['reads']} reads) — quadratic {quad}; two lines {two}")
    return out


def cost_line(ans: dict[str, Any]) -> str:
    c = ans["cost"]
    per = "—" if c["per_read_s"] is None else f"{c['per_read_s']:.1f} s"
    parse = ans.get("memtrim", {}).get("parse")
    extra = (f"; MemTrim parser: {parse['parsed']} parsed, {parse['retried']} retried, {parse['failed']} failed, "
             f"{parse['ungrounded']} ungrounded units dropped") if parse else ""
    return (f"{ans['reads']} reads answered ({ans['skipped_no_expected']} skipped: no expected answer); "
            f"{c['total_s']:.0f} s, {per} per read (generation {c['generate_s']:.0f} s, judging {c['judge_s']:.0f} s)"
            f"{extra}")
