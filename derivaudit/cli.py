"""The `derivaudit` command line: parse options, call the library, render. No audit logic here.

Exit codes: 0 success, 1 a CI gate failed, 2 bad input or usage. Data goes to stdout, progress
and messages to stderr, so `--format json` output can be piped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from . import __version__, timeref
from .evidence import EvidenceSettings, Views, build_views
from .io import LogError, OutputError, atomic_writer, check_output, load_log
from .models import DEFAULT_BACKEND, DEFAULT_MODEL
from .records import MemoryLog, Problem
from .runs import RunError
from .safe import dumps as json_dumps
from .safe import escape, escape_id

app = typer.Typer(
    name="derivaudit",
    help="Audit agent memory writes as derivations from the history the writer saw.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)
# Piped or redirected tables (CI logs, files) get a wide fixed width instead of 80 columns, so no cell is cut.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_OK, EXIT_GATE, EXIT_BAD_INPUT = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


class Fmt(StrEnum):
    table = "table"
    json = "json"


class ViewsFmt(StrEnum):
    table = "table"
    jsonl = "jsonl"


def _print_problems(problems: list[Problem], *, limit: int = 50) -> None:
    for p in problems[:limit]:
        err.print(f"[red]error[/red] {escape(str(p))}")
    if len(problems) > limit:
        err.print(f"... and {len(problems) - limit} more problems (use --format json to see all)")


def handles_bad_input(fn: F) -> F:
    """Bad input (a log, or a run folder that is missing, damaged or in use) ends with a clear message
    and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _check_outputs(fn.__name__, kwargs)
            return fn(*args, **kwargs)
        except OutputError as e:
            _bad(str(e))
        except sqlite3.OperationalError as e:  # the spill or cache database: a full $TMPDIR, a read-only home
            _bad(f"database error: {e} (is $TMPDIR or $DERIVAUDIT_HOME full or read-only?)")
        except OSError as e:
            where = f"{e.filename}: " if e.filename else ""
            _bad(f"{where}{e.strerror or e}")
        except LogError as e:
            _print_problems(e.problems)
            hint = ("Nothing to audit in that source." if all(p.code == "no_writes" for p in e.problems)
                    else "Fix them, or pass --skip-invalid to go on without the bad records.")
            err.print(f"[red]{len(e.problems)} problem(s); nothing was processed.[/red] {hint}")
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except RunError as e:
            _bad(str(e))

    return wrapper  # type: ignore[return-value]


FILE_OUTPUTS = ("output", "html")  # the options that name an output file (-o, --html)
FOLDER_OUTPUTS = {"families_build"}  # commands whose -o is a folder (checked by the command)


def _check_outputs(command: str, kwargs: dict[str, Any]) -> None:
    """Before any work: every output file can be written and is none of the inputs (the paths
    given to the command's other options and arguments)."""
    if command in FOLDER_OUTPUTS:
        return
    inputs: list[Path] = []
    for k, v in kwargs.items():
        if k in FILE_OUTPUTS:
            continue
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, Path):
                inputs.append(x)
    outs = [kwargs[k] for k in FILE_OUTPUTS if isinstance(kwargs.get(k), Path)]
    for o in outs:
        check_output(o, inputs)
    if len(outs) == 2 and os.path.realpath(outs[0]) == os.path.realpath(outs[1]):
        raise OutputError(f"{outs[1]}: -o and --html name the same file")


def _records(problems: list[Problem]) -> int:
    """How many records (file lines) the problems are about: one record may have several."""
    return len({(p.file, p.line) for p in problems if p.line is not None})


def _report_skipped(log: MemoryLog) -> None:
    if not log.skipped:
        return
    _print_problems(log.skipped, limit=20)
    by_code: dict[str, int] = {}
    for p in log.skipped:
        by_code[p.code] = by_code.get(p.code, 0) + 1
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(by_code.items()))
    err.print(f"[yellow]--skip-invalid: skipped {_records(log.skipped)} bad record(s) with {len(log.skipped)} "
              f"problem(s) ({escape(summary)})[/yellow]")


def _report_warnings(warnings: list[Problem], limit: int = 5) -> None:
    for p in warnings[:limit]:
        err.print(f"[yellow]warning[/yellow] {escape(str(p))}")
    if len(warnings) > limit:
        err.print(f"[yellow]... and {len(warnings) - limit} more warnings[/yellow] (derivaudit validate shows all; "
                  "--strict makes them errors)")


def _load(files: list[Path], history: list[Path] | None, skip_invalid: bool) -> MemoryLog:
    log = load_log([*(history or []), *files], skip_invalid=skip_invalid)
    _report_skipped(log)
    _report_warnings(log.warnings)
    return log


class RateColumn(ProgressColumn):
    """Items per minute since the stage's first report (whose count, a resumed run's finished
    writes or work done before the clock started, is left out): a user sees a scan slow down when
    other work takes the cores."""

    def render(self, task: Any) -> Text:
        done = task.completed - task.fields.get("resumed", 0)
        if not task.elapsed or done <= 0 or task.finished and task.total == task.fields.get("resumed"):
            return Text("")
        return Text(f"{60 * done / task.elapsed:.1f}/min", style="progress.data.speed")


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    RateColumn(), console=err, transient=False, disable=not err.is_terminal)


def _stage_progress(bar: Progress) -> Callable[[str, int, int], None]:
    """A progress callback that opens one bar per pipeline stage on first use."""
    tasks: dict[str, Any] = {}

    def progress(stage: str, advance: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total, completed=advance, resumed=advance)
            return
        bar.advance(tasks[stage], advance)

    return progress


def _version(value: bool) -> None:
    if value:
        out.print(f"derivaudit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """derivaudit: evidence scope, compositional validity and admission reliability of memory writes."""
    _exit_cleanly_on_signals()


def _exit_cleanly_on_signals() -> None:
    """SIGTERM and SIGHUP (`timeout`, a closed terminal, a CI runner stopping a job) end the command
    as Ctrl-C does: every temp file and spill folder is removed on the way out (exit 128 + signal)."""
    import signal

    def stop(signum: int, _frame: Any) -> None:
        err.print(f"[yellow]stopped by signal {signal.Signals(signum).name}[/yellow]; partial work is "
                  "kept only where it resumes (run folders)")
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, stop)
            except ValueError:  # not the main thread (an embedding application): leave its handlers
                return


Files = Annotated[list[Path], typer.Argument(help="Memory log JSONL file(s) (schema v1).", show_default=False)]
History = Annotated[list[Path] | None, typer.Option("--history", help="Extra JSONL file(s) holding the turns.")]
SkipInvalid = Annotated[bool, typer.Option("--skip-invalid", help="Skip bad records (counted and reported) "
                                           "instead of stopping.")]


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
    from .spill import SpilledLog

    paths = [*(history or []), *files]
    try:  # records on disk, one conversation in memory at a time: any log size fits
        with SpilledLog(paths, keep_text=False) as log:
            problems, warnings = log.problems, log.warnings
            n_conv, n_turns, n_writes, n_reads = log.n_conversations, log.n_turns, len(log.write_ids), log.n_reads
    except LogError as e:
        problems, warnings = e.problems, []
        n_conv = n_turns = n_writes = n_reads = None
    if strict:
        problems, warnings = sorted([*problems, *warnings], key=lambda p: (p.file, p.line or 0)), []
    fatal = bool(problems) and (not skip_invalid or n_conv is None or not (n_writes or n_conv))
    if format is Fmt.json:
        doc = {
            "ok": not fatal,
            "files": [str(p) for p in paths],
            "conversations": n_conv or 0,
            "turns": n_turns or 0,
            "writes": n_writes or 0,
            "reads": n_reads or 0,
            "skipped_records": _records(problems) if skip_invalid else 0,
            "problems": [p.to_dict() for p in problems],
            "warnings": [p.to_dict() for p in warnings],
        }
        sys.stdout.buffer.write(json_dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        _print_problems(problems, limit=len(problems))
        _report_warnings(warnings, limit=len(warnings))
        counts = (f"{n_conv} conversations, {n_turns} turns, {n_writes} writes"
                  + (f", {n_reads} reads" if n_reads else "") if n_conv is not None else "")
        if not problems:
            err.print(f"[green]ok[/green]: {counts}" + (f"; {len(warnings)} warning(s)" if warnings else ""))
        elif not fatal:
            err.print(f"[yellow]--skip-invalid: {_records(problems)} bad record(s) would be skipped "
                      f"({len(problems)} problem(s)); usable: {counts}[/yellow]")
        else:
            err.print(f"[red]{len(problems)} problem(s) in {_records(problems)} record(s)[/red]")
    raise typer.Exit(EXIT_BAD_INPUT if fatal else EXIT_OK)


def _passages_table(title: str, passages: tuple[Any, ...]) -> Table:
    t = Table(title=title, title_justify="left", show_lines=False, expand=True)
    t.add_column("turn", no_wrap=True)
    t.add_column("speaker", no_wrap=True)
    t.add_column("time", no_wrap=True)
    t.add_column("text", ratio=1)
    for p in passages:
        text = timeref.annotate(p.text, p.time)  # as the evidence block shows it
        t.add_row(escape_id(p.turn_id), escape(p.speaker), escape(p.time or ""), escape(text))
    return t


def _show_views(v: Views) -> None:
    w = v.write
    flag = " [yellow](search-limited)[/yellow]" if v.search_limited else ""
    out.rule(f"write {escape_id(w.write_id)} · conversation {escape_id(w.conversation_id)}{flag}")
    out.print(f"[bold]memory:[/bold] {escape(w.text)}")
    out.print(_passages_table(f"citation-only view ({len(v.citation_only)} passages)", v.citation_only))
    out.print(_passages_table(f"expanded-history view ({len(v.expanded)} passages)", v.expanded))
    out.print(f"[dim]retrieved by BM25: {escape(', '.join(v.retrieved) or 'none')}[/dim]")


@app.command()
@handles_bad_input
def views(
    files: Files,
    history: History = None,
    write: Annotated[list[str] | None, typer.Option("--write", help="Only this write id (repeatable).")] = None,
    format: Annotated[ViewsFmt, typer.Option("--format", help="table (for people) or jsonl.")] = ViewsFmt.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write JSONL here (atomic).")] = None,
    limit_floor: Annotated[float, typer.Option(help="Search-limited floor, as a share of the top BM25 score.",
                                               min=0.0, max=1.0)] = 0.5,
    skip_invalid: SkipInvalid = False,
) -> None:
    """Show the citation-only and expanded-history evidence views of each memory write."""
    from .spill import SpilledLog

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
    n_total = len(wanted) if wanted else len(log.write_ids)
    limited = 0
    if format is ViewsFmt.jsonl or output is not None:
        sink = atomic_writer(output) if output else contextlib.nullcontext(sys.stdout.buffer)
        with sink as fh, _progress() as bar:
            task = bar.add_task("building views", total=n_total)
            for v in build_views(log, settings, wanted):
                limited += v.search_limited
                fh.write(json_dumps(v.to_dict()) + b"\n")
                bar.advance(task)
    else:
        for v in build_views(log, settings, wanted):
            limited += v.search_limited
            _show_views(v)
    share = limited / n_total if n_total else 0.0
    err.print(f"{n_total} writes; search-limited: {limited} ({share:.1%}) at floor {limit_floor}"
              + (f"; written to {escape(str(output))}" if output else ""))


class ReportFmt(StrEnum):
    table = "table"
    json = "json"
    md = "md"
    csv = "csv"
    junit = "junit"
    html = "html"


ReadPathFmt = Annotated[ReportFmt, typer.Option("--format", help="table, json, md, csv, junit or html.")]
ReadPathOut = Annotated[Path | None, typer.Option("-o", "--output", help="Write JSON (or the --format) here (atomic).")]


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
    format: ReadPathFmt = ReportFmt.table,
    output: ReadPathOut = None,
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help="Gate, e.g. \"echo.density>0.3\"; exit 1 "
                       "when it holds (or when the metric has no value). Repeatable.")] = None,
    skip_invalid: SkipInvalid = False,
) -> None:
    """Memory echo over read events (the Memory Echo paper): families from provenance, Echo Density, RRI, WEP."""
    from .echo import SERVING, audit_echo

    if serve not in (None, *SERVING):
        _bad(f"--serve {escape(serve)!r}: known serving rules: {', '.join(SERVING)}")
    if serve is None and any(".fpa" in g for g in fail_if or []):
        _bad("a gate on an .fpa metric needs --serve fpa")
    _read_path("echo", [*(history or []), *files], skip_invalid, fail_if, format, output,
               lambda log: audit_echo(log, k=k, window=window, serve=serve).to_dict(),
               "only families and storage (rri_storage) can be measured")


def _read_path(name: str, paths: list[Path], skip_invalid: bool, fail_if: list[str] | None, format: ReportFmt,
               output: Path | None, audit: Callable[[MemoryLog], dict[str, Any]], without_reads: str) -> None:
    """Load, audit, gate, then print or write a read-path report in the chosen format (exit 1 when a
    gate fails, 2 on bad input or a bad gate)."""
    from .report import readpath
    from .report.gates import ReportError, evaluate_metric_gates

    log = load_log(paths, skip_invalid=skip_invalid)
    _report_skipped(log)
    doc = audit(log)
    try:
        doc["gates"] = gates = evaluate_metric_gates(doc["metrics"], fail_if or [],
                                                     empty=None if log.reads else "the log has no read event")
    except ReportError as e:
        _bad(str(e))
    if not log.reads:
        err.print(f"[yellow]warning[/yellow]: the log has no read event; {without_reads}")
    if format is ReportFmt.table and output is None:
        readpath.print_table(name, out, doc)
    else:
        data = readpath.render(name, format.value, doc)  # -o with the table format writes JSON
        if output is None:
            sys.stdout.buffer.write(data + (b"" if data.endswith(b"\n") else b"\n"))
        else:
            with atomic_writer(output, "wb") as fh:
                fh.write(data)
            err.print(f"wrote {escape(str(output))}")
    _print_gates(gates)


@app.command()
@handles_bad_input
def overlap(
    files: Files,
    history: History = None,
    k: Annotated[int, typer.Option("--k", min=1, help="Retrieved memories considered per read.")] = 5,
    band: Annotated[str, typer.Option("--band", help="The risky middle band of overlap, LOW,HIGH.")] = "0.2,0.6",
    format: ReadPathFmt = ReportFmt.table,
    output: ReadPathOut = None,
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help="Gate, e.g. \"overlap.risky>0.3\"; exit 1 "
                       "when it holds (or when the metric has no value). Repeatable.")] = None,
    skip_invalid: SkipInvalid = False,
) -> None:
    """Query–memory overlap over read events (the MemTrim paper): risky middle band, TA vs TD-Dup, MemTrim."""
    from .overlap import audit_overlap, check_band

    try:
        lo, hi = (float(x) for x in band.split(","))
        check_band((lo, hi))
    except ValueError:
        _bad(f"--band {escape(band)!r}: expected LOW,HIGH with 0 <= LOW < HIGH <= 1, e.g. 0.2,0.6")
    _read_path("overlap", [*(history or []), *files], skip_invalid, fail_if, format, output,
               lambda log: audit_overlap(log, k=k, band=(lo, hi)), "nothing to measure")


def _print_gates(gates: list[dict[str, Any]]) -> None:
    for g in gates:
        value = g["why"] if g.get("why") else f"{g['value']:.4g}"
        status = "[red]FAILED[/red]" if g["failed"] else "[green]passed[/green]"
        err.print(f"gate {escape(g['expr'])}: {escape(value)} on the {g['on']} → {status}")
    if any(g["failed"] for g in gates):
        raise typer.Exit(EXIT_GATE)


@app.command("import")
@handles_bad_input
def import_(
    source: Annotated[str, typer.Argument(help="locomo, mem0, mem0-db, graphiti, letta, langgraph or openai-agents.")],
    path: Annotated[Path, typer.Argument(help="The source file.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Memory log JSONL to write (atomic).")],
    skip_invalid: SkipInvalid = False,
    scopes: Annotated[Path | None, typer.Option("--scopes", help="mem0-db: Memory.get_all() output (JSON) that "
                                                "pins each memory id to its user/agent/run scope.")] = None,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Write a log with no memory write (the "
                                              "turns alone) instead of failing.")] = False,
) -> None:
    """Convert a public dataset or memory-system export into a derivaudit memory log."""
    from .importers import importers, run_import

    if source not in importers():
        err.print(f"[red]error[/red]: unknown source {escape(source)!r}; "
                  f"known: {', '.join(sorted(importers()))}")
        raise typer.Exit(EXIT_BAD_INPUT)
    log, notes = run_import(source, path, output, skip_invalid=skip_invalid, allow_empty=allow_empty,
                            options={"scopes": scopes})
    _report_skipped(log)
    extra = "".join(f", {k}: {v}" for k, v in notes.items())
    err.print(f"[green]wrote[/green] {escape(str(output))}: {len(log.conversations)} conversations, "
              f"{log.n_turns} turns, {len(log.writes)} writes{escape(extra)}")


# ---------------------------------------------------------------- model-using commands

BackendOpt = Annotated[str, typer.Option("--backend", envvar="DERIVAUDIT_BACKEND", help="llamacpp (CPU, GGUF), "
                                         "transformers (CPU/GPU), vllm (local GPU) or openai (OpenAI-compatible "
                                         "servers).")]
ModelOpt = Annotated[str, typer.Option("--model", envvar="DERIVAUDIT_MODEL", help="qwen2.5-coder-1.5b or smollm2 "
                                       "(embedded, offline), a .gguf file, a model folder, a hub id, or the served "
                                       "model name (openai).")]
DtypeOpt = Annotated[str | None, typer.Option("--dtype", help="transformers/vllm weights: auto (bfloat16 on GPUs and "
                                              "CPUs with native bfloat16, else float32), float32, bfloat16, "
                                              "float16.")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", envvar="DERIVAUDIT_THREADS", min=1, help="llamacpp/"
                                              "transformers: CPU threads (default: one per core that other work "
                                              "leaves free, re-read as it runs; see docs/models.md).")]
BaseUrlOpt = Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible server URL, e.g. "
                                                      "http://gpu1:8000/v1 (repeat for a fleet).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the result cache.")]
TopLogprobsOpt = Annotated[int | None, typer.Option("--top-logprobs", help="openai: top_logprobs to request "
                                                    "(the server's cap; default 20).", min=1, max=100)]
ModelRoleOpt = Annotated[list[str] | None, typer.Option(
    "--model-role", help="Give one role its own model: ROLE=MODEL or ROLE=BACKEND:MODEL, e.g. "
    "annotator_b=openai:qwen2.5-7b (repeatable; roles: annotator_a, annotator_b, adjudicator, verifier). "
    "Roles not named use --backend/--model.")]


def _bad(msg: str) -> NoReturn:
    err.print(f"[red]error[/red]: {escape(msg)}")
    raise typer.Exit(EXIT_BAD_INPUT)


def _roles(backend: str, model: str, base_url: list[str] | None, top_logprobs: int | None,
           model_role: list[str] | None, allowed: tuple[str, ...], dtype: str | None = None,
           threads: int | None = None) -> Any:
    """The shared model options as library ModelRoles (usage errors exit 2)."""
    from .models import BackendError, ModelRoles, ModelSpec

    try:
        return ModelRoles.parse(ModelSpec(backend, model, tuple(base_url or ()), top_logprobs, dtype, threads),
                                model_role or [], allowed)
    except BackendError as e:
        _bad(str(e))


def _pool(use_cache: bool) -> Any:
    from .models import ModelPool

    return ModelPool(cache=use_cache, on_load=lambda spec: err.status(f"loading {escape(spec.model)} "
                                                                        f"({spec.backend})"))


@contextlib.contextmanager
def _backend_errors() -> Any:
    from .models import BackendError

    try:
        yield
    except BackendError as e:
        _bad(str(e))


class Split(StrEnum):
    record = "record"
    decompose = "decompose"


@app.command()
@handles_bad_input
def check(
    record: Annotated[str, typer.Option("--record", help="The memory text to verify.")],
    evidence: Annotated[Path, typer.Option("--evidence", help="Passages: JSONL with text/speaker/time, or "
                                           "plain text, one passage per line, in time order.")],
    view: Annotated[str, typer.Option("--view", help="Verification view.")] = "holistic",
    split: Annotated[Split, typer.Option("--split", help="record: the record is its own single claim / "
                                         "obligation / QA answer; decompose: the model writes them (as "
                                         "admit() does).")] = Split.record,
    backend: BackendOpt = DEFAULT_BACKEND,
    model: ModelOpt = DEFAULT_MODEL,
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    dtype: DtypeOpt = None,
    threads: ThreadsOpt = None,
    model_role: ModelRoleOpt = None,
    no_cache: NoCacheOpt = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Score one record against passages with one view and print the verdict (log-odds, argmax)."""
    from .gate import admit
    from .io import read_passages
    from .views import VIEWS

    if view not in VIEWS:
        _bad(f"unknown view {view!r} (known: {', '.join(VIEWS)})")
    if not record.strip():
        _bad("--record is empty")
    passages = read_passages(evidence)
    roles = _roles(backend, model, base_url, top_logprobs, model_role, ("verifier",), dtype, threads)
    with _pool(not no_cache) as pool, _backend_errors():
        v = admit(record, passages, view=view, verifier=pool.get(roles.spec("verifier")), split=split.value)
    score = v["verdict"]
    doc = {"record": record, "view": view, "passages": len(passages), "model": v["model"], **score,
           "decision": None if score["logodds"] is None else ("admit" if v["decision"] else "reject"),
           "operating_point": "argmax (log-odds > 0)"}
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    elif score["error"]:
        out.print(f"[red]scoring error[/red]: {escape(score['error'])}; top tokens: {escape(str(score['top']))}")
    else:
        t = Table(show_header=False)
        t.add_row("record", escape(record))
        t.add_row("view", view)
        t.add_row("log-odds", f"{score['logodds']:+.3f}" + (" (bounded)" if score["bounded"] else ""))
        t.add_row("log p(yes) / log p(no)", f"{score['logp_yes']:.3f} / {score['logp_no']:.3f}")
        t.add_row("decision (argmax)", doc["decision"])
        t.add_row("top tokens", escape(", ".join(f"{tok!r} {lp:.2f}" for tok, lp in score["top"])))
        out.print(t)
    raise typer.Exit(EXIT_OK if score["error"] is None else EXIT_BAD_INPUT)


cache_app = typer.Typer(help="The persistent model-result cache ($DERIVAUDIT_HOME/cache.sqlite).",
                        no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("stats")
@handles_bad_input
def cache_stats(format: Annotated[Fmt, typer.Option("--format")] = Fmt.table) -> None:
    """Entries and size of the result cache, by backend, model and kind."""
    from .models.cache import ResultCache

    st = ResultCache().stats()
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(st, option=orjson.OPT_INDENT_2) + b"\n")
        return
    out.print(f"{escape(st['path'])}: {st['entries']} entries, {st['bytes'] / 1e6:.1f} MB")
    t = Table("backend", "model", "kind", "entries")
    for r in st["by_model"]:
        t.add_row(escape(r["backend"]), escape(r["model"]), r["kind"], str(r["entries"]))
    out.print(t)


@cache_app.command("clear")
@handles_bad_input
def cache_clear(
    model: Annotated[str | None, typer.Option("--model", help="Only entries whose model contains this.")] = None,
) -> None:
    """Delete cached results (all, or one model's)."""
    from .models.cache import ResultCache

    n = ResultCache().clear(model)
    err.print(f"deleted {n} cached result(s)")


review_app = typer.Typer(help="Human review of the reference labels: a blinded, stratified sample out, the "
                         "reviewers' answers back in (DerivAudit §5).", no_args_is_help=True)
app.add_typer(review_app, name="review")


@review_app.command("sample")
@handles_bad_input
def review_sample(
    run: Annotated[Path, typer.Argument(help="A run folder made by scan.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The review sheet to write (CSV, atomic).")],
    per_stratum: Annotated[int, typer.Option("--per-stratum", min=1, help="Rows per stratum (view x label, "
                                             "repaired, multi-passage).")] = 25,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample and its order.")] = 0,
    bom: Annotated[bool, typer.Option("--bom/--no-bom", help="Start the CSV with a UTF-8 byte-order mark, so "
                                      "Excel reads it as UTF-8 (LibreOffice and Python do either way).")] = True,
) -> None:
    """A blinded review sheet: memory, obligation and numbered passages, empty columns for D/E/R/label."""
    from .review import ReviewError, sample
    from .runs import lock

    try:
        with lock(run):
            doc = sample(run, output, per_stratum=per_stratum, seed=seed, bom=bom)
    except ReviewError as e:
        _bad(str(e))
    counts = ", ".join(f"{escape(k)} {v} of {doc['available'][k]}" for k, v in doc["strata"].items())
    err.print(f"wrote {len(doc['rows'])} rows to {escape(str(output))} ({counts}); fill human_D, human_E and "
              f"human_R with yes or no, then run `derivaudit review import {escape(str(run))} {escape(str(output))}`")


@review_app.command("import")
@handles_bad_input
def review_import(
    run: Annotated[Path, typer.Argument(help="The run folder the sheet was sampled from.")],
    sheet: Annotated[Path, typer.Argument(help="The filled review sheet (CSV).")],
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Validate the reviewers' answers, store them in RUN/review.jsonl and show model-human agreement."""
    from .report.table import print_review
    from .review import ReviewError, import_review
    from .runs import lock

    try:
        with lock(run):
            metrics = import_review(run, sheet)
    except ReviewError as e:
        _bad(str(e))
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(metrics, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_review(out, metrics)


# ---------------------------------------------------------------- scan and export


@app.command()
@handles_bad_input
def scan(
    files: Files,
    run: Annotated[Path, typer.Option("-o", "--run", help="Run folder (created; resumed if it exists).")],
    history: History = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N writes.", min=1)] = None,
    conversation: Annotated[list[str] | None, typer.Option("--conversation", help="Only this conversation "
                                                           "(repeatable).")] = None,
    until: Annotated[str, typer.Option("--until", help="Stop after views, obligations, primitives or "
                                       "labels.")] = "labels",
    backend: BackendOpt = DEFAULT_BACKEND,
    model: ModelOpt = DEFAULT_MODEL,
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    dtype: DtypeOpt = None,
    threads: ThreadsOpt = None,
    model_role: ModelRoleOpt = None,
    limit_floor: Annotated[float, typer.Option(help="Search-limited floor (share of the top BM25 score).",
                                               min=0.0, max=1.0)] = 0.5,
    no_cache: NoCacheOpt = False,
    skip_invalid: SkipInvalid = False,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Go on when the log (or the selection) has "
                                              "no write; without it that is exit code 2.")] = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json (the report on stdout).")] = Fmt.table,
) -> None:
    """Audit every write: evidence views, obligations, D/E/R annotation in both views, labels, scope report."""
    from .evidence import EvidenceSettings
    from .models import SCAN_ROLES
    from .scan import UNTIL, ScanConfig

    if until not in UNTIL:
        _bad(f"--until must be views, obligations, primitives or labels, not {until!r}")
    cfg = ScanConfig(evidence=EvidenceSettings(limit_floor=limit_floor), limit=limit, conversations=conversation,
                     until=until,
                     models=_roles(backend, model, base_url, top_logprobs, model_role, SCAN_ROLES, dtype, threads),
                     files=[str(f.resolve()) for f in files], history=[str(h.resolve()) for h in history or []],
                     use_cache=not no_cache, skip_invalid=skip_invalid, allow_empty=allow_empty)
    _run_scan(cfg, run, format)


def _run_scan(cfg: Any, run: Path, format: Fmt) -> None:
    """The body of scan, decompose and annotate: one pipeline, stopped after `cfg.until`."""
    from .report.table import print_rubric, print_scope
    from .scan import scan as run_scan
    from .scan import select_writes

    files, history = [Path(f) for f in cfg.files], [Path(h) for h in cfg.history]
    log = _load(files, history, cfg.skip_invalid)
    unknown = sorted(set(cfg.conversations or []) - set(log.conversations))
    if unknown:
        _bad(f"unknown conversation(s): {', '.join(unknown)}")
    if not select_writes(log, cfg) and not cfg.allow_empty:
        what = "the selected conversations have" if cfg.conversations else "the log has"
        _bad(f"{what} no write ({len(log.conversations)} conversations, {log.n_turns} turns): nothing to audit, "
             "and a run of zero writes would pass every gate. Pass --allow-empty to go on anyway.")
    with _pool(cfg.use_cache) as pool, _backend_errors(), _progress() as bar:
        report = run_scan(log, run, cfg=cfg, input_files=[*history, *files], progress=_stage_progress(bar),
                          pool=pool, notify=lambda m: err.print(f"[yellow]note[/yellow]: {escape(m)}"))
    if not report:
        err.print(f"stopped after {cfg.until}; files in {escape(str(run))}")
        return
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_scope(out, report)
        print_rubric(out, report.get("rubric"))
        judges: dict[str, list[str]] = {}
        for role, model in report["run"].get("judged_by", {}).items():
            judges.setdefault(model, []).append(role)
        err.print("judged by: " + "; ".join(f"{escape(m)} as {', '.join(r)}" for m, r in judges.items()))
        err.print(f"run folder: {escape(str(run))} ({report['run']['writes']} writes, "
                  f"{report['run']['seconds']:.0f} s)")


def _stage_command(run: Path, until: str, format: Fmt, rubric: str | None = None) -> None:
    from .runs import load_meta
    from .scan import ScanConfig

    cfg = ScanConfig.from_meta(load_meta(run), until)
    if cfg is None:
        _bad(f"{run} is not a run folder made by `derivaudit scan` (no meta.json with its settings)")
    cfg.rubric = rubric
    _run_scan(cfg, run, format)


RunArg = Annotated[Path, typer.Argument(help="A run folder started by `derivaudit scan ... --until views`.")]


@app.command()
@handles_bad_input
def decompose(run: RunArg) -> None:
    """Step 2a: the semantic obligations of every write in RUN (settings as recorded by scan)."""
    _stage_command(run, "obligations", Fmt.table)


@app.command()
@handles_bad_input
def annotate(
    run: RunArg,
    rubric: Annotated[str | None, typer.Option("--rubric", help="Then ask annotator A's primitives again in "
                                               "this wording (b; A uses a) and report the agreement between "
                                               "wordings (rubric stability, App. B).")] = None,
    format: Annotated[Fmt, typer.Option("--format", help="table or json (the report on stdout).")] = Fmt.table,
) -> None:
    """Step 2b: D/E/R primitives from both annotators, adjudication and labels for RUN; prints the report."""
    from .rubric import WORDINGS

    if rubric is not None and rubric not in WORDINGS[1:]:
        _bad(f"--rubric must be b (annotator A asks in wording a), not {rubric!r}")
    _stage_command(run, "labels", format, rubric)


class Level(StrEnum):
    write = "write"
    obligation = "obligation"


@app.command()
@handles_bad_input
def export(
    run: Annotated[Path, typer.Argument(help="A run folder made by scan.")],
    output: Annotated[Path, typer.Argument(help="CSV file to write (atomic).")],
    level: Annotated[Level, typer.Option("--level", help="One row per write or per obligation x view.")]
    = Level.write,
) -> None:
    """Reference labels as CSV: ids, text, view, label, primitives of A, B and adjudicator, cited passages."""
    from .export import export_csv

    n = export_csv(run, output, level.value)
    err.print(f"wrote {n} rows to {escape(str(output))}")


# ---------------------------------------------------------------- replay


@app.command()
@handles_bad_input
def replay(
    run: Annotated[Path, typer.Argument(help="A run folder made by scan.")],
    view: Annotated[str | None, typer.Option("--view", help="A view, a comma list, or all.")] = None,
    evidence: Annotated[str, typer.Option("--evidence", help="expanded, citation_only or both (for --view).")]
    = "expanded",
    setting: Annotated[list[str] | None, typer.Option("--setting", help="A canonical setting "
                       "(holistic/citation_only, holistic/expanded, obligation/expanded) or 'canonical' for all "
                       "three; repeatable. Default without --view: the three.")] = None,
    combine_rule: Annotated[str, typer.Option("--combine", help="Split views: min, mean or noisy_and.")] = "min",
    point: Annotated[str, typer.Option("--point", help="Operating point: auto, argmax or crossfit.")] = "auto",
    noise: Annotated[str | None, typer.Option("--noise", help="Noise probe levels, e.g. 0,2,4.")] = None,
    reference: Annotated[str, typer.Option("--reference", help="The answer key: model (scan's labels, as the "
                                           "paper), human (review import) or gold (meta.gold in the log); "
                                           "always the expanded view's label.")] = "model",
    backend: BackendOpt = DEFAULT_BACKEND,
    model: ModelOpt = DEFAULT_MODEL,
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    dtype: DtypeOpt = None,
    threads: ThreadsOpt = None,
    model_role: ModelRoleOpt = None,
    no_cache: NoCacheOpt = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Step 3: would a write-time verifier keep the valid memories and reject the unsupported ones?"""
    from . import runs
    from .replay import check_options, parse_noise, parse_settings
    from .replay import replay as run_replay
    from .report.table import print_replay

    roles = _roles(backend, model, base_url, top_logprobs, model_role, ("verifier",), dtype, threads)
    try:
        settings = parse_settings(view, evidence, setting)
        levels = parse_noise(noise)
        runs.require(run, (runs.LABELS, runs.VIEWS, runs.OBLIGATIONS), f"run `derivaudit scan ... -o {run}` first")
        check_options(combine_rule, point, reference, run)
    except ValueError as e:
        _bad(str(e))
    with runs.lock(run), _pool(not no_cache) as pool, _backend_errors():
        be = pool.get(roles.spec("verifier"))
        with _progress() as bar:
            report = run_replay(run, be, settings, rule=combine_rule, point=point, noise=levels,
                                reference=reference, progress=_stage_progress(bar))
        report["model"] = be.identity()
        report["usage"] = {**be.usage.to_dict(), **({"cache_hits": be.hits, "cache_misses": be.misses}
                                                    if hasattr(be, "hits") else {})}
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_replay(out, report)
        u = report["usage"]
        err.print(f"model calls: {u['calls']}, prompts scored: {u['prompts']}, tokens computed "
                  f"{u['computed_tokens']}/{u['prompt_tokens']}"
                  + (f", cache hits {u['cache_hits']}/{u['cache_hits'] + u['cache_misses']}" if "cache_hits" in u
                     else ""))


@app.command()
@handles_bad_input
def drift(
    files: Files,
    history: History = None,
    against: Annotated[str, typer.Option("--against", help="Compare a rewrite with its round-0 ancestor (root) "
                                         "or its parent.")] = "root",
    method: Annotated[str, typer.Option("--method", help="versions (each version's time and status, compared; "
                                        "default) or pair (one yes/no question per kind over both versions).")]
    = "versions",
    threshold: Annotated[float, typer.Option("--threshold", help="--method pair: drift when log-odds > 0 (argmax, "
                                             "default) or >= this threshold.")] = 0.0,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Also write the report with every "
                                                "judged pair as JSON (atomic).")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a one-file HTML page (tables, plots, "
                                              "examples; no scripts, no network).")] = None,
    backend: BackendOpt = DEFAULT_BACKEND,
    model: ModelOpt = DEFAULT_MODEL,
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    dtype: DtypeOpt = None,
    threads: ThreadsOpt = None,
    model_role: ModelRoleOpt = None,
    no_cache: NoCacheOpt = False,
    skip_invalid: SkipInvalid = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Temporal and modality drift of rewritten memories, per rewriting round (DerivAudit §4.3)."""
    from .drift import AGAINST, METHODS
    from .drift import drift as run_drift
    from .report.table import print_drift

    if against not in AGAINST:
        _bad(f"--against must be {' or '.join(AGAINST)}, not {against!r}")
    if method not in METHODS:
        _bad(f"--method must be {' or '.join(METHODS)}, not {method!r}")
    log = _load(files, history or [], skip_invalid)
    roles = _roles(backend, model, base_url, top_logprobs, model_role, ("verifier",), dtype, threads)
    with _pool(not no_cache) as pool, _backend_errors(), _progress() as bar:
        report = run_drift(log, pool.get(roles.spec("verifier")), against=against, method=method,
                           threshold=threshold, progress=_stage_progress(bar))
    if not report["pairs"]:
        _bad("no write of the log has a round (0 = extraction, 1+ = rewrites): nothing to compare; "
             + "; ".join(report["unplaced"][:3]))
    _write_json(output, report)
    _write_html(html, "drift_html", report)
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_drift(out, report)


def _write_json(path: Path | None, report: dict[str, Any]) -> None:
    """The built tests' full JSON report, written atomically."""
    if path is None:
        return
    with atomic_writer(path) as fh:
        fh.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    err.print(f"wrote {escape(str(path))}")


def _write_html(path: Path | None, page: str, report: dict[str, Any]) -> None:
    """The built tests' HTML page (derivaudit/report/built.py), written atomically."""
    if path is None:
        return
    from .report import built

    with atomic_writer(path) as fh:
        fh.write(getattr(built, page)(report))
    err.print(f"wrote {escape(str(path))}")


families_app = typer.Typer(help="Matched families with controls (DerivAudit §3.2, App. E): does a verifier accept "
                           "compositions nothing supports?", no_args_is_help=True)
app.add_typer(families_app, name="families")


def _family_errors(e: Any) -> NoReturn:
    _print_problems(e.problems)
    err.print(f"[red]{len(e.problems)} problem(s); nothing was built.[/red]")
    raise typer.Exit(EXIT_BAD_INPUT)


@families_app.command("build")
@handles_bad_input
def families_build(
    families_file: Annotated[Path, typer.Argument(help="Family file (JSONL, see docs/commands.md).")],
    log: Annotated[Path, typer.Option("--log", help="A memory log whose conversations give the neutral "
                                      "padding turns.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder for items.jsonl and build.json.")],
    size: Annotated[int, typer.Option("--size", min=6, help="Passages in every version's evidence.")] = 16,
    seed: Annotated[int, typer.Option("--seed", help="Seed of padding and positions.")] = 0,
) -> None:
    """Build every family's four cells and two controls over the same distractors and padding."""
    from .families import FamilyError, build

    padding = _load([log], [], False)
    try:
        doc = build(families_file, padding, output, size=size, seed=seed)
    except FamilyError as e:
        _family_errors(e)
    err.print(f"built {doc['items']} versions of {doc['families']} families in {escape(str(output))} "
              f"({size} passages each)")


@families_app.command("run")
@handles_bad_input
def families_run(
    built: Annotated[Path, typer.Argument(help="A folder made by `families build`.")],
    view: Annotated[str, typer.Option("--view", help="Views, comma-separated.")] = "holistic,obligation",
    html: Annotated[Path | None, typer.Option("--html", help="Also write a one-file HTML page (tables, plots, "
                                              "examples; no scripts, no network).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Also write the report with every "
                                                "scored version as JSON (atomic).")] = None,
    threshold: Annotated[float, typer.Option("--threshold", help="Accept when log-odds > 0 (argmax, default) or "
                                             ">= this threshold.")] = 0.0,
    backend: BackendOpt = DEFAULT_BACKEND,
    model: ModelOpt = DEFAULT_MODEL,
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    dtype: DtypeOpt = None,
    threads: ThreadsOpt = None,
    model_role: ModelRoleOpt = None,
    no_cache: NoCacheOpt = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Score every built version and report acceptance per cell, the valid-invalid gap and controls."""
    from .families import FamilyError, run
    from .report.table import print_families
    from .views import VIEWS

    views = [v.strip() for v in view.split(",") if v.strip()]
    unknown = [v for v in views if v not in VIEWS]
    if unknown or not views:
        _bad(f"unknown view(s) {', '.join(unknown) or '(none)'} (known: {', '.join(VIEWS)})")
    roles = _roles(backend, model, base_url, top_logprobs, model_role, ("verifier",), dtype, threads)
    try:
        with _pool(not no_cache) as pool, _backend_errors(), _progress() as bar:
            report = run(built, pool.get(roles.spec("verifier")), views, threshold=threshold,
                         progress=_stage_progress(bar))
    except FamilyError as e:
        _family_errors(e)
    _write_json(output, report)
    _write_html(html, "families_html", report)
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_families(out, report)


@app.command()
@handles_bad_input
def probe(
    probes: Annotated[Path, typer.Argument(help="Probe items (JSONL, see docs/commands.md).")],
    runs: Annotated[int, typer.Option("--runs", min=1, help="Repetitions of every option order.")] = 3,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a one-file HTML page (tables, plots, "
                                              "examples; no scripts, no network).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Also write the report with every "
                                                "answer as JSON (atomic).")] = None,
    backend: BackendOpt = DEFAULT_BACKEND,
    model: ModelOpt = DEFAULT_MODEL,
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    dtype: DtypeOpt = None,
    threads: ThreadsOpt = None,
    model_role: ModelRoleOpt = None,
    no_cache: NoCacheOpt = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """The downstream cost of admission errors: a reader answers with a memory slot correct, distorted or empty."""
    from .probe import ProbeError, run
    from .report.table import print_probe

    roles = _roles(backend, model, base_url, top_logprobs, model_role, ("verifier",), dtype, threads)
    try:
        with _pool(not no_cache) as pool, _backend_errors(), _progress() as bar:
            report = run(probes, pool.get(roles.spec("verifier")), runs=runs, progress=_stage_progress(bar))
    except ProbeError as e:
        _print_problems(e.problems)
        err.print(f"[red]{len(e.problems)} problem(s); nothing was probed.[/red]")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    _write_json(output, report)
    _write_html(html, "probe_html", report)
    if format is Fmt.json:
        sys.stdout.buffer.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_probe(out, report)


@app.command()
@handles_bad_input
def report(
    run: Annotated[Path, typer.Argument(help="A run folder made by scan (and optionally replay).")],
    format: Annotated[ReportFmt, typer.Option("--format", help="table, json, md, csv, junit or html.")]
    = ReportFmt.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here (atomic) instead of stdout.")]
    = None,
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help="Gate, e.g. \"unsupported_admitted>0.25\"; "
                       "exit 1 when it holds. Repeatable. With --baseline it reads the change.")] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="Another run folder to compare against.")]
    = None,
    reps: Annotated[int, typer.Option("--reps", min=100, help="Bootstrap resamples of conversations.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed (fixed: same run, same intervals).")] = 0,
) -> None:
    """What a run found, for people (table, md, html) and machines (json, csv, junit), with CI gates."""
    from . import report as rep
    from .report.table import print_report

    try:
        doc = rep.build(run, reps=reps, seed=seed)
        if baseline is not None:
            rep.compare(doc, rep.build(baseline, reps=reps, seed=seed))
        gates = rep.evaluate_gates(doc, fail_if or [])
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
    _print_gates(gates)
