"""`report`: one document per run (or pair of runs) that people and CI take away.

    from derivaudit import report
    doc = report.build("runs/x")                  # the dict behind every format (schema v1)
    gates = report.evaluate_ci_gates(doc, ["unsupported_admitted>0.25"])
    text = report.render(doc, "md", gates)        # json | md | csv | junit | html

Modules: `build` (the document, metrics, baseline change), `gates`, `text` (CSV, Markdown, JUnit),
`html` and `plots` (the self-contained page), `table` (rich tables for the terminal). Nothing here
imports the scan pipeline or a model: a report reads only the run folder.
"""

from __future__ import annotations

from typing import Any

from ..registry import Registry
from .build import (
    GATE_SETTINGS,
    METRICS,
    REPORT_SCHEMA_VERSION,
    SCHEMA_FILE,
    ReportError,
    build,
    compare,
    flagged,
    flat_metrics,
    gate_setting,
    to_json,
    validate,
)
from .ci_gates import evaluate_ci_gates, parse_ci_gate
from .text import change_rows, md_escape, metric_rows, to_csv, to_junit, to_markdown

# format name -> "module:function(report, gates) -> bytes"; `table` is drawn by report.table instead.
FORMATS = Registry("report format", {
    "json": "derivaudit.report.build:json_bytes",
    "md": "derivaudit.report.text:markdown_bytes",
    "csv": "derivaudit.report.text:csv_bytes",
    "junit": "derivaudit.report.text:junit_bytes",
    "html": "derivaudit.report.html:html_bytes",
}, group="derivaudit.formats", check=lambda obj: None if callable(obj) else "not a function (report, gates) -> bytes")


def render(report: dict[str, Any], fmt: str, gates: list[dict[str, Any]] | None = None) -> bytes:
    """The report in one file format."""
    return FORMATS.get(fmt)(report, gates or [])


_RENAMED = {"parse_gate": "parse_ci_gate", "evaluate_gates": "evaluate_ci_gates"}  # the names of 0.2


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        import warnings

        warnings.warn(f"derivaudit.report.{name} is now {_RENAMED[name]} (CI gates, apart from the write-time "
                      "gate)", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMATS", "GATE_SETTINGS", "METRICS", "REPORT_SCHEMA_VERSION", "SCHEMA_FILE", "ReportError", "build",
    "change_rows", "compare", "evaluate_ci_gates", "flagged", "flat_metrics", "gate_setting", "md_escape",
    "metric_rows", "parse_ci_gate", "render", "to_csv", "to_json", "to_junit", "to_markdown", "validate",
]
