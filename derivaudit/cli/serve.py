"""`derivaudit serve`: the write-time gate over HTTP (the library is derivaudit.admission.serve)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..admission.views import GATE_VIEW
from ..extras import missing
from ..safe import escape
from ._common import _backend_errors, _bad, _pool, app, err, handles_bad_input, model_options


@app.command()
@handles_bad_input
@model_options("verifier")
def serve(
    run: Annotated[Path, typer.Option("--from", help="A run folder with a replay: the operating point (view, "
                                      "threshold, combine rule) and the judge it belongs to.")],
    view: Annotated[str, typer.Option("--view", help="The replayed view to gate with.")] = GATE_VIEW,
    evidence: Annotated[str, typer.Option("--evidence", help="expanded (citations and retrieved history) or "
                                          "citation_only, as replayed.")] = "expanded",
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default; another address "
                                      "needs --token-file).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8750,
    log: Annotated[Path, typer.Option("--log", help="The decision log (memory-log JSONL, appended; made if "
                                      "missing, resumed if it is one).")] = Path("gate-decisions.jsonl"),
    token_file: Annotated[Path | None, typer.Option("--token-file", help="A file holding the bearer token every "
                                                    "/v1 request must carry.")] = None,
    max_body: Annotated[int, typer.Option("--max-body", min=1, help="Largest request body, bytes (413 above).")]
    = 1 << 20,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Most turns one conversation may hold "
                                           "(413 above).")] = 20_000,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds a request may wait and run "
                                           "(504 after).")] = 120.0,
    queue: Annotated[int, typer.Option("--queue", min=0, help="Requests that may wait for the judge (503 with "
                                       "Retry-After beyond).")] = 16,
    models: Any = None,
    use_cache: bool = True,
) -> None:
    """Gate memory writes at write time: POST /v1/admit, POST /v1/turns, GET /v1/config, GET /health."""
    try:
        import uvicorn

        from ..admission.serve import Limits, create_app, loopback, open_gate, operating_point, uvicorn_config
    except ImportError as e:
        _bad(missing("derivaudit serve", "serve", e))
    token = None
    if token_file is not None:
        try:
            token = token_file.read_text("utf-8").strip()
        except OSError as e:
            _bad(f"--token-file {token_file}: {e.strerror}")
        if len(token) < 16:
            _bad(f"--token-file {token_file}: the token is {len(token)} characters; use at least 16")
    if not loopback(host) and token is None:
        _bad(f"--host {host} is not a loopback address: anyone who reaches it could use the judge; pass --token-file")
    try:
        point = operating_point(run, view, evidence)
    except ValueError as e:
        _bad(str(e))
    with _pool(use_cache) as pool, _backend_errors():
        backend = pool.get(models.spec("verifier"))
        try:
            gate = open_gate(point, backend, log, Limits(max_body, max_turns, timeout, queue))
        except (ValueError, OSError) as e:
            _bad(str(e))
        if gate.log.torn:
            err.print(f"[yellow]note[/yellow]: {escape(str(log))} ended in a torn line ({len(gate.log.torn)} bytes, "
                      f"never answered); kept apart in {escape(str(gate.log.torn_path))}")
        t = point.threshold
        err.print(f"gate: {escape(point.view)}/{escape(point.evidence)} at threshold {t:g} ({escape(point.point)}, "
                  f"from {escape(str(run))}); {len(gate.log.decisions)} decisions and "
                  f"{sum(map(len, gate.log.turns.values()))} turns in {escape(str(log))}")
        err.print(f"listening on http://{escape(host)}:{port}" + (" (bearer token required)" if token else ""))
        uvicorn.Server(uvicorn_config(create_app(gate, token), host=host, port=port)).run()

