"""The audit pipeline: scan, decompose, annotate, export, review."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..audit.evidence import EvidenceSettings
from ..models import SCAN_ROLES
from ..runs.folder import STAGES
from ..safe import escape
from ._common import (
    OUTPUT,
    Files,
    Fmt,
    FmtOpt,
    History,
    ReportFmt,
    SkipInvalid,
    _backend_errors,
    _bad,
    _load,
    _pool,
    _print_ci_gates,
    _progress,
    _stage_progress,
    app,
    err,
    handles_bad_input,
    model_options,
    out,
    pick_run,
    print_json,
)

review_app = typer.Typer(help="Human review of the reference labels: a blinded, stratified sample out, the "
                         "reviewers' answers back in (DerivAudit §5).", no_args_is_help=True)
app.add_typer(review_app, name="review")


@review_app.command("sample")
@handles_bad_input
def review_sample(
    output: Annotated[Path, typer.Option("-o", "--output", help="The review sheet to write (CSV, atomic)."), OUTPUT],
    run: Annotated[Path | None, typer.Argument(help="A run folder made by scan; default: the most recent under "
                                               "./runs/.", show_default=False)] = None,
    per_stratum: Annotated[int, typer.Option("--per-stratum", min=1, help="Rows per stratum (view x label, "
                                             "repaired, multi-passage).")] = 25,
    budget: Annotated[int | None, typer.Option(
        "--budget", min=2, help="Review whole writes instead: N writes for a category each, chosen where labels "
        "narrow the corrected rates most (stratified by the judge's category and confidence, inclusion "
        "probabilities recorded); `review import` then corrects every rate of `report`.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample and its order.")] = 0,
    bom: Annotated[bool, typer.Option("--bom/--no-bom", help="Start the CSV with a UTF-8 byte-order mark, so "
                                      "Excel reads it as UTF-8 (LibreOffice and Python do either way).")] = True,
) -> None:
    """A blinded review sheet: per obligation (memory, obligation, numbered passages, empty D/E/R/label), or with
    --budget per write (memory, its cited passages and earlier history, an empty category)."""
    from ..review import reference
    from ..review.obligations import ReviewError, sample
    from ..runs.folder import lock

    run = pick_run(run, output)
    try:
        with lock(run):
            doc = (reference.sample(run, output, budget=budget, seed=seed, bom=bom) if budget is not None
                   else sample(run, output, per_stratum=per_stratum, seed=seed, bom=bom))
    except ReviewError as e:
        _bad(str(e))
    if budget is not None:
        err.print(f"wrote {len(doc['rows'])} writes to {escape(str(output))} ({escape(doc['how'])}: "
                  + ", ".join(f"{escape(h)} {d['drawn']} of {d['size']}" for h, d in doc["strata"].items())
                  + f"); fill the category column, then run `derivaudit review import {escape(str(run))} "
                  f"{escape(str(output))}`")
        return
    counts = ", ".join(f"{escape(k)} {v} of {doc['available'][k]}" for k, v in doc["strata"].items())
    err.print(f"wrote {len(doc['rows'])} rows to {escape(str(output))} ({counts}); fill human_D, human_E and "
              f"human_R with yes or no, then run `derivaudit review import {escape(str(run))} {escape(str(output))}`")


@review_app.command("import")
@handles_bad_input
def review_import(
    run: Annotated[Path, typer.Argument(help="The run folder the sheet was sampled from.")],
    sheet: Annotated[Path, typer.Argument(help="The filled review sheet (CSV).")],
    format: FmtOpt = Fmt.table,
) -> None:
    """Validate the reviewers' answers, store them in RUN/review.jsonl and show model-human agreement; a
    write-level sheet (review sample --budget) goes to RUN/review_writes.jsonl and corrects the report's rates."""
    from ..report.table import print_review
    from ..review import reference
    from ..review.obligations import ReviewError, import_review
    from ..runs.folder import lock

    write_level = reference.is_write_sheet(sheet)
    try:
        with lock(run):
            metrics = reference.import_reviews(run, sheet) if write_level else import_review(run, sheet)
    except ReviewError as e:
        _bad(str(e))
    if write_level and format is not Fmt.json:
        err.print(f"imported {metrics['imported']} reviewed writes into {escape(metrics['file'])} ("
                  + ", ".join(f"{escape(h)} {n}" for h, n in metrics["by_stratum"].items())
                  + f"); `derivaudit report {escape(str(run))}` now shows the corrected rates")
        return
    if format is Fmt.json:
        print_json(metrics)
    else:
        print_review(out, metrics)


# ---------------------------------------------------------------- scan and export


@app.command()
@handles_bad_input
@model_options(*SCAN_ROLES)
def scan(
    files: Files,
    run: Annotated[Path | None, typer.Option(
        "-o", "--run", help="Run folder (created; resumed if it exists). Default: runs/<LOG's name without its "
        "extension>, reused when it holds this log's earlier scan (a log that grew: only new writes are judged), "
        "else runs/<name>-2, -3, ... (another version of the log is never mixed into an old run).")] = None,
    history: History = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N writes.", min=1)] = None,
    conversation: Annotated[list[str] | None, typer.Option("--conversation", help="Only this conversation "
                                                           "(repeatable).")] = None,
    sample: Annotated[int | None, typer.Option(
        "--sample", min=1, help="Audit a random sample of N writes of the store (stratified by conversation, at "
        "least one each, seeded) and report every rate as an estimate for the whole store with its 95% interval. "
        "Choosing N: a rate near p has an interval about 2 x 1.96 x sqrt(p(1-p)/N) wide when N is small against "
        "the store (about +/-0.10 at N = 100, +/-0.05 at N = 400 for p = 0.5; less for rates near 0 or 1); label "
        "some sampled writes (`review sample --budget`) to correct the judge too.")] = None,
    sample_seed: Annotated[int, typer.Option("--sample-seed", help="Seed of --sample (recorded in the run).")] = 0,
    until: Annotated[str, typer.Option("--until", help=f"Stop after {', '.join(STAGES)}.")] = "labels",
    limit_floor: Annotated[float, typer.Option(help="Search-limited floor (share of the top BM25 score).",
                                               min=0.0, max=1.0)] = 0.5,
    models: Any = None,
    use_cache: bool = True,
    skip_invalid: SkipInvalid = False,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Go on when the log (or the selection) has "
                                              "no write; without it that is exit code 2.")] = False,
    calibrate_on: Annotated[str, typer.Option(
        "--calibrate-on", help="Where the judge's calibration items come from: log (default: this log's own "
        "turns, paid for on every new log), packaged (a hand-written corpus, scored once per model and then "
        "cached: cheaper, but its thresholds were worse on LoCoMo, see docs/benchmarks.md), or the path of a "
        "memory log of your own in your data's style.")] = "log",
    format: Annotated[ReportFmt, typer.Option(
        "--format", help="On stdout: table or json (the scan's report), or md, csv, junit, html (the whole report, "
        "as `derivaudit report` writes it, with one JUnit test case per --fail-if gate).")] = ReportFmt.table,
    fail_if: Annotated[list[str] | None, typer.Option(
        "--fail-if", help="Gate the scan, e.g. \"unsupported.corrected>0.30\": exit 1 when it holds (repeatable; "
        "the metrics of `derivaudit report`, checked before any model work; replay metrics need `replay`).")]
    = None,
) -> None:
    """Audit every write: evidence views, obligations, D/E/R annotation in both views, labels, scope report."""
    from ..audit.calibrate import CORPORA
    from ..audit.scan import UNTIL, ScanConfig
    from ..report.ci_gates import check_scan_ci_gates

    try:
        check_scan_ci_gates(fail_if or [])
    except ValueError as e:
        _bad(str(e))
    if until not in UNTIL:
        _bad(f"--until must be one of {', '.join(UNTIL)}, not {until!r}")
    if calibrate_on not in CORPORA:
        if not Path(calibrate_on).expanduser().is_file():
            _bad(f"--calibrate-on: {calibrate_on!r} is neither {' nor '.join(CORPORA)} nor a file")
        calibrate_on = str(Path(calibrate_on).expanduser().resolve())
    cfg = ScanConfig(evidence=EvidenceSettings(limit_floor=limit_floor), limit=limit, conversations=conversation,
                     sample=sample, sample_seed=sample_seed, until=until,
                     models=models,
                     files=[str(f.resolve()) for f in files], history=[str(h.resolve()) for h in history or []],
                     use_cache=use_cache, skip_invalid=skip_invalid, allow_empty=allow_empty,
                     calibrate_on=calibrate_on)
    if fail_if and until != "labels":
        _bad(f"--fail-if gates the labels; --until {until} stops before them")
    _run_scan(cfg, run, format.value, fail_if or [])


def _run_scan(cfg: Any, run: Path | None, format: str, fail_if: list[str] | None = None) -> None:
    """The body of scan, decompose and annotate: one pipeline, stopped after `cfg.until`."""
    from ..audit.scan import scan as run_scan
    from ..audit.scan import select_writes
    from ..rates.sampling import SampleError

    files, history = [Path(f) for f in cfg.files], [Path(h) for h in cfg.history]
    log = _load(files, history, cfg.skip_invalid)
    if run is None:
        from ..runs.workspace import scan_folder

        run, why = scan_folder(files, log)
        if why:
            err.print(f"[yellow]note[/yellow]: {escape(why)}: scanning into {escape(str(run))}")
    unknown = sorted(set(cfg.conversations or []) - set(log.conversations))
    if unknown:
        _bad(f"unknown conversation(s): {', '.join(unknown)}")
    try:
        chosen = select_writes(log, cfg)
    except SampleError as e:
        _bad(f"--sample {cfg.sample}: {e}")
    if not chosen and not cfg.allow_empty:
        what = "the selected conversations have" if cfg.conversations else "the log has"
        _bad(f"{what} no write ({len(log.conversations)} conversations, {log.n_turns} turns): nothing to audit, "
             "and a run of zero writes would pass every gate. Pass --allow-empty to go on anyway.")
    with _pool(cfg.use_cache) as pool, _backend_errors(), _progress() as bar:
        report = run_scan(log, run, cfg=cfg, input_files=[*history, *files], progress=_stage_progress(bar),
                          pool=pool, notify=lambda m: err.print(f"[yellow]note[/yellow]: {escape(m)}"))
    if not report:
        err.print(f"stopped after {cfg.until}; files in {escape(str(run))}")
        return
    gates = _scan_report(run, report, format, fail_if or [])
    judges: dict[str, list[str]] = {}
    for role, model in report["run"].get("judged_by", {}).items():
        judges.setdefault(model, []).append(role)
    err.print("judged by: " + "; ".join(f"{escape(m)} as {', '.join(r)}" for m, r in judges.items()))
    err.print(f"run folder: {escape(str(run))} ({report['run']['writes']} writes, "
              f"{report['run']['seconds']:.0f} s)")
    _print_ci_gates(gates)


def _scan_report(run: Path, report: dict[str, Any], format: str, fail_if: list[str]) -> list[dict[str, Any]]:
    """The scan's output on stdout in `format`, and its gates evaluated (not yet printed)."""
    import sys

    from .. import report as rep
    from ..report.table import print_lifecycle, print_rubric, print_scope, print_trust

    doc = rep.build(run) if fail_if or format not in ("json",) else None
    gates = rep.evaluate_ci_gates(doc, fail_if) if doc is not None else []
    if doc is not None:
        doc["gates"] = gates
    if format == "json":
        print_json(report)
    elif format == "table":
        print_scope(out, report)
        print_trust(out, doc)  # the judge's rates corrected, or a line saying they are not
        print_rubric(out, report.get("rubric"))
        print_lifecycle(out, report.get("lifecycle"))
    else:
        sys.stdout.buffer.write(rep.render(doc, format, gates))
        sys.stdout.buffer.flush()
    return gates


def _stage_command(run: Path, until: str, format: Fmt, rubric: str | None = None) -> None:
    from ..audit.scan import ScanConfig
    from ..runs.folder import load_meta

    cfg = ScanConfig.from_meta(load_meta(run), until)
    if cfg is None:
        _bad(f"{run} is not a run folder made by `derivaudit scan` (no meta.json with its settings)")
    cfg.rubric = rubric
    _run_scan(cfg, run, format.value)


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
                                               "wordings (rubric stability, App. B), beside the typed "
                                               "four-way label asked in both wordings.")] = None,
    format: Annotated[Fmt, typer.Option("--format", help="table or json (the report on stdout).")] = Fmt.table,
) -> None:
    """Step 2b: D/E/R primitives from both annotators, adjudication and labels for RUN; prints the report."""
    from ..audit.rubric import WORDINGS

    if rubric is not None and rubric not in WORDINGS[1:]:
        _bad(f"--rubric must be b (annotator A asks in wording a), not {rubric!r}")
    _stage_command(run, "labels", format, rubric)


class Level(StrEnum):
    write = "write"
    obligation = "obligation"


@app.command()
@handles_bad_input
def export(
    paths: Annotated[list[Path], typer.Argument(
        help="RUN then OUTPUT: the run folder made by scan and the CSV file to write (atomic). With one path, that "
        "path is OUTPUT and the run is the most recent under ./runs/.", metavar="[RUN] OUTPUT", show_default=False)],
    level: Annotated[Level, typer.Option("--level", help="One row per write or per obligation x view.")]
    = Level.write,
) -> None:
    """Reference labels as CSV: ids, text, view, label, primitives of A, B and adjudicator, cited passages."""
    from ..review.export import export_csv
    from ..runs.workspace import is_run

    if len(paths) > 2:
        _bad(f"export takes [RUN] OUTPUT, not {len(paths)} paths")
    if len(paths) == 1 and paths[0].is_dir() and is_run(paths[0]):
        _bad(f"{paths[0]} is a run folder: name the CSV file to write too, e.g. `derivaudit export {paths[0]} "
             "labels.csv`")
    run, output = (paths[0], paths[1]) if len(paths) == 2 else (pick_run(None, paths[0]), paths[0])
    pick_run(run, output)
    n = export_csv(run, output, level.value)
    err.print(f"wrote {n} rows to {escape(str(output))}")
