"""What `validate` answers, as a document the library computes and the CLI only prints: counts,
problems, warnings, and whether the log is usable (the "fatal" rule).

A log is usable when it has no problem, or, with skip_invalid, when the skipped records leave
something to audit (at least one conversation or write) and the files could be read at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .io import LogError
from .records import Problem


def bad_records(problems: Sequence[Problem]) -> int:
    """How many records (file lines) the problems are about: one record may have several."""
    return len({(p.file, p.line) for p in problems if p.line is not None})


def validate(paths: Sequence[str | Path], *, skip_invalid: bool = False, strict: bool = False) -> dict[str, Any]:
    """Check the files (records on disk, one conversation in memory at a time: any log size fits).
    Problems and warnings stay `Problem` objects here; `to_json` gives the JSON document."""
    from .spill import SpilledLog

    try:
        with SpilledLog(list(paths), keep_text=False) as log:
            problems, warnings = list(log.problems), list(log.warnings)
            counts = (log.n_conversations, log.n_turns, len(log.write_ids), log.n_reads, log.n_operations)
    except LogError as e:
        problems, warnings, counts = list(e.problems), [], None
    if strict:
        problems, warnings = sorted([*problems, *warnings], key=lambda p: (p.file, p.line or 0)), []
    n_conv, n_turns, n_writes, n_reads, n_ops = counts or (None, None, None, None, None)
    fatal = bool(problems) and (not skip_invalid or n_conv is None or not (n_writes or n_conv))
    return {"ok": not fatal, "files": [str(p) for p in paths], "read": counts is not None,
            "conversations": n_conv or 0, "turns": n_turns or 0, "writes": n_writes or 0, "reads": n_reads or 0,
            "operations": n_ops or 0, "skipped_records": bad_records(problems) if skip_invalid else 0,
            "bad_records": bad_records(problems),
            "problems": problems, "warnings": warnings}


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    """The document `validate --format json` prints (the keys it always had)."""
    keys = ("ok", "files", "conversations", "turns", "writes", "reads", "operations", "skipped_records")
    return {**{k: result[k] for k in keys}, "problems": [p.to_dict() for p in result["problems"]],
            "warnings": [p.to_dict() for p in result["warnings"]]}
