"""The result cache: cache stats, cache clear."""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import (
    Fmt,
    app,
    err,
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
