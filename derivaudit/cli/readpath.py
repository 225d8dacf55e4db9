"""Read-path audits: echo, overlap."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ..log.io import atomic_writer, load_log
from ..log.records import MemoryLog
from ..safe import escape
from ._common import (
    Files,
    History,
    ReadPathFmt,
    ReadPathFormat,
    ReadPathOut,
    SkipInvalid,
    _bad,
    _print_ci_gates,
    _report_skipped,
    app,
    err,
    handles_bad_input,
    out,
)


@app.command()
@handles_bad_input
def echo(
    files: Files,
    history: History = None,
    k: Annotated[int, typer.Option("--k", min=1, help="Retrieval slots counted per read (Memory Echo paper: 5).")] = 5,
    window: Annotated[int, typer.Option("--window", min=1, help="Reads after a correction that WEP averages.")] = 30,
    serve: Annotated[str | None, typer.Option("--serve", help="Also replay every logged candidate pool through a "
                                              "serving rule and compare: fpa (one record per family, "
                                              "post-correction eligibility, authority first).")] = None,
    format: ReadPathFmt = ReadPathFormat.table,
    output: ReadPathOut = None,
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help="Gate, e.g. \"echo.density>0.3\"; exit 1 "
                       "when it holds (or when the metric has no value). Repeatable.")] = None,
    skip_invalid: SkipInvalid = False,
) -> None:
    """Memory echo over read events (the Memory Echo paper): families from provenance, Echo Density, RRI, WEP."""
    from ..readpath.echo import SERVING, audit_echo

    if serve not in (None, *SERVING):
        _bad(f"--serve {escape(serve)!r}: known serving rules: {', '.join(SERVING)}")
    if serve is None and any(".fpa" in g for g in fail_if or []):
        _bad("a gate on an .fpa metric needs --serve fpa")
    _read_path("echo", [*(history or []), *files], skip_invalid, fail_if, format, output,
               lambda log: audit_echo(log, k=k, window=window, serve=serve).to_dict(),
               "only families and storage (rri_storage) can be measured")


def _read_path(name: str, paths: list[Path], skip_invalid: bool, fail_if: list[str] | None, format: Any,
               output: Path | None, audit: Callable[[MemoryLog], dict[str, Any]], without_reads: str) -> None:
    """Load, audit, gate, then print or write a read-path report in the chosen format (exit 1 when a
    gate fails, 2 on bad input or a bad gate)."""
    from ..report import readpath
    from ..report.ci_gates import ReportError, evaluate_metric_ci_gates

    log = load_log(paths, skip_invalid=skip_invalid)
    _report_skipped(log)
    doc = audit(log)
    try:
        doc["gates"] = gates = evaluate_metric_ci_gates(doc["metrics"], fail_if or [],
                                                     empty=None if log.reads else "the log has no read event")
    except ReportError as e:
        _bad(str(e))
    if not log.reads:
        err.print(f"[yellow]warning[/yellow]: the log has no read event; {without_reads}")
    if format.value == "table" and output is None:
        readpath.print_table(name, out, doc)
    else:
        data = readpath.render(name, format.value, doc)  # -o with the table format writes JSON
        if output is None:
            sys.stdout.buffer.write(data + (b"" if data.endswith(b"\n") else b"\n"))
        else:
            with atomic_writer(output, "wb") as fh:
                fh.write(data)
            err.print(f"wrote {escape(str(output))}")
    _print_ci_gates(gates)


@app.command()
@handles_bad_input
def overlap(
    files: Files,
    history: History = None,
    k: Annotated[int, typer.Option("--k", min=1, help="Retrieved memories considered per read.")] = 5,
    band: Annotated[str, typer.Option("--band", help="The risky middle band of overlap, LOW,HIGH.")] = "0.2,0.6",
    format: ReadPathFmt = ReadPathFormat.table,
    output: ReadPathOut = None,
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help="Gate, e.g. \"overlap.risky>0.3\"; exit 1 "
                       "when it holds (or when the metric has no value). Repeatable.")] = None,
    skip_invalid: SkipInvalid = False,
) -> None:
    """Query–memory overlap over read events (the MemTrim paper): risky middle band, TA vs TD-Dup, MemTrim."""
    from ..readpath.overlap import audit_overlap, check_band

    try:
        lo, hi = (float(x) for x in band.split(","))
        check_band((lo, hi))
    except ValueError:
        _bad(f"--band {escape(band)!r}: expected LOW,HIGH with 0 <= LOW < HIGH <= 1, e.g. 0.2,0.6")
    _read_path("overlap", [*(history or []), *files], skip_invalid, fail_if, format, output,
               lambda log: audit_overlap(log, k=k, band=(lo, hi)), "nothing to measure")
