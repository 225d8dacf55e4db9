"""CI gates: `--fail-if "NAME OP NUMBER"` over the report's flat metrics (or their change against a
baseline). A metric the run cannot tell fails its gate; CI should not pass on missing evidence."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .build import METRICS, TRUST_SUFFIXES, ReportError

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
_GATE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:@[\w.-]+/[\w.-]+)?)\s*(<=|>=|==|!=|<|>)\s*([-+]?\d*\.?\d+(?:e[-+]?\d+)?)"
                   r"\s*(%?)\s*$", re.IGNORECASE)


def parse_ci_gate(expr: str, known: Iterable[str] | None = None) -> tuple[str, str, float]:
    """NAME OP NUMBER; NAME one of `known` (default: the run report's metrics)."""
    m = _GATE.match(expr)
    if not m:
        raise ReportError(f"--fail-if {expr!r}: expected NAME OP NUMBER, e.g. \"unsupported_admitted>0.25\" "
                          f"(OP one of < <= > >= == !=; NUMBER may end in %)")
    name, op, value, pct = m.groups()
    names = list(METRICS if known is None else known)
    base = name.split("@", 1)[0] if known is None else name
    if known is None:
        for suffix in (".weighted", *(f".{x}" for x in TRUST_SUFFIXES)):
            if base.endswith(suffix) and base[: -len(suffix)] in names:
                base = base[: -len(suffix)]
                break
    if base not in names:
        raise ReportError(f"--fail-if {expr!r}: unknown metric {name!r} (known: {', '.join(names)})")
    return name, op, float(value) / (100 if pct else 1)


REPLAY_METRICS = ("unsupported_admitted", "valid_kept", "auc")  # what only `replay` measures


def check_scan_ci_gates(exprs: Sequence[str]) -> None:
    """Gates given to `scan`: well formed, known, and not about a replay that a scan does not make
    (ReportError naming the expression), so a typo fails before any model work."""
    for e in exprs:
        name = parse_ci_gate(e)[0]
        if name.split("@", 1)[0].split(".", 1)[0] in REPLAY_METRICS:
            raise ReportError(f"--fail-if {e!r}: {name} is measured by `derivaudit replay`, which scan does not run; "
                              "gate it with `derivaudit report --fail-if` after the replay")


def evaluate_ci_gates(report: dict[str, Any], exprs: Sequence[str]) -> list[dict[str, Any]]:
    """Each gate fails when its expression holds. With a baseline the gate reads the change. A
    metric this run cannot tell (no replay, no negatives), and every gate of a run of zero writes,
    fails: CI should not pass on missing evidence. An unknown name or a setting not in the run is a usage error."""
    parsed = [(e, *parse_ci_gate(e)) for e in exprs]
    values = report.get("change", report["metrics"])
    empty = report["metrics"].get("writes") == 0
    out = []
    for expr, name, op, threshold in parsed:
        if name not in values:
            known = sorted(k for k in values if "@" in k)
            raise ReportError(f"--fail-if {expr!r}: {name!r} is not in this run"
                              + (f" (settings: {', '.join(known)})" if "@" in name and known else
                                 " (run `derivaudit replay` first)" if "@" in name or name in
                                 ("unsupported_admitted", "valid_kept", "auc") else ""))
        out.append(_judge(expr, name, op, threshold, values[name], "change" if "change" in report else "run",
                          "the run has no write" if empty else None))
    return out


def _judge(expr: str, name: str, op: str, threshold: float, value: float | None, on: str,
           empty: str | None) -> dict[str, Any]:
    failed = True if value is None or empty else _OPS[op](value, threshold)
    why = empty or ("no value in this run" if value is None else None)
    return {"expr": expr, "metric": name, "op": op, "threshold": threshold, "value": value, "on": on,
            "failed": failed, "why": why}


def evaluate_metric_ci_gates(metrics: Mapping[str, float | None], exprs: Sequence[str],
                          empty: str | None = None) -> list[dict[str, Any]]:
    """Gates over a flat metrics table (the read-path audits): a metric without a value, or any
    gate when `empty` says why there is nothing to measure, fails."""
    parsed = [(e, *parse_ci_gate(e, metrics)) for e in exprs]
    return [_judge(e, n, op, t, metrics[n], "run", empty) for e, n, op, t in parsed]
