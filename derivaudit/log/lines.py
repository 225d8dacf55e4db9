"""Reading JSONL input safely: plain or gzip files, one JSON object per line, with the input
limits (line size, inflated size and ratio, nesting) that keep a hostile file from filling memory
or running for hours. Every problem is a `Problem` naming file and line."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from .records import (
    LogError,
    Problem,
)

MAX_DEPTH = 64  # nesting of arrays/objects in one line (a record is 2-3 deep; meta may nest more)
_KEY_END = re.compile(rb'"[ \t\r\n]*:')  # every key ends so (string values may match too: an upper bound)
_JSON_TYPES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}

# Input limits (docs/schema.md, "Limits"): a longer line, or a gzip stream that inflates past the size or
# the ratio, is refused with exit 2 before it can fill memory or run for hours. Override with the
# environment variables of the same names.
MAX_LINE_BYTES = 64 * 2**20  # one record
MAX_DOCUMENT_BYTES = 2**30  # one whole JSON document (an importer's store export, an agent file)
MAX_INFLATED_BYTES = 16 * 2**30  # what a .gz file may inflate to
MAX_GZIP_RATIO = 200  # inflated / compressed; JSONL text compresses 5-20x, a bomb ~1000x
GZIP_RATIO_FROM = 64 * 2**20  # the ratio is checked once this much has been inflated


def limit(name: str) -> int:
    """An input limit, from the environment variable `name` when set (a positive integer)."""
    value = os.environ.get(name)
    default = globals()[name]
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        raise LogError([Problem(name, None, None, "bad_limit", f"must be a positive integer, got {value!r}")]) from None
    if n <= 0:
        raise LogError([Problem(name, None, None, "bad_limit", f"must be a positive integer, got {value!r}")])
    return n

def _shape(obj: Any) -> tuple[int, int]:
    """(nesting depth, number of object keys), walking without recursion; stops past MAX_DEPTH."""
    depth = keys = 0
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        depth = max(depth, d)
        if d > MAX_DEPTH:
            break
        if type(o) is dict:
            keys += len(o)
            stack.extend((v, d + 1) for v in o.values())
        elif type(o) is list:
            stack.extend((v, d + 1) for v in o)
    return depth, keys


def _duplicate_key(raw: bytes) -> str | None:
    """The first key repeated within one object of a line, if any (slow path, rarely taken)."""
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for k, _ in items:
            if k in seen and not found:
                found.append(k)
            seen.add(k)
        return dict(items)

    json.loads(raw, object_pairs_hook=pairs)
    return found[0] if found else None


@contextlib.contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes as a stream (gzip read transparently, whatever the name), errors as LogError."""
    f = str(path)
    try:
        raw = path.open("rb")
    except FileNotFoundError:
        raise LogError([Problem(f, None, None, "file_not_found", "file does not exist")]) from None
    except IsADirectoryError:
        raise LogError([Problem(f, None, None, "unreadable", "is a directory, not a JSONL file")]) from None
    except OSError as e:
        raise LogError([Problem(f, None, None, "unreadable", f"cannot read: {e.strerror}")]) from None
    with raw:
        gz = raw.peek(2)[:2] == b"\x1f\x8b" if hasattr(raw, "peek") else False
        if not gz:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw) as fh:
            yield fh


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the line end, whether a newline ended it), streamed, within
    the input limits (MAX_LINE_BYTES; for gzip, MAX_INFLATED_BYTES and MAX_GZIP_RATIO)."""
    f = str(path)
    max_line, max_inflated, max_ratio = limit("MAX_LINE_BYTES"), limit("MAX_INFLATED_BYTES"), limit("MAX_GZIP_RATIO")
    ratio_from = limit("GZIP_RATIO_FROM")
    with _open(path) as fh:
        gz = isinstance(fh, gzip.GzipFile)
        inflated = 0
        try:
            n = 0
            while line := fh.readline(max_line + 1):
                n += 1
                if len(line) > max_line and not (len(line) == max_line + 1 and line.endswith(b"\n")):
                    raise LogError([Problem(f, n, None, "line_too_long", f"line is longer than {max_line:,} bytes "
                                            "(MAX_LINE_BYTES; set the environment variable to allow more)")])
                if gz:
                    inflated += len(line)
                    if inflated > max_inflated:
                        raise LogError([Problem(f, n, None, "too_large", f"inflates to more than {max_inflated:,} "
                                                "bytes (MAX_INFLATED_BYTES; set the environment variable to allow "
                                                "more)")])
                    if inflated > ratio_from and inflated > max_ratio * max(1, fh.fileobj.tell()):
                        raise LogError([Problem(f, n, None, "too_large", f"inflates more than {max_ratio}x "
                                                "(a decompression bomb? MAX_GZIP_RATIO; set the environment "
                                                "variable to allow more)")])
                if n == 1 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                ended = line.endswith(b"\n")
                yield n, line.rstrip(b"\n").rstrip(b"\r"), ended
        except (OSError, EOFError) as e:  # a damaged gzip stream
            raise LogError([Problem(f, None, None, "unreadable", f"gzip-compressed but damaged ({e})")]) from None


def parse_object(raw: bytes, f: str, n: int | None = None, ended: bool = True
                 ) -> tuple[dict[str, Any] | None, Problem | None]:
    """One JSON object by the log's rules (UTF-8, an object, at most MAX_DEPTH levels deep, no key
    twice in one object), as (object, None) or (None, the problem). `ended` False: the line had no
    final newline, so invalid JSON there reads as a cut-off last line. The gate reads its requests
    by the same rules, so what it logs its own restart can read."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, Problem(f, n, None, "utf8", f"not valid UTF-8 (byte {e.start}: {e.reason})")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if not ended:
            return None, Problem(f, n, None, "truncated_line", "last line is cut off (not valid JSON and no final "
                                 "newline): was the export interrupted?")
        if "recursion" in str(e):
            return None, Problem(f, n, None, "too_deep", f"nested more than {MAX_DEPTH} levels deep")
        return None, Problem(f, n, None, "invalid_json", f"invalid JSON: {e}")
    if not isinstance(obj, dict):
        got = _JSON_TYPES.get(type(obj), type(obj).__name__)
        return None, Problem(f, n, None, "not_object", f"expected a JSON object, got {got}")
    depth, keys = _shape(obj)
    if depth > MAX_DEPTH:
        return None, Problem(f, n, None, "too_deep", f"nested more than {MAX_DEPTH} levels deep")
    if len(_KEY_END.findall(raw)) > keys:
        dup = _duplicate_key(raw)
        if dup is not None:
            return None, Problem(f, n, dup, "duplicate_key", "the same key twice in one object (JSON readers "
                                 "disagree on which value wins)")
    return obj, None


def _read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, Problem | None]]:
    """Yield (line number, object, problem) for each non-blank line of a JSONL file, streaming
    (memory does not grow with the file; gzip is read transparently)."""
    f = str(path)
    for n, raw, ended in _raw_lines(path):
        if raw.strip():
            obj, problem = parse_object(raw, f, n, ended)
            yield n, obj, problem


def read_objects(path: str | Path) -> list[tuple[int, dict[str, Any] | None, Problem | None]]:
    """(line, object, problem) for every non-blank line of a JSONL input file (BOM, CRLF, UTF-8,
    cut-off last line and non-objects reported as for memory logs); raises LogError if unreadable."""
    return list(_read_lines(Path(path)))


def identified_objects(path: str | Path, id_field: str, problems: list[Problem]) -> list[tuple[int, dict[str, Any]]]:
    """(line, object) for every object of a JSONL input file whose `id_field` is a non-empty string
    not seen on an earlier line; every other line adds its problem to `problems` (a bad line, a
    missing id, a duplicate naming the first line). Raises LogError if the file is unreadable."""
    f, seen, out = str(path), {}, []
    for n, d, problem in read_objects(path):
        if d is None:
            problems.append(problem)  # type: ignore[arg-type]
            continue
        key = d.get(id_field)
        if not isinstance(key, str) or not key.strip():
            problems.append(Problem(f, n, id_field, "missing_field", f"needs a non-empty {id_field}"))
        elif key in seen:
            problems.append(Problem(f, n, id_field, "duplicate_id", f"{key!r} already on line {seen[key]}"))
        else:
            seen[key] = n
            out.append((n, d))
    return out
