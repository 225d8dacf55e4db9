"""Shared by every command: the app, consoles, output and error helpers, option types, model roles."""

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
from rich.text import Text

from .. import __version__
from ..log.io import LogError, OutputError, atomic_writer, check_output, load_log
from ..log.records import MemoryLog, Problem
from ..log.validation import bad_records
from ..models import BACKENDS, DEFAULT_BACKEND, DEFAULT_MODEL, ROLES, backend_choices
from ..models.cache import CacheFileError
from ..report import FORMATS as REPORT_FORMATS
from ..report.readpath import READPATH_FORMATS
from ..runs.folder import RunError
from ..runs.folder import files as runs_files
from ..safe import dumps as json_dumps
from ..safe import escape

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


FmtOpt = Annotated[Fmt, typer.Option("--format", help="table or json.")]


class ViewsFmt(StrEnum):
    table = "table"
    jsonl = "jsonl"


def _print_problems(problems: list[Problem], *, limit: int = 50) -> None:
    for p in problems[:limit]:
        err.print(f"[red]error[/red] {escape(str(p))}")
    if len(problems) > limit:
        err.print(f"... and {len(problems) - limit} more problems (use --format json to see all)")


class _Output:
    """Marks an option as a file the command writes: `Annotated[Path, typer.Option(...), OUTPUT]`.
    Before any work every such file is checked to be writable and none of the command's inputs."""

    def __repr__(self) -> str:
        return "OUTPUT"


OUTPUT = _Output()


def handles_bad_input(fn: F) -> F:
    """Bad input (a log, or a run folder that is missing, damaged or in use) ends with a clear message
    and exit code 2, never a traceback. The options marked OUTPUT are checked first."""
    import inspect

    outputs = [n for n, p in inspect.signature(fn, eval_str=True).parameters.items()
               if any(m is OUTPUT for m in getattr(p.annotation, "__metadata__", ()))]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _check_outputs(outputs, kwargs)
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
        except CacheFileError as e:  # a damaged result cache, whichever command opened it
            _bad(str(e))

    return wrapper  # type: ignore[return-value]


def _check_outputs(outputs: list[str], kwargs: dict[str, Any]) -> None:
    """Before any work: every output file can be written and is none of the inputs (the paths
    given to the command's other options and arguments), and no two outputs are one file."""
    from ..runs.workspace import is_run

    inputs: list[Path] = []
    for k, v in kwargs.items():
        if k in outputs:
            continue
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, Path):
                inputs.append(x)
                if x.is_dir() and is_run(x):  # a run folder: each of its files is an input
                    inputs.extend(runs_files(x))
    outs = [kwargs[k] for k in outputs if isinstance(kwargs.get(k), Path)]
    for o in outs:
        check_output(o, inputs)
    for i, a in enumerate(outs):
        for b in outs[i + 1:]:
            if os.path.realpath(a) == os.path.realpath(b):
                raise OutputError(f"{b}: two outputs name the same file")


def pick_run(run: Path | None, *outputs: Path | None) -> Path:
    """RUN as given, else the most recent run folder under ./runs/, said on stderr (RunError, exit
    2, when there is none). `outputs`: the command's output files, refused when one is a file of the
    run (every file of a run is an input of a command that reads it)."""
    if run is None:
        run = _latest_run()
    for o in outputs:
        if o is not None:
            check_output(o, [run, *runs_files(run)])
    return run


def _latest_run() -> Path:
    from ..runs.workspace import RUNS, latest

    chosen, found = latest()
    if len(found) == 1:
        err.print(f"using {escape(str(chosen))} (the only run folder under {RUNS}/)")
    else:
        err.print(f"using {escape(str(chosen))}, the most recent of {len(found)} run folders under {RUNS}/ ("
                  + ", ".join(escape(str(p)) for p in found[1:4]) + (", ..." if len(found) > 4 else "")
                  + "); name another as RUN")
    return chosen


def _report_skipped(log: MemoryLog) -> None:
    if not log.skipped:
        return
    _print_problems(log.skipped, limit=20)
    by_code: dict[str, int] = {}
    for p in log.skipped:
        by_code[p.code] = by_code.get(p.code, 0) + 1
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(by_code.items()))
    err.print(f"[yellow]--skip-invalid: skipped {bad_records(log.skipped)} bad record(s) with {len(log.skipped)} "
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


class _LibraryBar:
    """Shows `derivaudit.progress` reports (assembling the embedded model, converting weights) as a
    bar on a terminal's stderr; says nothing where stderr is not a terminal."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: Any = None

    def __call__(self, what: str, done: int, total: int, unit: str) -> None:
        if not err.is_terminal:
            return
        if self.bar is None:
            from rich.progress import DownloadColumn

            counter = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), counter, console=err, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(escape(what), total=total)
        self.bar.update(self.task, completed=done)
        if done >= total:
            self.bar.stop()
            self.bar = None
            err.print(escape(what))


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
    from .. import progress

    progress.set_reporter(_LibraryBar())


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


# the report formats: the terminal table plus every file format the report registry holds
ReportFmt = StrEnum("ReportFmt", [(n, n) for n in ("table", *REPORT_FORMATS)])
REPORT_FORMAT_HELP = f"table, {', '.join(REPORT_FORMATS)}."


# the read-path audits (echo, overlap) have formats of their own: a report-format plugin is not offered there
ReadPathFormat = StrEnum("ReadPathFormat", [(n, n) for n in ("table", *READPATH_FORMATS)])
ReadPathFmt = Annotated[ReadPathFormat, typer.Option("--format", help=f"table, {', '.join(READPATH_FORMATS)}.")]
ReadPathOut = Annotated[Path | None, typer.Option("-o", "--output", help="Write JSON (or the --format) here (atomic)."),
                        OUTPUT]


def _print_ci_gates(gates: list[dict[str, Any]]) -> None:
    for g in gates:
        value = g["why"] if g.get("why") else f"{g['value']:.4g}"
        status = "[red]FAILED[/red]" if g["failed"] else "[green]passed[/green]"
        err.print(f"gate {escape(g['expr'])}: {escape(value)} on the {g['on']} → {status}")
    if any(g["failed"] for g in gates):
        raise typer.Exit(EXIT_GATE)


# ---------------------------------------------------------------- model-using commands

BackendOpt = Annotated[str, typer.Option("--backend", envvar="DERIVAUDIT_BACKEND", help=f"{backend_choices()}.")]
ModelOpt = Annotated[str, typer.Option("--model", envvar="DERIVAUDIT_MODEL", help="qwen2.5-coder-1.5b or smollm2 "
                                       "(embedded, offline), a .gguf file, a model folder, a hub id, or the served "
                                       "model name (openai).")]
DtypeOpt = Annotated[str | None, typer.Option("--dtype", help=(
    f"{'/'.join(BACKENDS.having('dtype'))} weights: auto (bfloat16 on GPUs and CPUs with native bfloat16, "
    "else float32), float32, bfloat16, float16."))]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", envvar="DERIVAUDIT_THREADS", min=1, help=(
    f"{'/'.join(BACKENDS.having('threads'))}: CPU threads (default: one per core that other work leaves free, "
    "re-read as it runs; see docs/models.md)."))]
BaseUrlOpt = Annotated[list[str] | None, typer.Option("--base-url", help="OpenAI-compatible server URL, e.g. "
                                                      "http://gpu1:8000/v1 (repeat for a fleet).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the result cache.")]
TopLogprobsOpt = Annotated[int | None, typer.Option("--top-logprobs", help="openai: top_logprobs to request "
                                                    "(default: 100, or the server's cap when lower).", min=1, max=100)]
ModelRoleOpt = Annotated[list[str] | None, typer.Option(
    "--model-role", help="Give one role its own model: ROLE=MODEL or ROLE=BACKEND:MODEL, e.g. "
    f"annotator_b=openai:qwen2.5-7b (repeatable; roles: {', '.join(ROLES)}). "
    "Roles not named use --backend/--model.")]


def print_json(doc: Any) -> None:
    """A JSON document on stdout (indented; controls and bidi characters escaped), for --format json."""
    sys.stdout.buffer.write(json_dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def _bad(msg: str) -> NoReturn:
    err.print(f"[red]error[/red]: {escape(msg)}")
    raise typer.Exit(EXIT_BAD_INPUT)


def _roles(backend: str, model: str, base_url: list[str] | None, top_logprobs: int | None,
           model_role: list[str] | None, allowed: tuple[str, ...], dtype: str | None = None,
           threads: int | None = None) -> Any:
    """The shared model options as library ModelRoles (usage errors exit 2)."""
    from ..models import BackendError, ModelRoles, ModelSpec

    try:
        return ModelRoles.parse(ModelSpec(backend, model, tuple(base_url or ()), top_logprobs, dtype, threads),
                                model_role or [], allowed)
    except BackendError as e:
        _bad(str(e))


def model_options(*roles: str) -> Callable[[F], F]:
    """The model options, declared once for every model-using command: the command's own signature
    takes `models` (ModelRoles for `roles`, usage errors exit 2) and `use_cache` instead, and its
    --help lists the options below its own."""
    import inspect

    options = {"backend": (BackendOpt, DEFAULT_BACKEND), "model": (ModelOpt, DEFAULT_MODEL),
               "base_url": (BaseUrlOpt, None), "top_logprobs": (TopLogprobsOpt, None), "dtype": (DtypeOpt, None),
               "threads": (ThreadsOpt, None), "model_role": (ModelRoleOpt, None), "no_cache": (NoCacheOpt, False)}

    def deco(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)  # typer reads __signature__ as is: real annotations
        own = [p for n, p in sig.parameters.items() if n not in ("models", "use_cache")]
        added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
                 for n, (a, d) in options.items()]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            v = {n: kwargs.pop(n, d) for n, (_, d) in options.items()}
            kwargs["models"] = _roles(v["backend"], v["model"], v["base_url"], v["top_logprobs"], v["model_role"],
                                      roles, v["dtype"], v["threads"])
            kwargs["use_cache"] = not v["no_cache"]
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return deco


def _pool(use_cache: bool) -> Any:
    from ..models import ModelPool

    return ModelPool(cache=use_cache, on_load=lambda spec: err.status(f"loading {escape(spec.model)} "
                                                                        f"({spec.backend})"))


@contextlib.contextmanager
def _backend_errors() -> Any:
    from ..models import BackendError

    try:
        yield
    except BackendError as e:
        _bad(str(e))


def _write_json(path: Path | None, report: dict[str, Any]) -> None:
    """The built tests' full JSON report, written atomically."""
    if path is None:
        return
    with atomic_writer(path) as fh:
        fh.write(json_dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    err.print(f"wrote {escape(str(path))}")


def _write_html(path: Path | None, page: str, report: dict[str, Any]) -> None:
    """The built tests' HTML page (derivaudit/report/pages.py), written atomically."""
    if path is None:
        return
    from ..report import pages

    with atomic_writer(path) as fh:
        fh.write(getattr(pages, page)(report))
    err.print(f"wrote {escape(str(path))}")
