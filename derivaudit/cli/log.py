"""Log commands: validate, views, import."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..audit.evidence import EvidenceSettings, LimitedTally, build_views
from ..importers import IMPORTERS
from ..log.io import atomic_writer
from ..report.table import print_views
from ..safe import dumps as json_dumps
from ..safe import escape
from ._common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    OUTPUT,
    Files,
    Fmt,
    History,
    SkipInvalid,
    ViewsFmt,
    _bad,
    _print_problems,
    _progress,
    _report_skipped,
    _report_warnings,
    app,
    err,
    handles_bad_input,
    out,
    print_json,
)


@app.command()
@handles_bad_input
def validate(
    files: Files,
    history: History = None,
    format: Annotated[Fmt, typer.Option("--format", help="table (one line per problem) or json.")] = Fmt.table,
    skip_invalid: SkipInvalid = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings (ids with invisible characters, mixed "
                                         "scripts or that read like another id) are errors.")] = False,
) -> None:
    """Check memory logs against schema v1 and the history rules. Exit 0 when clean (or, with
    --skip-invalid, when what is left is usable), 2 when not."""
    from ..log.validation import to_json
    from ..log.validation import validate as check

    res = check([*(history or []), *files], skip_invalid=skip_invalid, strict=strict)
    problems, warnings, fatal = res["problems"], res["warnings"], not res["ok"]
    if format is Fmt.json:
        print_json(to_json(res))
    else:
        _print_problems(problems, limit=len(problems))
        _report_warnings(warnings, limit=len(warnings))
        counts = (f"{res['conversations']} conversations, {res['turns']} turns, {res['writes']} writes"
                  + (f", {res['reads']} reads" if res["reads"] else "")
                  + (f", {res['operations']} operations" if res["operations"] else "") if res["read"] else "")
        if not problems:
            err.print(f"[green]ok[/green]: {counts}" + (f"; {len(warnings)} warning(s)" if warnings else ""))
        elif not fatal:
            err.print(f"[yellow]--skip-invalid: {res['bad_records']} bad record(s) would be skipped "
                      f"({len(problems)} problem(s)); usable: {counts}[/yellow]")
        else:
            err.print(f"[red]{len(problems)} problem(s) in {res['bad_records']} record(s)[/red]")
    raise typer.Exit(EXIT_BAD_INPUT if fatal else EXIT_OK)


@app.command()
@handles_bad_input
def views(
    files: Files,
    history: History = None,
    write: Annotated[list[str] | None, typer.Option("--write", help="Only this write id (repeatable).")] = None,
    format: Annotated[ViewsFmt, typer.Option("--format", help="table (for people) or jsonl.")] = ViewsFmt.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write JSONL here (atomic)."), OUTPUT] = None,
    limit_floor: Annotated[float, typer.Option(help="Search-limited floor, as a share of the top BM25 score.",
                                               min=0.0, max=1.0)] = 0.5,
    skip_invalid: SkipInvalid = False,
) -> None:
    """Show the citation-only and expanded-history evidence views of each memory write."""
    from ..log.spill import SpilledLog

    with SpilledLog([*(history or []), *files]) as log:  # one conversation in memory at a time
        log.raise_problems(skip_invalid=skip_invalid)
        _report_skipped(log)
        _report_warnings(log.warnings)
        _views(log, write, format, output, limit_floor)


def _views(log: Any, write: list[str] | None, format: ViewsFmt, output: Path | None, limit_floor: float) -> None:
    wanted = set(write) if write else None
    if wanted:
        unknown = sorted(wanted - set(log.write_ids))
        if unknown:
            err.print(f"[red]error[/red]: unknown write id(s): {escape(', '.join(unknown))}")
            raise typer.Exit(EXIT_BAD_INPUT)
    settings = EvidenceSettings(limit_floor=limit_floor)
    tally = LimitedTally(len(wanted) if wanted else len(log.write_ids))
    if format is ViewsFmt.jsonl or output is not None:
        sink = atomic_writer(output) if output else contextlib.nullcontext(sys.stdout.buffer)
        with sink as fh, _progress() as bar:
            task = bar.add_task("building views", total=tally.total)
            for v in build_views(log, settings, wanted):
                fh.write(json_dumps(tally.add(v).to_dict()) + b"\n")
                bar.advance(task)
    else:
        for v in build_views(log, settings, wanted):
            print_views(out, tally.add(v))
    err.print(tally.describe(limit_floor) + (f"; written to {escape(str(output))}" if output else ""))


@app.command("import")
@handles_bad_input
def import_(
    source: Annotated[str, typer.Argument(help=f"{', '.join(IMPORTERS)}.")],
    path: Annotated[Path, typer.Argument(help="The source file.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Memory log JSONL to write (atomic)."), OUTPUT],
    skip_invalid: SkipInvalid = False,
    scopes: Annotated[Path | None, typer.Option("--scopes", help="mem0-db: Memory.get_all() output (JSON) that "
                                                "pins each memory id to its user/agent/run scope.")] = None,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Write a log with no memory write (the "
                                              "turns alone) instead of failing.")] = False,
) -> None:
    """Convert a public dataset or memory-system export into a derivaudit memory log."""
    from ..importers import importers, run_import

    if source not in importers():
        _bad(importers().unknown(source))
    log, notes = run_import(source, path, output, skip_invalid=skip_invalid, allow_empty=allow_empty,
                            options={"scopes": scopes})
    _report_skipped(log)
    extra = "".join(f", {k}: {v}" for k, v in notes.items())
    err.print(f"[green]wrote[/green] {escape(str(output))}: {len(log.conversations)} conversations, "
              f"{log.n_turns} turns, {len(log.writes)} writes"
              + (f", {len(log.operations)} operations" if log.operations else "") + escape(extra))
