"""Read-path audits: echo, overlap."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ..log.io import atomic_writer, load_log
from ..log.records import MemoryLog
from ..safe import dumps as json_dumps
from ..safe import escape
from ._common import (
    Files,
    History,
    ReadPathFmt,
    ReadPathFormat,
    ReadPathOut,
    SkipInvalid,
    _backend_errors,
    _bad,
    _pool,
    _print_ci_gates,
    _report_skipped,
    app,
    err,
    handles_bad_input,
    model_options,
    out,
)

AnswersOpt = Annotated[bool, typer.Option(
    "--answers", help="Also answer every read that logs an expected answer from each method's context "
    "(the generator role) and judge the answers (the answer_judge role): accuracy, ΔAccuracy and flips "
    "against no memory, old-answer adoption and DCE, with intervals. Runs a model.")]


@app.command()
@handles_bad_input
@model_options("generator", "answer_judge")
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
    answers: AnswersOpt = False,
    models: Any = None,
    use_cache: bool = True,
) -> None:
    """Memory echo over read events (the Memory Echo paper): families from provenance, Echo Density, RRI, WEP;
    with --answers, what FPA does to the answers (accuracy, old-answer adoption, DCE)."""
    from ..readpath.answers import ECHO_METHODS
    from ..readpath.echo import SERVING, audit_echo

    if serve not in (None, *SERVING):
        _bad(f"--serve {escape(serve)!r}: known serving rules: {', '.join(SERVING)}")
    if serve is None and not answers and any(".fpa" in g for g in fail_if or []):
        _bad("a gate on an .fpa metric needs --serve fpa (or --answers)")

    def audit(log: MemoryLog) -> dict[str, Any]:
        doc = audit_echo(log, k=k, window=window, serve=serve or ("fpa" if answers else None)).to_dict()
        return _with_answers("echo", doc, log, answers, ECHO_METHODS, models, use_cache, k=k)

    _read_path("echo", [*(history or []), *files], skip_invalid, fail_if, format, output, audit,
               "only families and storage (rri_storage) can be measured")


def _with_answers(name: str, doc: dict[str, Any], log: MemoryLog, answers: bool, methods: tuple[str, ...],
                  models: Any, use_cache: bool, **kw: Any) -> dict[str, Any]:
    """The audit document with the answer replay added (and its headline numbers as gateable metrics)."""
    if not answers:
        return doc
    from ..readpath.answers import answer_metrics, replay_answers

    if not any(r.expected for r in log.reads):
        err.print("[yellow]warning[/yellow]: no read logs an expected answer; nothing to answer")
    with _pool(use_cache) as pool, _backend_errors():
        res = replay_answers(log, pool.get(models.spec("generator")), pool.get(models.spec("answer_judge")),
                             methods=methods, **kw)
    res["settings"]["models"] = {"generator": str(models.spec("generator")),
                                 "answer_judge": str(models.spec("answer_judge"))}
    doc["answers"] = res
    doc["metrics"].update(answer_metrics(name, res))
    return doc


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
@model_options("generator", "answer_judge")
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
    answers: AnswersOpt = False,
    index: Annotated[Path | None, typer.Option(
        "--index", help="With --answers: MemTrim's trie, read from this file when it exists (memories it holds "
        "are not parsed again) and written back after the run, so a growing store parses only its new "
        "memories.")] = None,
    models: Any = None,
    use_cache: bool = True,
) -> None:
    """Query–memory overlap over read events (the MemTrim paper): risky middle band, TA vs TD-Dup, MemTrim;
    with --answers, MemTrim whole (units parsed, trie built at write time) and its effect on the answers."""
    from ..readpath.answers import OVERLAP_METHODS
    from ..readpath.overlap import audit_overlap, check_band

    try:
        lo, hi = (float(x) for x in band.split(","))
        check_band((lo, hi))
    except ValueError:
        _bad(f"--band {escape(band)!r}: expected LOW,HIGH with 0 <= LOW < HIGH <= 1, e.g. 0.2,0.6")
    if index is not None and not answers:
        _bad("--index is MemTrim's trie for the answer replay: it needs --answers")
    trie = None
    if index is not None and index.exists():
        from ..readpath.memtrim import load_index

        try:
            trie = load_index(index)
        except ValueError as e:
            _bad(str(e))

    def audit(log: MemoryLog) -> dict[str, Any]:
        doc = _with_answers("overlap", audit_overlap(log, k=k, band=(lo, hi)), log, answers, OVERLAP_METHODS,
                            models, use_cache, k=k, band=(lo, hi), **({"index": trie} if trie else {}))
        if index is not None:
            with atomic_writer(index, "wb") as fh:
                fh.write(json_dumps(doc["answers"]["memtrim"]["index"]))
            err.print(f"wrote {escape(str(index))}")
        return doc

    _read_path("overlap", [*(history or []), *files], skip_invalid, fail_if, format, output, audit,
               "nothing to measure")
