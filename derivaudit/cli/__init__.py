"""The `derivaudit` command line: parse options, call the library, print. No audit logic lives here.

Exit codes: 0 success, 1 a CI gate failed, 2 bad input, usage or a fault, 128+N a signal. Data goes
to stdout, progress and messages to stderr, so `--format json` output can be piped.

One module per command family, each registering its commands on the shared `app` (`_common`), in
the order `--help` lists them: `log` (validate, views, import), `audit` (scan, decompose,
annotate, export, review), `admission` (check, replay, drift, families, probe), `report`,
`readpath` (echo, overlap), `cache`, `serve`.
"""

from __future__ import annotations

from importlib import import_module

from ._common import RateColumn, _stage_progress, app, err, out

for _family in ("log", "audit", "admission", "report", "readpath", "cache", "serve"):
    import_module(f"{__name__}.{_family}")

__all__ = ["RateColumn", "_stage_progress", "app", "err", "out"]
