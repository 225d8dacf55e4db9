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
