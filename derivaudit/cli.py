"""The `derivaudit` command line: parse options, call the library, render. No audit logic here.

Exit codes: 0 success, 1 a CI gate failed, 2 bad input or usage. Data goes to stdout, progress
and messages to stderr, so `--format json` output can be piped.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .evidence import EvidenceSettings, Views, build_views
from .io import LogError, atomic_writer, check_log, load_log
from .records import MemoryLog, Problem

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
    """Bad input ends with a clear message and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LogError as e:
            _print_problems(e.problems)
            err.print(f"[red]{len(e.problems)} problem(s); nothing was processed.[/red] "
                      "Fix them, or pass --skip-invalid to go on without the bad records.")
            raise typer.Exit(EXIT_BAD_INPUT) from None

    return wrapper  # type: ignore[return-value]


def _report_skipped(log: MemoryLog) -> None:
    if not log.skipped:
        return
    _print_problems(log.skipped, limit=20)
    by_code: dict[str, int] = {}
    for p in log.skipped:
        by_code[p.code] = by_code.get(p.code, 0) + 1
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(by_code.items()))
    err.print(f"[yellow]--skip-invalid: skipped {len(log.skipped)} bad record(s) ({escape(summary)})[/yellow]")


def _load(files: list[Path], history: list[Path] | None, skip_invalid: bool) -> MemoryLog:
    log = load_log([*(history or []), *files], skip_invalid=skip_invalid)
    _report_skipped(log)
    return log


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=False, disable=not err.is_terminal)


def _stage_progress(bar: Progress) -> Callable[[str, int, int], None]:
    """A progress callback that opens one bar per pipeline stage on first use."""
    tasks: dict[str, Any] = {}

    def progress(stage: str, advance: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
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


Files = Annotated[list[Path], typer.Argument(help="Memory log JSONL file(s) (schema v1).", show_default=False)]
History = Annotated[list[Path] | None, typer.Option("--history", help="Extra JSONL file(s) holding the turns.")]
SkipInvalid = Annotated[bool, typer.Option("--skip-invalid", help="Skip bad records (counted and reported) "
                                           "instead of stopping.")]


@app.command()
def validate(
    files: Files,
    history: History = None,
    format: Annotated[Fmt, typer.Option("--format", help="table (one line per problem) or json.")] = Fmt.table,
) -> None:
    """Check memory logs against schema v1 and the history rules. Exit 0 when clean, 2 when not."""
    paths = [*(history or []), *files]
    try:
        log, problems = check_log(paths)
    except LogError as e:
        log, problems = None, e.problems
    if format is Fmt.json:
        doc = {
            "ok": not problems,
            "files": [str(p) for p in paths],
            "conversations": len(log.conversations) if log else 0,
            "turns": log.n_turns if log else 0,
            "writes": len(log.writes) if log else 0,
            "problems": [p.to_dict() for p in problems],
        }
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        _print_problems(problems, limit=len(problems))
        if log is not None and not problems:
            err.print(f"[green]ok[/green]: {len(log.conversations)} conversations, {log.n_turns} turns, "
                      f"{len(log.writes)} writes")
        elif problems:
            err.print(f"[red]{len(problems)} problem(s)[/red]")
    raise typer.Exit(EXIT_BAD_INPUT if problems else EXIT_OK)


def _passages_table(title: str, passages: tuple[Any, ...]) -> Table:
    t = Table(title=title, title_justify="left", show_lines=False, expand=True)
    t.add_column("turn", no_wrap=True)
    t.add_column("speaker", no_wrap=True)
    t.add_column("time", no_wrap=True)
    t.add_column("text", ratio=1)
    for p in passages:
        t.add_row(escape(p.turn_id), escape(p.speaker), escape(p.time or ""), escape(p.text))
    return t


def _show_views(v: Views) -> None:
    w = v.write
    flag = " [yellow](search-limited)[/yellow]" if v.search_limited else ""
    out.rule(f"write {escape(w.write_id)} · conversation {escape(w.conversation_id)}{flag}")
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
    log = _load(files, history, skip_invalid)
    wanted = set(write) if write else None
    if wanted:
        unknown = sorted(wanted - {w.write_id for w in log.writes})
        if unknown:
            err.print(f"[red]error[/red]: unknown write id(s): {escape(', '.join(unknown))}")
            raise typer.Exit(EXIT_BAD_INPUT)
    settings = EvidenceSettings(limit_floor=limit_floor)
    n_total = len(wanted) if wanted else len(log.writes)
    limited = 0
    if format is ViewsFmt.jsonl or output is not None:
        sink = atomic_writer(output) if output else contextlib.nullcontext(sys.stdout.buffer)
        with sink as fh, _progress() as bar:
            task = bar.add_task("building views", total=n_total)
            for v in build_views(log, settings, wanted):
                limited += v.search_limited
                fh.write(orjson.dumps(v.to_dict()) + b"\n")
                bar.advance(task)
    else:
        for v in build_views(log, settings, wanted):
            limited += v.search_limited
            _show_views(v)
    share = limited / n_total if n_total else 0.0
    err.print(f"{n_total} writes; search-limited: {limited} ({share:.1%}) at floor {limit_floor}"
              + (f"; written to {escape(str(output))}" if output else ""))


@app.command("import")
@handles_bad_input
def import_(
    source: Annotated[str, typer.Argument(help="locomo, mem0 or graphiti.")],
    path: Annotated[Path, typer.Argument(help="The source file.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Memory log JSONL to write (atomic).")],
    skip_invalid: SkipInvalid = False,
) -> None:
    """Convert a public dataset or memory-system export into a derivaudit memory log."""
    from .importers import importers, run_import

    if source not in importers():
        err.print(f"[red]error[/red]: unknown source {escape(source)!r}; "
                  f"known: {', '.join(sorted(importers()))}")
        raise typer.Exit(EXIT_BAD_INPUT)
    log, notes = run_import(source, path, output, skip_invalid=skip_invalid)
    _report_skipped(log)
    extra = "".join(f", {k}: {v}" for k, v in notes.items())
    err.print(f"[green]wrote[/green] {escape(str(output))}: {len(log.conversations)} conversations, "
              f"{log.n_turns} turns, {len(log.writes)} writes{escape(extra)}")


# ---------------------------------------------------------------- model-using commands

BackendOpt = Annotated[str, typer.Option("--backend", help="transformers (CPU/GPU), vllm (local GPU) or "
                                         "openai (OpenAI-compatible servers).")]
ModelOpt = Annotated[str, typer.Option("--model", help="smollm2 (embedded, offline), a .gguf file, a model "
                                       "folder, a hub id, or the served model name (openai).")]
BaseUrlOpt = Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible server URL, e.g. "
                                                      "http://gpu1:8000/v1 (repeat for a fleet).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the result cache.")]
TopLogprobsOpt = Annotated[int | None, typer.Option("--top-logprobs", help="openai: top_logprobs to request "
                                                    "(the server's cap; default 20).", min=1, max=100)]


def open_backend(backend: str, model: str, base_url: list[str] | None, no_cache: bool,
                 top_logprobs: int | None = None):
    from .models import BACKENDS, BackendError, load_backend

    if backend not in BACKENDS:
        err.print(f"[red]error[/red]: unknown backend {escape(backend)!r} (known: {', '.join(BACKENDS)})")
        raise typer.Exit(EXIT_BAD_INPUT)
    opts: dict[str, Any] = {}
    if backend == "openai":
        opts = {"base_urls": base_url or ["http://127.0.0.1:8000/v1"], "top_logprobs": top_logprobs}
    elif base_url:
        err.print("[red]error[/red]: --base-url is only for --backend openai")
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        with err.status(f"loading {escape(model)} ({backend})"):
            return load_backend(backend, model, cache=not no_cache, **opts)
    except BackendError as e:
        err.print(f"[red]error[/red]: {escape(str(e))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None


def _read_passages(path: Path) -> list[dict[str, Any]]:
    """Evidence for `check`: JSONL objects with at least `text` (speaker/time optional), or plain
    text with one passage per line."""
    try:
        lines = [x for x in path.read_text("utf-8").splitlines() if x.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise LogError([Problem(str(path), None, None, "unreadable", f"cannot read evidence: {e}")]) from None
    passages = []
    for n, line in enumerate(lines, start=1):
        if line.lstrip().startswith("{"):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise LogError([Problem(str(path), n, None, "invalid_json", f"invalid JSON: {e}")]) from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
                raise LogError([Problem(str(path), n, "text", "missing_field", "passage needs a non-empty text")])
            passages.append(obj)
        else:
            passages.append({"text": line})
    return passages


@app.command()
@handles_bad_input
def check(
    record: Annotated[str, typer.Option("--record", help="The memory text to verify.")],
    evidence: Annotated[Path, typer.Option("--evidence", help="Passages: JSONL with text/speaker/time, or "
                                           "plain text, one passage per line, in time order.")],
    view: Annotated[str, typer.Option("--view", help="Verification view.")] = "holistic",
    backend: BackendOpt = "transformers",
    model: ModelOpt = "smollm2",
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    no_cache: NoCacheOpt = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Score one record against passages with one view and print the verdict (log-odds, argmax)."""
    from .views import VIEWS, Memory, evidence_block, get_view

    if view not in VIEWS:
        err.print(f"[red]error[/red]: unknown view {escape(view)!r} (known: {', '.join(VIEWS)})")
        raise typer.Exit(EXIT_BAD_INPUT)
    if not record.strip():
        err.print("[red]error[/red]: --record is empty")
        raise typer.Exit(EXIT_BAD_INPUT)
    passages = _read_passages(evidence)
    be = open_backend(backend, model, base_url, no_cache, top_logprobs)
    # One record, one question: split views see the record as their single claim.
    prompts = get_view(view).prompts(evidence_block(record, passages), Memory(record, [("fact", record)],
                                                                            [("What is recorded?", record)]))
    scores = be.score(prompts)
    failed = [x for x in scores if not x.ok]
    score = failed[0] if failed else min(scores, key=lambda x: x.logodds)  # a split view passes only if all do
    doc = {"record": record, "view": view, "passages": len(passages), "model": be.identity(), **score.to_dict(),
           "decision": None if score.logodds is None else ("admit" if score.logodds > 0 else "reject"),
           "operating_point": "argmax (log-odds > 0)"}
    if format is Fmt.json:
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    elif score.error:
        out.print(f"[red]scoring error[/red]: {escape(score.error)}; top tokens: {escape(str(score.top))}")
    else:
        t = Table(show_header=False)
        t.add_row("record", escape(record))
        t.add_row("view", view)
        t.add_row("log-odds", f"{score.logodds:+.3f}" + (" (bounded)" if score.bounded else ""))
        t.add_row("log p(yes) / log p(no)", f"{score.logp_yes:.3f} / {score.logp_no:.3f}")
        t.add_row("decision (argmax)", doc["decision"])
        t.add_row("top tokens", escape(", ".join(f"{tok!r} {lp:.2f}" for tok, lp in score.top)))
        out.print(t)
    be.close()
    raise typer.Exit(EXIT_OK if score.ok else EXIT_BAD_INPUT)


cache_app = typer.Typer(help="The persistent model-result cache ($DERIVAUDIT_HOME/cache.sqlite).",
                        no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("stats")
def cache_stats(format: Annotated[Fmt, typer.Option("--format")] = Fmt.table) -> None:
    """Entries and size of the result cache, by backend, model and kind."""
    from .models.cache import ResultCache

    st = ResultCache().stats()
    if format is Fmt.json:
        sys.stdout.buffer.write(orjson.dumps(st, option=orjson.OPT_INDENT_2) + b"\n")
        return
    out.print(f"{escape(st['path'])}: {st['entries']} entries, {st['bytes'] / 1e6:.1f} MB")
    t = Table("backend", "model", "kind", "entries")
    for r in st["by_model"]:
        t.add_row(escape(r["backend"]), escape(r["model"]), r["kind"], str(r["entries"]))
    out.print(t)


@cache_app.command("clear")
def cache_clear(
    model: Annotated[str | None, typer.Option("--model", help="Only entries whose model contains this.")] = None,
) -> None:
    """Delete cached results (all, or one model's)."""
    from .models.cache import ResultCache

    n = ResultCache().clear(model)
    err.print(f"deleted {n} cached result(s)")


# ---------------------------------------------------------------- scan and export


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def print_scope(report: dict[str, Any]) -> None:
    t = Table(title="Evidence scope (expanded view unless noted; metric meanings in the README)",
              title_justify="left")
    t.add_column("metric", no_wrap=True)
    for col in ("conv-balanced", "write-weighted", "difference", "writes"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, v in report["scope"].items():
        diff = "–" if v["difference"] is None else f"{v['difference']:+.3f}"
        t.add_row(name, _pct(v["balanced"]), _pct(v["weighted"]), diff, str(v["n_writes"]))
    out.print(t)
    lw = report["largest_weighting_difference"]
    if lw["metric"]:
        out.print(f"largest balanced-vs-weighted difference: {lw['metric']} {lw['difference']:+.3f}")
    ag = report["agreement"]
    kap = ", ".join(
        f"{k} {_pct(ag[k]['agreement'])} (κ {'–' if ag[k]['kappa'] is None else format(ag[k]['kappa'], '.2f')})"
        for k in ("D", "E", "R", "label"))
    out.print(f"annotator agreement: {kap}; adjudicated {ag['adjudicated']}/{ag['items']} "
              f"({_pct(ag['adjudication_rate'])})")
    dec = report["decomposition"]
    out.print(f"decomposition: {dec['ok']} ok, {dec['retried']} after retry, {dec['fallback']} failed "
              f"(audited as the whole record; failure rate {_pct(dec['failure_rate'])}); "
              f"{dec['obligations']} obligations; scoring errors: {report['scoring_errors']}")


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
    backend: BackendOpt = "transformers",
    model: ModelOpt = "smollm2",
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    backend_b: Annotated[str | None, typer.Option("--backend-b", help="Annotator B's backend "
                                                  "(default: --backend).")] = None,
    model_b: Annotated[str | None, typer.Option("--model-b", help="Annotator B's model (default: --model).")] = None,
    adjudicator_backend: Annotated[str | None, typer.Option("--adjudicator-backend")] = None,
    adjudicator_model: Annotated[str | None, typer.Option("--adjudicator-model",
                                                          help="Default: --model.")] = None,
    limit_floor: Annotated[float, typer.Option(help="Search-limited floor (share of the top BM25 score).",
                                               min=0.0, max=1.0)] = 0.5,
    no_cache: NoCacheOpt = False,
    skip_invalid: SkipInvalid = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json (the report on stdout).")] = Fmt.table,
) -> None:
    """Audit every write: evidence views, obligations, D/E/R annotation in both views, labels, scope report."""
    opts = {"files": [str(f.resolve()) for f in files], "history": [str(h.resolve()) for h in history or []],
            "limit": limit,
            "conversation": conversation, "backend": backend, "model": model, "base_url": base_url,
            "top_logprobs": top_logprobs, "backend_b": backend_b, "model_b": model_b,
            "adjudicator_backend": adjudicator_backend, "adjudicator_model": adjudicator_model,
            "limit_floor": limit_floor, "no_cache": no_cache, "skip_invalid": skip_invalid}
    _run_scan(opts, run, until, format)


def _run_scan(opts: dict[str, Any], run: Path, until: str, format: Fmt) -> None:
    """The body of scan, decompose and annotate: one pipeline, stopped after `until`."""
    from .annotate import Annotator
    from .scan import ScanConfig
    from .scan import scan as run_scan

    if until not in ("views", "obligations", "primitives", "labels"):
        err.print(f"[red]error[/red]: --until must be views, obligations, primitives or labels, not {until!r}")
        raise typer.Exit(EXIT_BAD_INPUT)
    files, history = [Path(f) for f in opts["files"]], [Path(h) for h in opts["history"]]
    log = _load(files, history, opts["skip_invalid"])
    conversation = opts["conversation"]
    if conversation:
        unknown = sorted(set(conversation) - set(log.conversations))
        if unknown:
            err.print(f"[red]error[/red]: unknown conversation(s): {escape(', '.join(unknown))}")
            raise typer.Exit(EXIT_BAD_INPUT)
    loaded: dict[tuple[str, str], Any] = {}

    def get(be: str | None, m: str | None):
        key = (be or opts["backend"], m or opts["model"])
        if key not in loaded:
            loaded[key] = open_backend(key[0], key[1], opts["base_url"], opts["no_cache"], opts["top_logprobs"])
        return loaded[key]

    annotators = (Annotator("A", get(None, None), "a"),
                  Annotator("B", get(opts["backend_b"], opts["model_b"]), "b"),
                  Annotator("adjudicator", get(opts["adjudicator_backend"], opts["adjudicator_model"]), "a"))
    cfg = ScanConfig(evidence=EvidenceSettings(limit_floor=opts["limit_floor"]), limit=opts["limit"],
                     conversations=conversation, until=until, cli=opts)
    with _progress() as bar:
        progress = _stage_progress(bar)
        report = run_scan(log, run, annotators, cfg=cfg, input_files=[*history, *files], progress=progress)
    for be in loaded.values():
        be.close()
    if not report:
        err.print(f"stopped after {until}; files in {escape(str(run))}")
        return
    if format is Fmt.json:
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_scope(report)
        err.print(f"run folder: {escape(str(run))} ({report['run']['writes']} writes, "
                  f"{report['run']['seconds']:.0f} s)")


def _stage_command(run: Path, until: str, format: Fmt) -> None:
    from .scan import load_meta

    opts = load_meta(run).get("cli")
    if not opts:
        err.print(f"[red]error[/red]: {escape(str(run))} is not a run folder made by `derivaudit scan` "
                  "(no meta.json with its settings)")
        raise typer.Exit(EXIT_BAD_INPUT)
    _run_scan(opts, run, until, format)


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
    format: Annotated[Fmt, typer.Option("--format", help="table or json (the report on stdout).")] = Fmt.table,
) -> None:
    """Step 2b: D/E/R primitives from both annotators, adjudication and labels for RUN; prints the report."""
    _stage_command(run, "labels", format)


class Level(StrEnum):
    write = "write"
    obligation = "obligation"


@app.command()
def export(
    run: Annotated[Path, typer.Argument(help="A run folder made by scan.")],
    output: Annotated[Path, typer.Argument(help="CSV file to write (atomic).")],
    level: Annotated[Level, typer.Option("--level", help="One row per write or per obligation x view.")]
    = Level.write,
) -> None:
    """Reference labels as CSV: ids, text, view, label, primitives of A, B and adjudicator, cited passages."""
    from .export import export_csv

    try:
        n = export_csv(run, output, level.value)
    except FileNotFoundError as e:
        err.print(f"[red]error[/red]: {escape(str(e))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    err.print(f"wrote {n} rows to {escape(str(output))}")


# ---------------------------------------------------------------- replay


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None:
        return ""
    return f" ({ci[0]:.0%}–{ci[1]:.0%})"


def print_replay(report: dict[str, Any]) -> None:
    points = sorted({m["operating_point"] for m in report["settings"].values()})
    t = Table(title=f"Admission replay — operating point {report['operating_point']} ({', '.join(points)}), "
                    f"split views combined by {report['combine']}; 95% bootstrap CIs over conversations",
              title_justify="left")
    for col in ("setting", "valid kept", "unsupported admitted", "n+/n−", "AUC", "err", "repaired kept"):
        t.add_column(col, justify="left" if col == "setting" else "right", no_wrap=True)
    for name, m in report["settings"].items():
        auc = "–" if m["auc"] is None else f"{m['auc']:.2f}"
        t.add_row(name, _pct(m["valid_kept"]) + _ci(m["valid_kept_ci"]),
                  _pct(m["unsupported_admitted"]) + _ci(m["unsupported_admitted_ci"]),
                  f"{m['n_pos']}/{m['n_neg']}", auc, str(m["scoring_errors"]), f"{m['repaired_kept']}/{m['repaired']}")
    out.print(t)
    excluded = {k: max(m["excluded"][k] for m in report["settings"].values()) for k in ("ambiguous", "unresolved")}
    out.print(f"excluded from ground truth (at most, per setting): ambiguous {excluded['ambiguous']}, "
              f"unresolved {excluded['unresolved']}")
    for d in report.get("differences", []):
        if d["difference"] is not None:
            out.print(f"{d['metric']}: {escape(d['from'])} → {escape(d['to'])}: {d['difference']:+.1%}{_ci(d['ci'])}"
                      f" (n={d['n']})")
    nz = report.get("noise")
    if nz:
        lv = ", ".join(f"+{k}: mean log-odds {'–' if v['mean_logodds'] is None else format(v['mean_logodds'], '.3f')}"
                       f", admitted {_pct(v['admitted_argmax'])}" for k, v in nz["levels"].items())
        out.print(f"noise probe ({nz['writes']} supported writes; {nz['skipped_too_few_extras']} with too few "
                  f"extras): {lv}")


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
    backend: BackendOpt = "transformers",
    model: ModelOpt = "smollm2",
    base_url: BaseUrlOpt = None,
    top_logprobs: TopLogprobsOpt = None,
    no_cache: NoCacheOpt = False,
    format: Annotated[Fmt, typer.Option("--format", help="table or json.")] = Fmt.table,
) -> None:
    """Step 3: would a write-time verifier keep the valid memories and reject the unsupported ones?"""
    from .replay import CANONICAL, COMBINE
    from .replay import replay as run_replay
    from .views import VIEWS

    def bad(msg: str) -> None:
        err.print(f"[red]error[/red]: {escape(msg)}")
        raise typer.Exit(EXIT_BAD_INPUT)

    settings: list[tuple[str, str]] = []
    if view:
        names = list(VIEWS) if view == "all" else [v.strip() for v in view.split(",") if v.strip()]
        unknown = [v for v in names if v not in VIEWS]
        if unknown:
            bad(f"unknown view(s) {', '.join(unknown)} (known: {', '.join(VIEWS)})")
        evs = ["citation_only", "expanded"] if evidence == "both" else [evidence]
        if any(e not in ("citation_only", "expanded") for e in evs):
            bad("--evidence must be expanded, citation_only or both")
        settings += [(v, e) for v in names for e in evs]
    for s in setting or ([] if view else ["canonical"]):
        if s == "canonical":
            settings += list(CANONICAL.values())
        elif s in CANONICAL:
            settings.append(CANONICAL[s])
        else:
            bad(f"unknown setting {s!r} (known: {', '.join(CANONICAL)}, canonical)")
    settings = list(dict.fromkeys(settings))
    if combine_rule not in COMBINE:
        bad(f"--combine must be one of {', '.join(COMBINE)}")
    if point not in ("auto", "argmax", "crossfit"):
        bad("--point must be auto, argmax or crossfit")
    levels: list[int] = []
    if noise:
        try:
            levels = sorted({int(x) for x in noise.split(",")})
        except ValueError:
            bad(f"--noise takes comma-separated integers, got {noise!r}")
        if any(x < 0 for x in levels):
            bad("--noise levels must be >= 0")
    for name in ("labels.jsonl", "views.jsonl", "obligations.jsonl"):
        if not (run / name).exists():
            bad(f"{run / name} is missing: run `derivaudit scan ... -o {run}` first")
    be = open_backend(backend, model, base_url, no_cache, top_logprobs)
    with _progress() as bar:
        progress = _stage_progress(bar)
        report = run_replay(run, be, settings, rule=combine_rule, point=point, noise=levels, progress=progress)
    report["model"] = be.identity()
    report["usage"] = {**be.usage.to_dict(), **({"cache_hits": be.hits, "cache_misses": be.misses}
                                                if hasattr(be, "hits") else {})}
    be.close()
    if format is Fmt.json:
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_replay(report)
        u = report["usage"]
        err.print(f"model calls: {u['calls']}, prompts scored: {u['prompts']}, tokens computed "
                  f"{u['computed_tokens']}/{u['prompt_tokens']}"
                  + (f", cache hits {u['cache_hits']}/{u['cache_hits'] + u['cache_misses']}" if "cache_hits" in u
                     else ""))


# ---------------------------------------------------------------- report


class ReportFmt(StrEnum):
    table = "table"
    json = "json"
    md = "md"
    csv = "csv"
    junit = "junit"
    html = "html"


def print_report(report: dict[str, Any], top: int = 10) -> None:
    from .report import change_rows, flagged

    r = report["run"]
    out.print(f"[bold]derivaudit report[/bold] — {r['writes']} writes, {r['conversations']} conversations, "
              f"{escape(str(r['path']))}")
    t = Table(title="Scope: conversation-balanced with a 95% bootstrap interval over conversations; write-weighted "
                    "beside it", title_justify="left")
    t.add_column("metric", no_wrap=True)
    for col in ("balanced", "95% CI", "write-weighted", "writes"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, v in report["scope"].items():
        lo, hi = v["balanced_ci"]
        t.add_row(name, _pct(v["balanced"]), "–" if lo is None else f"{lo:.1%}–{hi:.1%}", _pct(v["weighted"]),
                  str(v["n_writes"]))
    out.print(t)
    if report.get("replay"):
        print_replay(report["replay"])
    if "change" in report:
        c = Table(title=f"Change against the baseline {escape(report['baseline']['run']['path'])}",
                  title_justify="left")
        for col in ("metric", "baseline", "this run", "change"):
            c.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
        for row in change_rows(report, dash="–"):
            c.add_row(*row)
        out.print(c)
    bad = flagged(Path(r["path"]))
    if bad:
        out.print(f"[bold]Unsupported or contradicted after expansion[/bold] ({len(bad)}):")
        for w in bad[:top]:
            out.print(f"  {escape(w['expanded_label'])} {escape(w['write_id'])}: {escape(' '.join(w['text'].split()))}")
        if len(bad) > top:
            out.print(f"  ... and {len(bad) - top} more (--format csv or export for all)")


@app.command()
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

    try:
        doc = rep.build(run, reps=reps, seed=seed)
        if baseline is not None:
            rep.compare(doc, rep.build(baseline, reps=reps, seed=seed))
        gates = rep.evaluate_gates(doc, fail_if or [])
    except rep.ReportError as e:
        err.print(f"[red]error[/red]: {escape(str(e))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    doc["gates"] = gates
    if format is ReportFmt.table:
        if output is not None:
            err.print("[red]error[/red]: --format table prints to the terminal; pick md, json, csv, junit or html "
                      "for -o")
            raise typer.Exit(EXIT_BAD_INPUT)
        print_report(doc)
    else:
        if format is ReportFmt.json:
            data = rep.to_json(doc)
        elif format is ReportFmt.md:
            data = rep.to_markdown(doc, gates).encode()
        elif format is ReportFmt.csv:
            data = rep.to_csv(doc).encode()
        elif format is ReportFmt.junit:
            data = rep.to_junit(doc).encode()
        else:
            from .html import render

            data = render(doc, gates).encode()
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with atomic_writer(output, "wb") as fh:
                fh.write(data)
            err.print(f"wrote {escape(str(output))} ({len(data):,} bytes)")
    for g in gates:
        value = "no value" if g["value"] is None else f"{g['value']:.4g}"
        status = "[red]FAILED[/red]" if g["failed"] else "[green]passed[/green]"
        err.print(f"gate {escape(g['expr'])}: {value} on the {g['on']} → {status}")
    if any(g["failed"] for g in gates):
        raise typer.Exit(EXIT_GATE)
