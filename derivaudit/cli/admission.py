"""Admission and built tests: check, replay, drift, families, probe."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ..admission.views import CHECK_VIEW, COMPARED_VIEWS
from ..safe import escape
from ._common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    OUTPUT,
    Files,
    Fmt,
    FmtOpt,
    History,
    SkipInvalid,
    _backend_errors,
    _bad,
    _load,
    _pool,
    _print_problems,
    _progress,
    _stage_progress,
    _write_html,
    _write_json,
    app,
    err,
    handles_bad_input,
    model_options,
    out,
    pick_run,
    print_json,
)


class Split(StrEnum):
    record = "record"
    decompose = "decompose"


@app.command()
@handles_bad_input
@model_options("verifier")
def check(
    record: Annotated[str, typer.Option("--record", help="The memory text to verify.")],
    evidence: Annotated[Path, typer.Option("--evidence", help="Passages: JSONL with text/speaker/time, or "
                                           "plain text, one passage per line, in time order.")],
    view: Annotated[str, typer.Option("--view", help="Verification view.")] = CHECK_VIEW,
    split: Annotated[Split, typer.Option("--split", help="record: the record is its own single claim / "
                                         "obligation / QA answer; decompose: the model writes them (as "
                                         "admit() does).")] = Split.record,
    models: Any = None,
    use_cache: bool = True,
    format: FmtOpt = Fmt.table,
) -> None:
    """Score one record against passages with one view and print the verdict (log-odds, argmax)."""
    from ..admission.gate import admit, check_document
    from ..admission.views import parse_views
    from ..log.io import read_passages
    from ..report.table import print_check

    try:
        (view,) = parse_views(view, one=True)
    except ValueError as e:
        _bad(str(e))
    if not record.strip():
        _bad("--record is empty")
    passages = read_passages(evidence)
    roles = models
    with _pool(use_cache) as pool, _backend_errors():
        v = admit(record, passages, view=view, verifier=pool.get(roles.spec("verifier")), split=split.value)
    score = v["verdict"]
    doc = check_document(record, passages, v)
    if format is Fmt.json:
        print_json(doc)
    else:
        print_check(out, doc)
    raise typer.Exit(EXIT_OK if score["error"] is None else EXIT_BAD_INPUT)


# ---------------------------------------------------------------- replay


@app.command()
@handles_bad_input
@model_options("verifier")
def replay(
    run: Annotated[Path | None, typer.Argument(help="A run folder made by scan; default: the most recent under "
                                               "./runs/.", show_default=False)] = None,
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
    fresh: Annotated[bool, typer.Option("--fresh", help="Discard the run's earlier replays first (without it they "
                                        "are kept and shown beside this one; the same setting replaces itself).")]
    = False,
    models: Any = None,
    use_cache: bool = True,
    format: FmtOpt = Fmt.table,
) -> None:
    """Step 3: would a write-time verifier keep the valid memories and reject the unsupported ones? Replays add
    to the run's earlier ones (one verifier per run; the same setting again replaces itself)."""
    from ..admission.replay import check_options, parse_noise, parse_settings
    from ..admission.replay import replay as run_replay
    from ..report.table import print_replay
    from ..runs import folder as runs

    roles = models
    run = pick_run(run)
    try:
        settings = parse_settings(view, evidence, setting)
        levels = parse_noise(noise)
        runs.require(run, (runs.LABELS, runs.VIEWS, runs.OBLIGATIONS), f"run `derivaudit scan ... -o {run}` first")
        check_options(combine_rule, point, reference, run)
    except ValueError as e:
        _bad(str(e))
    with runs.lock(run), _pool(use_cache) as pool, _backend_errors():
        be = pool.get(roles.spec("verifier"))
        with _progress() as bar:
            report = run_replay(run, be, settings, rule=combine_rule, point=point, noise=levels,
                                reference=reference, fresh=fresh, progress=_stage_progress(bar))
    if report["kept"]:
        err.print("kept from this run's earlier replays: " + ", ".join(map(escape, report["kept"]))
                  + " (decided again with this replay's answer key and operating point)")
    if report["dropped"]:
        err.print("[yellow]dropped[/yellow] earlier replays made before the run was scanned again: "
                  + ", ".join(map(escape, report["dropped"])) + "; replay them again to see them")
    if format is Fmt.json:
        print_json(report)
    else:
        print_replay(out, report)
        u = report["usage"]
        err.print(f"model calls: {u['calls']}, prompts scored: {u['prompts']}, tokens computed "
                  f"{u['computed_tokens']}/{u['prompt_tokens']}"
                  + (f", cache hits {u['cache_hits']}/{u['cache_hits'] + u['cache_misses']}" if "cache_hits" in u
                     else ""))


@app.command()
@handles_bad_input
@model_options("verifier")
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
                                                "judged pair as JSON (atomic)."), OUTPUT] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a one-file HTML page (tables, plots, "
                                              "examples; no scripts, no network)."), OUTPUT] = None,
    models: Any = None,
    use_cache: bool = True,
    skip_invalid: SkipInvalid = False,
    format: FmtOpt = Fmt.table,
) -> None:
    """Temporal and modality drift of rewritten memories, per rewriting round (DerivAudit §4.3)."""
    from ..built.drift import AGAINST, METHODS
    from ..built.drift import drift as run_drift
    from ..report.table import print_drift

    if against not in AGAINST:
        _bad(f"--against must be {' or '.join(AGAINST)}, not {against!r}")
    if method not in METHODS:
        _bad(f"--method must be {' or '.join(METHODS)}, not {method!r}")
    log = _load(files, history or [], skip_invalid)
    roles = models
    with _pool(use_cache) as pool, _backend_errors(), _progress() as bar:
        report = run_drift(log, pool.get(roles.spec("verifier")), against=against, method=method,
                           threshold=threshold, progress=_stage_progress(bar))
    if not report["pairs"]:
        _bad("no write of the log has a round (0 = extraction, 1+ = rewrites): nothing to compare; "
             + "; ".join(report["unplaced"][:3]))
    _write_json(output, report)
    _write_html(html, "drift_html", report)
    if format is Fmt.json:
        print_json(report)
    else:
        print_drift(out, report)


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
    from ..built.families import FamilyError, build

    padding = _load([log], [], False)
    try:
        doc = build(families_file, padding, output, size=size, seed=seed)
    except FamilyError as e:
        _family_errors(e)
    err.print(f"built {doc['items']} versions of {doc['families']} families in {escape(str(output))} "
              f"({size} passages each)")


@families_app.command("run")
@handles_bad_input
@model_options("verifier")
def families_run(
    built: Annotated[Path, typer.Argument(help="A folder made by `families build`.")],
    view: Annotated[str, typer.Option("--view", help="Verification views, comma-separated.")] = COMPARED_VIEWS,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a one-file HTML page (tables, plots, "
                                              "examples; no scripts, no network)."), OUTPUT] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Also write the report with every "
                                                "scored version as JSON (atomic)."), OUTPUT] = None,
    threshold: Annotated[float, typer.Option("--threshold", help="Accept when log-odds > 0 (argmax, default) or "
                                             ">= this threshold.")] = 0.0,
    operating_point: Annotated[Path | None, typer.Option(
        "--operating-point", help="A run folder replayed by this verifier: decide each view at the operating "
        "point its replay read the view at (DerivAudit §4.3), instead of --threshold.")] = None,
    models: Any = None,
    use_cache: bool = True,
    format: FmtOpt = Fmt.table,
) -> None:
    """Score every built version and report acceptance per cell, the valid-invalid gap and controls."""
    from ..admission.views import parse_views
    from ..built.families import FamilyError, run
    from ..report.table import print_families

    try:
        views = parse_views(view)
    except ValueError as e:
        _bad(str(e))
    roles = models
    if operating_point is not None:
        from ..admission.replay import replayed_thresholds
        from ..runs import folder as runs

        if threshold != 0.0:
            _bad("--operating-point and --threshold both set the threshold: give one")
        runs.require(operating_point, (runs.REPLAY, runs.REPLAY_SCORES),
                     f"replay it first: `derivaudit replay {operating_point}`")
    try:
        with _pool(use_cache) as pool, _backend_errors(), _progress() as bar:
            verifier = pool.get(roles.spec("verifier"))
            operating = None if operating_point is None else replayed_thresholds(operating_point, views, verifier)
            report = run(built, verifier, views, threshold=threshold, operating=operating,
                         progress=_stage_progress(bar))
    except FamilyError as e:
        _family_errors(e)
    _write_json(output, report)
    _write_html(html, "families_html", report)
    if format is Fmt.json:
        print_json(report)
    else:
        print_families(out, report)


@app.command()
@handles_bad_input
@model_options("verifier")
def probe(
    probes: Annotated[Path, typer.Argument(help="Probe items (JSONL, see docs/commands.md).")],
    runs: Annotated[int, typer.Option("--runs", min=1, help="Repetitions of every option order.")] = 3,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a one-file HTML page (tables, plots, "
                                              "examples; no scripts, no network)."), OUTPUT] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Also write the report with every "
                                                "answer as JSON (atomic)."), OUTPUT] = None,
    models: Any = None,
    use_cache: bool = True,
    format: FmtOpt = Fmt.table,
) -> None:
    """The downstream cost of admission errors: a reader answers with a memory slot correct, distorted or empty."""
    from ..built.probe import ProbeError, run
    from ..report.table import print_probe

    roles = models
    try:
        with _pool(use_cache) as pool, _backend_errors(), _progress() as bar:
            report = run(probes, pool.get(roles.spec("verifier")), runs=runs, progress=_stage_progress(bar))
    except ProbeError as e:
        _print_problems(e.problems)
        err.print(f"[red]{len(e.problems)} problem(s); nothing was probed.[/red]")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    _write_json(output, report)
    _write_html(html, "probe_html", report)
    if format is Fmt.json:
        print_json(report)
    else:
        print_probe(out, report)
