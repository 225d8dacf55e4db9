"""The report and its CI gates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..log.io import atomic_writer
from ..safe import escape
from ._common import (
    OUTPUT,
    REPORT_FORMAT_HELP,
    ReportFmt,
    _bad,
    _print_ci_gates,
    app,
    err,
    handles_bad_input,
    out,
    pick_run,
)


@app.command()
@handles_bad_input
def report(
    run: Annotated[Path | None, typer.Argument(help="A run folder made by scan (and optionally replay); default: "
                                               "the most recent under ./runs/.", show_default=False)] = None,
    format: Annotated[ReportFmt, typer.Option("--format", help=REPORT_FORMAT_HELP)]
    = ReportFmt.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here (atomic) instead of stdout."),
                      OUTPUT] = None,
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help="Gate, e.g. \"unsupported_admitted>0.25\"; "
                       "exit 1 when it holds. Repeatable. With --baseline it reads the change.")] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="Another run folder to compare against "
                                                  "(judged by the same models).")] = None,
    across_judges: Annotated[bool, typer.Option("--across-judges", help="Compare with a baseline judged by other "
                                                "models anyway; every difference is labelled across judges.")]
    = False,
    min_confidence: Annotated[float | None, typer.Option(
        "--min-confidence", min=0.0, max=1.0, help="List only the writes whose label is at least this confident "
        "(JSON's trust.writes, the flagged writes); rates still count every write.")] = None,
) -> None:
    """What a run found, for people (table, md, html) and machines (json, csv, junit), with CI gates."""
    from .. import report as rep
    from ..report.table import print_report

    run = pick_run(run, output)
    try:
        doc = rep.build(run, min_confidence=min_confidence)
        if baseline is not None:
            rep.compare(doc, rep.build(baseline), across_judges=across_judges)
        gates = rep.evaluate_ci_gates(doc, fail_if or [])
    except rep.ReportError as e:
        _bad(str(e))
    doc["gates"] = gates
    if format is ReportFmt.table:
        if output is not None:
            _bad("--format table prints to the terminal; pick md, json, csv, junit or html for -o")
        print_report(out, doc)
    else:
        data = rep.render(doc, format.value, gates)
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with atomic_writer(output, "wb") as fh:
                fh.write(data)
            err.print(f"wrote {escape(str(output))} ({len(data):,} bytes)")
    _print_ci_gates(gates)
