"""The run folder: the one module that knows its file names, how its files are read and written,
stage fingerprints and partial-file resume. Every other module reads and writes runs through here,
so `report`, `export` and `replay` never import the scan pipeline just to read a file.

    RUN/meta.json            settings (the scan config), input hash, models, stage fingerprints, usage
    RUN/views.jsonl          both evidence views of every write (as `derivaudit views`)
    RUN/obligations.jsonl    per write: obligations, decomposition status
    RUN/primitives.jsonl     per obligation x view: annotator A's, B's and the adjudicator's primitives
    RUN/labels.jsonl         per write: memory label in each view, derived scope flags
    RUN/scope.json           the scope report and annotator agreement
    RUN/replay_scores.jsonl  per write x replayed setting (written by replay)
    RUN/replay.json          replay metrics (written by replay)
    RUN/review_sample.json   the blinded review sample's key (written by review sample)
    RUN/review.jsonl         reviewers' D/E/R answers (written by review import)
    RUN/rubric.json          rubric stability (annotate --rubric b; A's answers in rubric_b.jsonl)

A stage whose file exists with the same fingerprint is not redone. Long stages append to
`<stage>.partial.jsonl` as they go, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from .io import atomic_writer, write_jsonl

META = "meta.json"
VIEWS = "views.jsonl"
OBLIGATIONS = "obligations.jsonl"
PRIMITIVES = "primitives.jsonl"
LABELS = "labels.jsonl"
SCOPE = "scope.json"
REPLAY_SCORES = "replay_scores.jsonl"
REPLAY = "replay.json"
REVIEW_SAMPLE = "review_sample.json"
REVIEW = "review.jsonl"
RUBRIC = "rubric.json"

STAGES = {"views": VIEWS, "obligations": OBLIGATIONS, "primitives": PRIMITIVES, "labels": LABELS}
VIEW_NAMES = ("citation_only", "expanded")


class RunError(ValueError):
    """A run folder or one of its files is missing or unreadable (exit code 2)."""


def fingerprint(*parts: Any) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def path(run: str | Path, name: str) -> Path:
    return Path(run) / name


def exists(run: str | Path, name: str) -> bool:
    return path(run, name).exists()


def require(run: str | Path, names: Sequence[str], hint: str) -> None:
    """Raise RunError naming the first missing file; `hint` says which command makes it."""
    run = Path(run)
    if not run.is_dir():
        raise RunError(f"{run}: no such run folder ({run / names[0]} is missing: {hint})")
    for name in names:
        if not (run / name).exists():
            raise RunError(f"{run / name} is missing: {hint}")


def read_jsonl(p: str | Path) -> list[dict[str, Any]]:
    """Rows of a run file; a cut-off last line (interrupted append) is dropped."""
    lines = Path(p).read_bytes().split(b"\n")
    with contextlib.suppress(orjson.JSONDecodeError):  # fast path: one parse for the whole file
        return orjson.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            if i >= len(lines) - 2:
                break
            raise
    return rows


def read_rows(run: str | Path, name: str) -> list[dict[str, Any]]:
    return read_jsonl(path(run, name))


def read_rows_if(run: str | Path, name: str) -> list[dict[str, Any]]:
    """Rows of an optional file ([] when absent)."""
    p = path(run, name)
    return read_jsonl(p) if p.exists() else []


def read_json(run: str | Path, name: str) -> Any:
    p = path(run, name)
    try:
        return orjson.loads(p.read_bytes())
    except orjson.JSONDecodeError as e:
        raise RunError(f"{p}: not valid JSON ({e})") from e


def read_json_if(run: str | Path, name: str) -> Any:
    return read_json(run, name) if exists(run, name) else None


def write_rows(run: str | Path, name: str, rows: Sequence[dict[str, Any]]) -> int:
    return write_jsonl(path(run, name), rows)


def write_json(run: str | Path, name: str, doc: Any, *, sort_keys: bool = False) -> None:
    opt = orjson.OPT_INDENT_2 | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    with atomic_writer(path(run, name)) as fh:
        fh.write(orjson.dumps(doc, option=opt))


def load_meta(run: str | Path) -> dict[str, Any]:
    p = path(run, META)
    return orjson.loads(p.read_bytes()) if p.exists() else {}


def save_meta(run: str | Path, meta: dict[str, Any]) -> None:
    write_json(run, META, meta, sort_keys=True)


def modified_at(run: str | Path, name: str) -> str | None:
    """When a run file was last written (ISO 8601, UTC), or None."""
    from datetime import UTC, datetime

    p = path(run, name)
    return datetime.fromtimestamp(p.stat().st_mtime, UTC).isoformat(timespec="seconds") if p.exists() else None


class Stage:
    """One stage file of a run, its fingerprint, and an append-only partial file for resuming."""

    def __init__(self, run: Path, name: str, fp: str, meta: dict[str, Any]):
        self.path = Path(run) / STAGES.get(name, f"{name}.jsonl")
        self.partial = Path(run) / f"{name}.partial.jsonl"
        self.name, self.fp, self.meta = name, fp, meta

    def done(self) -> bool:
        return self.path.exists() and self.meta.get("stages", {}).get(self.name) == self.fp

    def load(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path)

    def resumed(self) -> list[dict[str, Any]]:
        """Rows already appended by an interrupted run with the same fingerprint."""
        if not self.partial.exists():
            return []
        rows = read_jsonl(self.partial)
        if not rows or rows[0].get("_fingerprint") != self.fp:
            self.partial.unlink()
            return []
        return rows[1:]

    @contextlib.contextmanager
    def appender(self) -> Iterator[Callable[[list[dict[str, Any]]], None]]:
        fresh = not self.partial.exists()
        with self.partial.open("ab") as fh:
            if fresh:
                fh.write(orjson.dumps({"_fingerprint": self.fp}) + b"\n")

            def append(rows: list[dict[str, Any]]) -> None:
                fh.write(b"".join(orjson.dumps(r) + b"\n" for r in rows))
                fh.flush()
                os.fsync(fh.fileno())

            yield append

    def finish(self, rows: Sequence[dict[str, Any]]) -> None:
        write_jsonl(self.path, rows)
        self.meta.setdefault("stages", {})[self.name] = self.fp
        if self.partial.exists():
            self.partial.unlink()
