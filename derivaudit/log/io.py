"""Loading and validating memory logs (JSONL, schema v1): the face of reading input.

Every command loads input through `load_log`, so a problem is reported the same way everywhere:
file, line, field, what is wrong. Strict by default; `skip_invalid=True` keeps the valid records
and returns the rest in `MemoryLog.skipped`. The work is in `lines` (reading files safely),
`recordcheck` (the schema), `history` (rules across records); output files in `outputs`, record
rows in `records`. Their public names are re-exported here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from .history import _assemble
from .lines import _read_lines, limit, read_objects
from .outputs import OutputError, atomic_dir, atomic_writer, check_output, write_jsonl
from .recordcheck import SCHEMA_FILE, _records, schema
from .records import (
    LogError,
    MemoryLog,
    Operation,
    Problem,
    Read,
    Turn,
    Write,
    header,
    operation_to_dict,
    read_to_dict,
    turn_to_dict,
    write_to_dict,
)

__all__ = [
    "SCHEMA_FILE", "LogError", "OutputError", "atomic_dir", "atomic_writer", "check_log", "check_output", "check_rows",
    "header", "limit", "load_log", "operation_to_dict", "read_objects", "read_passages", "read_records",
    "read_to_dict", "schema", "turn_to_dict", "write_jsonl", "write_to_dict",
]


def read_records(path: str | Path, problems: list[Problem], *,
                 keep_text: bool = True) -> Iterator[Turn | Write | Read]:
    """The records of one JSONL file, streamed and schema-checked (problems appended), before the
    cross-record checks."""
    return _records(str(path), _read_lines(Path(path)), problems, keep_text)


def check_log(paths: Sequence[str | Path]) -> tuple[MemoryLog, list[Problem]]:
    """Load what is valid and return it with every problem found. File-level failures raise.
    (For logs larger than memory, `spill.SpilledLog` checks the same rules one conversation at a
    time.)"""
    problems: list[Problem] = []
    return _assembled((r for p in paths for r in read_records(p, problems)), problems)


def _assembled(records: Iterable[Turn | Write | Read | Operation],
               problems: list[Problem]) -> tuple[MemoryLog, list[Problem]]:
    by_kind: dict[type, list[Any]] = {Turn: [], Write: [], Read: [], Operation: []}
    for r in records:
        by_kind[type(r)].append(r)
    log = _assemble(by_kind[Turn], by_kind[Write], problems, by_kind[Read], by_kind[Operation])
    problems.sort(key=lambda p: (p.file, p.line or 0))
    return log, problems


def check_rows(name: str, rows: Sequence[dict[str, Any]]) -> tuple[MemoryLog, list[Problem]]:
    """Validate in-memory rows exactly as if they were lines 1..n of a file called `name`."""
    problems: list[Problem] = []
    return _assembled(_records(name, ((i, r, None) for i, r in enumerate(rows, start=1)), problems), problems)


def load_log(paths: str | Path | Sequence[str | Path], *, skip_invalid: bool = False,
             strict: bool = False) -> MemoryLog:
    """Load and validate a memory log. Any problem raises LogError and nothing is returned, unless
    `skip_invalid` (the valid records, the problems in `.skipped`). Warnings (ids a person would
    misread) are in `.warnings`; `strict` makes them problems."""
    if isinstance(paths, str | Path):
        paths = [paths]
    log, problems = check_log(paths)
    if strict:
        problems = sorted([*problems, *log.warnings], key=lambda p: (p.file, p.line or 0))
    if problems and not skip_invalid:
        raise LogError(problems)
    log.skipped = problems
    return log


def read_passages(path: str | Path) -> list[dict[str, Any]]:
    """Evidence passages for `check`/`admit`: JSONL objects with at least `text` (speaker/time
    optional), or plain text with one passage per line. Problems raise LogError naming file and line."""
    path = Path(path)
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise LogError([Problem(str(path), None, None, "unreadable", f"cannot read evidence: {e}")]) from None
    passages = []
    for n, line in enumerate(lines, start=1):  # file line numbers: blank lines are skipped, not renumbered
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise LogError([Problem(str(path), n, None, "invalid_json", f"invalid JSON: {e}")]) from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
                raise LogError([Problem(str(path), n, "text", "missing_field", "passage needs a non-empty text")])
            passages.append(obj)
        else:
            passages.append({"text": line})
    return passages
