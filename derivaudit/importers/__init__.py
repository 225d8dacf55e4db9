"""Adapters from public datasets and memory systems to the derivaudit memory-log schema.

Each importer is one module with a `convert(path) -> ImportResult` function, registered by name
in IMPORTERS ("module:function", imported only when chosen). A source problem (a malformed id, a
write that cannot be placed in history) is returned as a `Problem`, never guessed around. A module
whose source holds conversations but no memories says so with `HOLDS_WRITES = False` (an import
without writes is then not an error), and may tag each row with its place in the input (`ORIGIN`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..io import LogError
from ..records import Problem
from ..registry import Registry

if TYPE_CHECKING:
    import sqlite3


@dataclass
class ImportResult:
    turns: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    reads: list[dict[str, Any]] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)  # deletions and invalidations
    problems: list[Problem] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def read_json(path: str | Path) -> Any:
    """Read a whole JSON document, turning every failure into a LogError naming the file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise LogError([Problem(str(p), None, None, "file_not_found", "file does not exist")]) from None
    except OSError as e:
        raise LogError([Problem(str(p), None, None, "unreadable", f"cannot read: {e.strerror}")]) from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise LogError([Problem(str(p), e.lineno, None, "invalid_json", f"invalid JSON: {e.msg}")]) from None


def open_sqlite(path: str | Path, table: str, what: str) -> sqlite3.Connection:
    """A store's SQLite file, read-only; LogError naming the file when it is missing, not SQLite, or
    lacks `table` (then it is not `what`)."""
    import sqlite3

    p = Path(path)
    f = str(p)
    if not p.exists():
        raise LogError([Problem(f, None, None, "file_not_found", "file does not exist")])
    try:
        db = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise LogError([Problem(f, None, None, "unreadable", f"not a SQLite database ({e})")]) from None
    if table not in tables:
        db.close()
        raise LogError([Problem(f, None, None, "bad_format", f"no {table!r} table: not {what}")])
    return db


def content_text(content: Any) -> str:
    """A chat message's text: a string, or the `text` of its parts (OpenAI and Letta content lists)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def text_or_none(x: Any) -> str | None:
    """A field kept only when it is text: exports (and SQLite columns) may hold any type there."""
    return x if isinstance(x, str) else None


def instant(x: Any) -> float | None:
    """An ISO 8601 time as seconds since the epoch (no offset means UTC), or None: exports stamp
    times in different zones, so they are compared as instants, never as strings."""
    from datetime import UTC, datetime

    if not isinstance(x, str) or not x.strip():
        return None
    try:
        d = datetime.fromisoformat(x.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp()


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


ORIGIN = "_origin"  # an importer may say where in its input a record came from (a JSON path, table[row])


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

    from ..io import check_rows, header, operation_to_dict, read_to_dict, turn_to_dict, write_jsonl, write_to_dict

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
