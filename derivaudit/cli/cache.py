"""The result cache: cache stats, clear, export, import."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    EXIT_BAD_INPUT,
    OUTPUT,
    Fmt,
    app,
    err,
    escape,
    handles_bad_input,
    out,
    print_json,
)

cache_app = typer.Typer(help="The persistent model-result cache ($DERIVAUDIT_HOME/cache.sqlite).",
                        no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("stats")
@handles_bad_input
def cache_stats(format: Annotated[Fmt, typer.Option("--format")] = Fmt.table) -> None:
    """Entries and size of the result cache, by backend, model and kind."""
    from ..models.cache import ResultCache

    st = ResultCache().stats()
    if format is Fmt.json:
        print_json(st)
        return
    from ..report.table import print_cache_stats

    print_cache_stats(out, st)


@cache_app.command("clear")
@handles_bad_input
def cache_clear(
    model: Annotated[str | None, typer.Option("--model", help="Only entries whose model contains this.")] = None,
) -> None:
    """Delete cached results (all, or one model's)."""
    from ..models.cache import ResultCache

    n = ResultCache().clear(model)
    err.print(f"deleted {n} cached result(s)")


@cache_app.command("export")
@handles_bad_input
def cache_export(
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write (JSONL; gzip when it ends in .gz)."),
                      OUTPUT],
    model: Annotated[str | None, typer.Option("--model", help="Only entries whose model contains this.")] = None,
) -> None:
    """Write the cached results to a file, to warm another machine's cache (`cache import`)."""
    import gzip

    from ..log.io import OutputError, atomic_writer
    from ..models.cache import ResultCache
    from ..paths import cache_path

    db = cache_path().resolve()
    if output.resolve() in {db.with_name(db.name + x) for x in ("", "-wal", "-shm", "-journal")}:  # links too
        raise OutputError(f"{output}: this is the result cache's own file; write the export elsewhere")
    with atomic_writer(output) as fh:
        if output.name.endswith(".gz"):
            with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
                n = ResultCache().export(gz, model)
        else:
            n = ResultCache().export(fh, model)
    err.print(f"exported {n} cached result(s) to {escape(str(output))}")


@cache_app.command("import")
@handles_bad_input
def cache_import(
    file: Annotated[Path, typer.Argument(help="A file written by `derivaudit cache export`.")],
) -> None:
    """Add the results of an exported cache file to this cache (entries it holds already are kept)."""
    from ..models.cache import CacheFileError, ResultCache

    try:
        read, added = ResultCache().import_file(file)
    except CacheFileError as e:
        err.print(f"[red]{escape(str(e))}[/red]; nothing was imported")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    err.print(f"read {read} cached result(s) from {escape(str(file))}; {added} new")
