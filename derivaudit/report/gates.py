"""CI gates: `--fail-if "NAME OP NUMBER"` over the report's flat metrics (or their change against a
baseline). A metric the run cannot tell fails its gate; CI should not pass on missing evidence."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

from .build import METRICS, ReportError

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
    metric this run cannot tell (no replay, no negatives), and every gate of a run of zero writes,
    fails: CI should not pass on missing evidence. An unknown name or a setting not in the run is a usage error."""
    parsed = [(e, *parse_gate(e)) for e in exprs]
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
        value = values[name]
        failed = True if value is None or empty else _OPS[op](value, threshold)
        why = "the run has no write" if empty else "no value in this run" if value is None else None
        out.append({"expr": expr, "metric": name, "op": op, "threshold": threshold, "value": value,
                    "on": "change" if "change" in report else "run", "failed": failed, "why": why})
    return out
