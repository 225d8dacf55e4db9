"""What every importer shares: the result it returns and the helpers for reading its source safely
(a whole JSON document, a SQLite table read-only, content parts, instants), each failure named."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..log.io import LogError
from ..log.lines import limit
from ..log.records import Problem

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


_JSON_START = {bytes([c]) for c in b'{["-0123456789tfn'}  # what a JSON document's first byte can be


def read_json(path: str | Path) -> Any:
    """Read a whole JSON document within MAX_DOCUMENT_BYTES, turning every failure into a LogError
    naming the file: what cannot start a JSON document (a device, random bytes) is refused at
    its first byte, what is too large before it is all in memory."""
    p = Path(path)
    f = str(p)
    cap = limit("MAX_DOCUMENT_BYTES")
    too_large = LogError([Problem(f, None, None, "too_large", f"is larger than {cap:,} bytes (MAX_DOCUMENT_BYTES; "
                                  "set the environment variable to allow more)")])
    chunks: list[bytes] = []
    try:
        with p.open("rb") as fh:
            if p.is_file() and p.stat().st_size > cap:
                raise too_large
            total = 0
            utf8 = codecs.getincrementaldecoder("utf-8")()  # JSON is UTF-8: random bytes fail in the first MiB
            while chunk := fh.read(1 << 20):
                try:
                    utf8.decode(chunk)
                except UnicodeDecodeError as e:
                    raise LogError([Problem(f, None, None, "utf8", f"not UTF-8 text (byte {total + e.start}: "
                                            f"{e.reason}): not a JSON document")]) from None
                if not chunks:
                    start = chunk.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
                    if start and start not in _JSON_START:
                        raise LogError([Problem(f, None, None, "invalid_json", "not a JSON document (it starts "
                                                f"with byte 0x{start[0]:02x})")])
                total += len(chunk)
                if total > cap:
                    raise too_large
                chunks.append(chunk)
    except FileNotFoundError:
        raise LogError([Problem(f, None, None, "file_not_found", "file does not exist")]) from None
    except IsADirectoryError:
        raise LogError([Problem(f, None, None, "unreadable", "is a directory, not a file")]) from None
    except OSError as e:
        raise LogError([Problem(f, None, None, "unreadable", f"cannot read: {e.strerror}")]) from None
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as e:
        raise LogError([Problem(f, e.lineno, None, "invalid_json", f"invalid JSON: {e.msg}")]) from None


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


ORIGIN = "_origin"  # an importer may say where in its input a record came from (a JSON path, table[row])
