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
    RUN/reuse.json           per stage: the settings and per-row keys its rows were made with (incremental.py)
    RUN/checksums.json       rows, bytes and sha256 of every file above, checked on every read
    RUN/.lock                held (flock) by the command writing the run; names its PID

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

from ..log.io import atomic_writer
from ..safe import dumps as json_dumps

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
LIFECYCLE = "lifecycle.jsonl"  # scan: one row per deletion, invalidation or update judged
REUSE = "reuse.json"  # scan: what a later scan of a grown log may take from this one (incremental.py)
CHECKSUMS = "checksums.json"
LOCK = ".lock"

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
    """Raise RunError naming the first missing file (`hint` says which command makes it) or the first
    damaged one."""
    run = Path(run)
    if not run.is_dir():
        raise RunError(f"{run}: no such run folder ({run / names[0]} is missing: {hint})")
    for name in names:
        if not (run / name).exists():
            raise RunError(f"{run / name} is missing: {hint}")
    verify(run)


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    return [(n, line) for n, line in enumerate(data.split(b"\n"), start=1) if line.strip()]


def read_jsonl(p: str | Path, *, tolerant: bool = False) -> list[dict[str, Any]]:
    """Rows of a JSONL run file. Strict: a line that is not a JSON object raises RunError naming
    the file and line. `tolerant` (partial files of an interrupted append) keeps the rows before the
    first bad line instead."""
    p = Path(p)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise RunError(f"{p}: cannot read ({e.strerror})") from None
    return _parse_rows(p, data, tolerant)


def _parse_rows(p: Path, data: bytes, tolerant: bool = False) -> list[dict[str, Any]]:
    lines = _lines(data)
    with contextlib.suppress(orjson.JSONDecodeError):  # fast path: one parse for the whole file
        rows = orjson.loads(b"[" + b",".join(line for _, line in lines) + b"]")
        if all(isinstance(r, dict) for r in rows):
            return rows
    rows = []
    for n, line in lines:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            if tolerant:
                break
            cut = n == lines[-1][0] and not data.endswith(b"\n")
            raise RunError(f"{p}:{n}: " + ("the last line is cut off" if cut else "not a JSON object")
                           + f": the file is damaged; {REDO}")
        rows.append(row)
    return rows


REDO = "rerun the command that wrote it (scan redoes a damaged stage by itself)"


# ---------------------------------------------------------------- checksums
# Every file derivaudit writes into a run (JSONL and JSON) is recorded in checksums.json with its
# row count, size and sha256, right after it is renamed into place; every read verifies it. A file
# that was cut, padded or edited is an error naming the file (and the line, where one is to blame),
# never a silently smaller run.


def _checksums(run: Path) -> dict[str, Any]:
    p = run / CHECKSUMS
    if not p.exists():
        return {}
    try:
        doc = orjson.loads(p.read_bytes())
    except orjson.JSONDecodeError:
        raise RunError(f"{p}: not valid JSON: the run's checksums are damaged; {REDO}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        raise RunError(f"{p}: not a checksum file (expected {{\"files\": {{...}}}}); {REDO}")
    return doc["files"]


def files(run: str | Path) -> list[Path]:
    """Every file of the run that a command may read: those its checksums name, and the checksums,
    meta and lock files themselves (none of them may be a command's output)."""
    run = Path(run)
    return [run / n for n in sorted({*_checksums(run), CHECKSUMS, META, LOCK, REUSE})]


def _record(run: Path, name: str, data: bytes, rows: int | None) -> None:
    files = _checksums(run)
    files[name] = {"rows": rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    with atomic_writer(run / CHECKSUMS) as fh:
        fh.write(orjson.dumps({"version": 1, "files": files}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


def _verified(run: Path, name: str) -> bytes:
    """The bytes of a run file, checked against checksums.json (RunError naming file and line)."""
    p = run / name
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise RunError(f"{p} is missing; {REDO}") from None
    except OSError as e:
        raise RunError(f"{p}: cannot read ({e.strerror})") from None
    want = _checksums(run).get(name)
    if want is None or hashlib.sha256(data).hexdigest() == want.get("sha256"):
        return data
    if name.endswith(".jsonl"):
        rows = _parse_rows(p, data)  # names the line of a damaged row
        if want.get("rows") is not None and len(rows) != want["rows"]:
            more = "fewer" if len(rows) < want["rows"] else "more"
            raise RunError(f"{p}:{len(_lines(data))}: {len(rows)} rows where {want['rows']} were written "
                           f"({more} than {CHECKSUMS} records: cut off or edited); {REDO}")
    raise RunError(f"{p}: {len(data):,} bytes that differ from the {want.get('bytes'):,} derivaudit wrote "
                   f"(sha256 mismatch with {CHECKSUMS}: damaged or edited); {REDO}")


def damaged(run: str | Path, name: str) -> str | None:
    """Why a run file cannot be used (missing, cut, edited, not parseable), or None if it is intact."""
    try:
        data = _verified(Path(run), name)
        if name in _checksums(Path(run)):
            return None  # byte for byte what derivaudit wrote: no need to parse it here too
        if name.endswith(".jsonl"):
            _parse_rows(Path(run) / name, data)
        else:
            _parse_json(Path(run) / name, data)
    except RunError as e:
        return str(e)
    return None


def verify(run: str | Path) -> None:
    """Every file of the run checked against checksums.json (and meta.json parsed), so that a command
    reading a run never goes on with part of it damaged: RunError naming the first bad file."""
    run = Path(run)
    for name in [META, *sorted(_checksums(run))]:
        if not (run / name).exists():  # a required file's absence is `require`'s to report
            continue
        why = damaged(run, name)
        if why:
            raise RunError(why)


def _parse_json(p: Path, data: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise RunError(f"{p}: not valid JSON ({e}); {REDO}") from None
    if not isinstance(doc, dict):
        raise RunError(f"{p}: expected a JSON object; {REDO}")
    return doc


def file_sha(run: str | Path, name: str) -> str:
    """The sha256 of a run file as derivaudit wrote it (checked against checksums.json)."""
    return hashlib.sha256(_verified(Path(run), name)).hexdigest()


def read_rows(run: str | Path, name: str) -> list[dict[str, Any]]:
    return _parse_rows(path(run, name), _verified(Path(run), name))


def read_rows_if(run: str | Path, name: str) -> list[dict[str, Any]]:
    """Rows of an optional file ([] when absent)."""
    return read_rows(run, name) if exists(run, name) else []


def read_json(run: str | Path, name: str) -> Any:
    return _parse_json(path(run, name), _verified(Path(run), name))


def read_json_if(run: str | Path, name: str) -> Any:
    return read_json(run, name) if exists(run, name) else None


def _write(run: str | Path, name: str, data: bytes, rows: int | None) -> None:
    with atomic_writer(path(run, name)) as fh:
        fh.write(data)
    _record(Path(run), name, data, rows)


def write_rows(run: str | Path, name: str, rows: Sequence[dict[str, Any]]) -> int:
    _write(run, name, b"".join(json_dumps(r) + b"\n" for r in rows), len(rows))
    return len(rows)


def write_json(run: str | Path, name: str, doc: Any, *, sort_keys: bool = False) -> None:
    opt = orjson.OPT_INDENT_2 | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    _write(run, name, json_dumps(doc, option=opt), None)


def load_meta(run: str | Path) -> dict[str, Any]:
    return read_json(run, META) if exists(run, META) else {}


def save_meta(run: str | Path, meta: dict[str, Any]) -> None:
    write_json(run, META, meta, sort_keys=True)


@contextlib.contextmanager
def lock(run: str | Path) -> Iterator[str | None]:
    """Hold the run folder for one writer (an advisory flock on RUN/.lock, released by the kernel if
    the process dies). A second writer gets RunError naming the holder's PID. Yields the PID of a
    previous holder that stopped without releasing (a kill): the caller may say it resumes."""
    import fcntl

    run = Path(run)
    if not run.is_dir():
        raise RunError(f"{run}: no such run folder")
    fd = os.open(run / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            raise RunError(f"{run} is in use by another derivaudit (pid {holder}); wait for it to finish, "
                           "or write to another folder") from None
        stale = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield stale
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
        self.why: str | None = None

    def done(self) -> bool:
        """Finished with this fingerprint and intact. A damaged stage file is not done: `why` says
        what is wrong with it, so that the caller can say it redoes the stage."""
        self.why = None
        if not (self.path.exists() and self.meta.get("stages", {}).get(self.name) == self.fp):
            return False
        self.why = damaged(self.path.parent, self.path.name)
        return self.why is None

    def load(self) -> list[dict[str, Any]]:
        return read_rows(self.path.parent, self.path.name)

    def resumed(self) -> list[dict[str, Any]]:
        """Rows already appended by an interrupted run with the same fingerprint."""
        if not self.partial.exists():
            return []
        rows = read_jsonl(self.partial, tolerant=True)
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
                fh.write(b"".join(json_dumps(r) + b"\n" for r in rows))
                fh.flush()
                os.fsync(fh.fileno())

            yield append

    def finish(self, rows: Sequence[dict[str, Any]]) -> None:
        write_rows(self.path.parent, self.path.name, rows)
        self.meta.setdefault("stages", {})[self.name] = self.fp
        if self.partial.exists():
            self.partial.unlink()
