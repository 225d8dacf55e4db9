"""The importers by name, and the one import pipeline every importer runs through: convert, place
each problem at its source, check the records by the log's rules, write the schema-v1 log."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..log.io import LogError
from ..log.records import Problem
from ..registry import Registry

if TYPE_CHECKING:
    pass

from .common import ORIGIN, ImportResult

Importer = Callable[[str | Path], ImportResult]


IMPORTERS = Registry("importer", {
    "locomo": "derivaudit.importers.locomo:convert",
    "mem0": "derivaudit.importers.mem0:convert",
    "mem0-db": "derivaudit.importers.mem0_db:convert",
    "graphiti": "derivaudit.importers.graphiti:convert",
    "letta": "derivaudit.importers.letta:convert",
    "openai-agents": "derivaudit.importers.openai_agents:convert",
    "langgraph": "derivaudit.importers.langgraph:convert",
}, group="derivaudit.importers", check=lambda obj: None if callable(obj) else "not a function PATH -> ImportResult")


def importers() -> Registry:
    return IMPORTERS


def _at_source(p: Problem, out: str, src: str, origins: list[str | None]) -> Problem:
    """A problem found in a converted record, named where the user can find it: the input file and
    the record's place in it (the output file does not exist yet, and its line numbers mean nothing
    to the user)."""
    if p.file != out:
        return p
    origin = origins[p.line - 1] if p.line is not None and 0 < p.line <= len(origins) else None
    where = origin or (f"imported record {p.line}" if p.line is not None else None)
    field = f"{where} ({p.field})" if where and p.field else where or p.field
    return Problem(src, None, field, p.code, p.message)


def run_import(source: str, path: str | Path, out: str | Path, *, skip_invalid: bool = False,
               allow_empty: bool = False, options: dict[str, Any] | None = None):
    """Convert `path` with the named importer, validate the result with the same checks as every
    load, and write it to `out` atomically. Strict: any problem raises LogError, nothing written.
    `options` go to the importer by name (e.g. mem0-db's `scopes`); one it does not take is an
    error. A log with no memory write is an error unless `allow_empty`: an audit of it would pass
    every gate, and the importer's notes say why it is empty."""
    import inspect

    from ..log.io import check_rows, header, operation_to_dict, read_to_dict, turn_to_dict, write_jsonl, write_to_dict

    table = importers()
    if source not in table:
        raise LogError([Problem(str(path), None, None, "bad_value",
                                table.unknown(source))])
    fn = table.get(source)
    options = {k: v for k, v in (options or {}).items() if v is not None}
    takes = set(inspect.signature(fn).parameters) - {"path"}
    if set(options) - takes:
        raise LogError([Problem(str(path), None, None, "bad_value", f"the {source} importer takes no "
                                f"{', '.join('--' + k for k in sorted(set(options) - takes))} option")])
    res = fn(path, **options)
    rows = [header(f"derivaudit import {source}"), *res.turns, *res.writes, *res.reads, *res.operations]
    origins = [r.pop(ORIGIN, None) for r in rows]
    log, problems = check_rows(str(out), rows)
    problems = res.problems + [_at_source(p, str(out), str(path), origins) for p in problems]
    if problems and not skip_invalid:
        raise LogError(problems)
    holds_writes = getattr(sys.modules[fn.__module__], "HOLDS_WRITES", True)  # False: the turn side only
    if not log.writes and not problems and not allow_empty and holds_writes:
        why = res.notes.get("note") or "the source holds no memory write this importer can read"
        raise LogError([Problem(str(path), None, None, "no_writes",
                                f"no memory write imported: {why} (--allow-empty writes the turns alone)")])
    log.skipped = problems
    out_rows = [header(f"derivaudit import {source}")]
    out_rows += [turn_to_dict(t) for c in log.conversations.values() for t in c.turns]
    out_rows += [write_to_dict(w) for w in log.writes]
    out_rows += [read_to_dict(r) for r in log.reads]
    out_rows += [operation_to_dict(o) for o in log.operations]
    write_jsonl(out, out_rows)
    return log, res.notes
