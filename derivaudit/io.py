"""Loading and validating memory logs (JSONL, schema v1), and atomic output files.

Every command loads input through `load_log`, so a problem is reported the same way
everywhere: file, line, field, what is wrong. Strict by default; `skip_invalid=True` keeps the
valid records and returns the rest in `MemoryLog.skipped`.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, Any, TypeVar

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from .records import (
    MAX_PASSAGES,
    SCHEMA_VERSION,
    Conversation,
    MemoryLog,
    Operation,
    Problem,
    Read,
    Source,
    Turn,
    Write,
    families,
)
from .safe import dumps as json_dumps

SCHEMA_FILE = f"memory-log.v{SCHEMA_VERSION}.schema.json"
MAX_DEPTH = 64  # nesting of arrays/objects in one line (a record is 2-3 deep; meta may nest more)
MAX_ORDER = 2**53 - 1  # integers every JSON reader keeps exact
KINDS = ("turn", "write", "read", "operation", "header")
# Input limits (docs/schema.md, "Limits"): a longer line, or a gzip stream that inflates past the size or
# the ratio, is refused with exit 2 before it can fill memory or run for hours. Override with the
# environment variables of the same names.
MAX_LINE_BYTES = 64 * 2**20  # one record
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
ID_FIELDS = ("conversation_id", "turn_id", "write_id", "last_seen_turn", "parent_id", "source_id", "read_id",
             "operation_id", "target", "successor")
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


class LogError(Exception):
    """Raised when input is invalid (strict mode) or unreadable (any mode)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        head = "\n".join(str(p) for p in self.problems[:20])
        more = len(self.problems) - 20
        super().__init__(head + (f"\n... and {more} more" if more > 0 else ""))


@cache
def schema() -> dict[str, Any]:
    """The shipped JSON Schema of one log line."""
    return json.loads(resources.files("derivaudit.schemas").joinpath(SCHEMA_FILE).read_text("utf-8"))


@cache
def _validator(kind: str) -> Draft202012Validator:
    s = schema()
    return Draft202012Validator({"$defs": s["$defs"], "$ref": f"#/$defs/{kind}"})


@cache
def _fast(kind: str) -> Callable[[dict[str, Any]], Any]:
    """The same schema compiled to Python (fastjsonschema, ~150x faster): the check for every
    record; jsonschema runs only on a record that fails, to explain why."""
    import fastjsonschema

    s = schema()
    return fastjsonschema.compile({"$defs": s["$defs"], "$ref": f"#/$defs/{kind}"})


def _schema_errors(obj: dict[str, Any], kind: str) -> list[ValidationError]:
    import fastjsonschema

    try:
        _fast(kind)(obj)
        return []
    except fastjsonschema.JsonSchemaException:
        return list(_validator(kind).iter_errors(obj))


def _field_path(err: ValidationError) -> str | None:
    parts: list[str] = []
    for p in err.absolute_path:
        if isinstance(p, int):
            parts[-1] = f"{parts[-1]}[{p}]" if parts else f"[{p}]"
        else:
            parts.append(str(p))
    return ".".join(parts) or None


def _explain(err: ValidationError, kind: str) -> list[tuple[str | None, str, str]]:
    """Turn a jsonschema error into (field, code, message) lines a person can act on."""
    field = _field_path(err)
    inst = err.instance
    v = err.validator
    if v == "required":
        missing = [r for r in err.validator_value if r not in inst]
        return [(m, "missing_field", f"required field of a {kind} is missing") for m in missing]
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(inst) - set(allowed))
        return [
            (x, "unknown_field", f"not a field of a {kind} in schema v{SCHEMA_VERSION} "
             f"(allowed: {', '.join(allowed)}; put extra data under 'meta')")
            for x in extra
        ]
    if v == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        got = _JSON_TYPES.get(type(inst), type(inst).__name__)
        return [(field, "wrong_type", f"expected {want}, got {got} {_short(inst)}")]
    if v in ("minLength", "pattern"):
        what = "text" if field and field.endswith(("text", "query", "answer", "expected")) else "id"
        code = "empty_text" if what == "text" else "empty_id"
        return [(field, code, f"{field or what} must have a visible character (not empty, blank, control or "
                 "zero-width only)")]
    if v == "uniqueItems":
        return [(field, "duplicate_citation", "the same turn id is cited twice")]
    if v == "maxItems" and field == "retrieved":
        return [(field, "too_many_retrieved", f"{len(inst)} retrieved memories; a read lists at most "
                 f"{err.validator_value}")]
    if v == "maxItems":
        return [(field, "too_many_citations",
                 f"{len(inst)} citations; a view holds at most {MAX_PASSAGES} passages")]
    if v in ("oneOf", "anyOf") and field and field.startswith("retrieved["):
        return [(field, "bad_retrieved", "a retrieved entry is a write id (text) or an object "
                 "{\"write_id\": text, \"score\": number (optional), \"rank\": integer (optional)}")]
    if v == "const" and field == "schema_version":
        return [(field, "unsupported_version",
                 f"schema_version {_short(inst)} is not supported; this derivaudit reads version {SCHEMA_VERSION}")]
    if v in ("enum", "const"):
        allowed = err.validator_value if v == "enum" else [err.validator_value]
        return [(field, "bad_value", f"{_short(inst)} is not one of {allowed}")]
    if v == "minimum":
        return [(field, "bad_value", f"must be >= {err.validator_value}, got {_short(inst)}")]
    if v == "maximum":
        return [(field, "out_of_range", f"must be <= {err.validator_value} (2^53-1), got {_short(inst)}")]
    return [(field, "invalid", err.message)]


def _short(x: Any) -> str:
    s = json.dumps(x, ensure_ascii=False)
    return s if len(s) <= 40 else s[:37] + "..."


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


def _read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, Problem | None]]:
    """Yield (line number, object, problem) for each non-blank line of a JSONL file, streaming
    (memory does not grow with the file; gzip is read transparently)."""
    f = str(path)
    for n, raw, ended in _raw_lines(path):
        if not raw.strip():
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield n, None, Problem(f, n, None, "utf8", f"not valid UTF-8 (byte {e.start}: {e.reason})")
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            if not ended:
                yield n, None, Problem(f, n, None, "truncated_line",
                                       "last line is cut off (not valid JSON and no final newline): "
                                       "was the export interrupted?")
            elif "recursion" in str(e):
                yield n, None, Problem(f, n, None, "too_deep", f"nested more than {MAX_DEPTH} levels deep")
            else:
                yield n, None, Problem(f, n, None, "invalid_json", f"invalid JSON: {e}")
            continue
        if not isinstance(obj, dict):
            got = _JSON_TYPES.get(type(obj), type(obj).__name__)
            yield n, None, Problem(f, n, None, "not_object", f"expected a JSON object, got {got}")
            continue
        depth, keys = _shape(obj)
        if depth > MAX_DEPTH:
            yield n, None, Problem(f, n, None, "too_deep", f"nested more than {MAX_DEPTH} levels deep")
            continue
        if len(_KEY_END.findall(raw)) > keys:
            dup = _duplicate_key(raw)
            if dup is not None:
                yield n, None, Problem(f, n, dup, "duplicate_key", "the same key twice in one object (JSON "
                                       "readers disagree on which value wins)")
                continue
        yield n, obj, None


def read_objects(path: str | Path) -> list[tuple[int, dict[str, Any] | None, Problem | None]]:
    """(line, object, problem) for every non-blank line of a JSONL input file (BOM, CRLF, UTF-8,
    cut-off last line and non-objects reported as for memory logs); raises LogError if unreadable."""
    return list(_read_lines(Path(path)))


def _rank_problems(f: str, n: int, retrieved: list[Any]) -> list[Problem]:
    """Ranks, when given, number the list 1..n (every item ranked, no gap, no repeat); a memory is
    retrieved once per read."""
    out = []
    ranks = [x.get("rank") if isinstance(x, dict) else None for x in retrieved]
    if any(r is not None for r in ranks):
        missing = [i for i, r in enumerate(ranks) if r is None]
        if missing:
            out.append(Problem(f, n, f"retrieved[{missing[0]}].rank", "rank_gap",
                               "some retrieved memories have a rank and this one has none: rank all or none"))
        elif sorted(ranks) != list(range(1, len(ranks) + 1)):  # type: ignore[type-var]
            out.append(Problem(f, n, "retrieved", "rank_gap", f"ranks {sorted(ranks)} are not 1..{len(ranks)} "  # type: ignore[type-var]
                               "(a gap or a repeat)"))
    seen: set[str] = set()
    for i, x in enumerate(retrieved):
        wid = unicodedata.normalize("NFC", x if isinstance(x, str) else x["write_id"])
        if wid in seen:
            out.append(Problem(f, n, f"retrieved[{i}]", "duplicate_retrieved", f"memory {wid!r} is listed twice"))
        seen.add(wid)
    return out


def _records(f: str, items: Iterable[tuple[int, dict[str, Any] | None, Problem | None]],
             problems: list[Problem], keep_text: bool = True) -> Iterator[Turn | Write | Read | Operation]:
    """Schema-check parsed lines and yield their records; problems go to `problems`. Without
    `keep_text` (validate), turns and writes keep ids, order and lineage only."""
    first: int | None = None  # the first record line of this file: the only place for a header
    shared: dict[str, str] = {}  # one string object per conversation id
    for n, obj, prob in items:
        first = n if first is None else first
        if prob is not None:
            problems.append(prob)
            continue
        assert obj is not None
        kind = obj.get("type")
        if kind not in KINDS:
            msg = "missing" if kind is None else f"{_short(kind)} is not one of {', '.join(KINDS)}"
            problems.append(Problem(f, n, "type", "missing_field" if kind is None else "bad_value", msg))
            continue
        errs = [Problem(f, n, fld, code, msg)
                for e in _schema_errors(obj, kind) for fld, code, msg in _explain(e, kind)]
        for fld in ("order", "round"):  # 1.0, 2e0 and integers past 2^64 parse as floats
            if type(obj.get(fld)) is float and not errs:
                errs.append(Problem(f, n, fld, "wrong_type", f"expected an integer written without a fraction or "
                                    f"exponent (0 to {MAX_ORDER}), got {_short(obj[fld])}"))
        if kind == "read" and not errs:
            errs = _rank_problems(f, n, obj["retrieved"])
        if kind == "header" and n != first:
            errs.append(Problem(f, n, "type", "misplaced_header", f"a header belongs on the first line of a file "
                                f"(line {first} holds the first record)"))
        if errs:
            problems.extend(errs)
            continue
        for fld in ID_FIELDS:  # ids compare after NFC: a decomposed é cites the same turn as a composed one
            v = obj.get(fld)
            if isinstance(v, str) and not v.isascii():
                obj[fld] = unicodedata.normalize("NFC", v)
        if kind in ("write", "operation") and obj.get("citations"):
            obj["citations"] = [unicodedata.normalize("NFC", c) for c in obj["citations"]]
        if kind == "write" and obj.get("supersedes"):
            obj["supersedes"] = [unicodedata.normalize("NFC", c) for c in obj["supersedes"]]
        src = Source(f, n)
        if kind == "turn":
            yield Turn(
                conversation_id=shared.setdefault(obj["conversation_id"], obj["conversation_id"]),
                turn_id=obj["turn_id"], order=obj["order"],
                speaker=obj["speaker"] if keep_text else "", text=obj["text"] if keep_text else "",
                time=obj.get("time") if keep_text else None, session=obj.get("session") if keep_text else None,
                source=src,
            )
        elif kind == "write":
            yield Write(
                write_id=obj["write_id"], conversation_id=shared.setdefault(obj["conversation_id"],
                                                                            obj["conversation_id"]),
                text=obj["text"] if keep_text else "",
                citations=tuple(obj["citations"]), last_seen_turn=obj["last_seen_turn"],
                time=obj.get("time"), source_id=obj.get("source_id"), parent_id=obj.get("parent_id"),
                operation=obj.get("operation"), round=obj.get("round"), valid=obj.get("valid"),
                verified_correction=obj.get("verified_correction"),
                supersedes=tuple(obj["supersedes"]) if obj.get("supersedes") is not None else None,
                meta=obj.get("meta") if keep_text else None, source=src,
            )
        elif kind == "read":
            items = sorted(({"write_id": x} if isinstance(x, str) else x for x in obj["retrieved"]),
                           key=lambda x: x.get("rank", 0))  # ranked objects in rank order, else as listed
            yield Read(
                read_id=obj["read_id"], conversation_id=shared.setdefault(obj["conversation_id"],
                                                                          obj["conversation_id"]),
                last_seen_turn=obj["last_seen_turn"], query=obj["query"] if keep_text else "",
                retrieved=tuple(unicodedata.normalize("NFC", x["write_id"]) for x in items),
                scores=tuple(x.get("score") for x in items) if any("score" in x for x in items) else (),
                time=obj.get("time"), answer=obj.get("answer") if keep_text else None,
                expected=obj.get("expected") if keep_text else None,
                meta=obj.get("meta") if keep_text else None, source=src,
            )
        elif kind == "operation":
            yield Operation(
                operation_id=obj["operation_id"], conversation_id=shared.setdefault(obj["conversation_id"],
                                                                                    obj["conversation_id"]),
                kind=obj["kind"], target=obj["target"], last_seen_turn=obj["last_seen_turn"], time=obj.get("time"),
                citations=tuple(obj.get("citations") or ()), successor=obj.get("successor"),
                origin=obj.get("origin"), meta=obj.get("meta") if keep_text else None, source=src,
            )


def _where(src: Source | None) -> str:
    return f"{src.file}:{src.line}" if src else "?"


def _problem(rec: Turn | Write | Read | Operation, fld: str | None, code: str, msg: str) -> Problem:
    s = rec.source
    return Problem(s.file if s else "?", s.line if s else None, fld, code, msg)


def _assemble(turns: list[Turn], writes: list[Write], problems: list[Problem], reads: list[Read],
              operations: Sequence[Operation] = ()) -> MemoryLog:
    """Cross-record checks. Bad records are dropped here and their problems added to `problems`."""
    by_conv: dict[str, list[Turn]] = {}
    for t in turns:
        by_conv.setdefault(t.conversation_id, []).append(t)
    convs = {cid: conversation(ts, problems) for cid, ts in by_conv.items()}
    kept = accept_writes(((w, write_problems(w, convs.get(w.conversation_id))) for w in writes), problems)
    stored = {w.write_id: (w.conversation_id, point_order(w, convs[w.conversation_id])) for w in kept}
    read_ok = accept_reads(((r, read_problems(r, convs.get(r.conversation_id), stored)) for r in reads), problems)
    all_ids = {w.write_id for w in writes}
    ops = accept_operations(((o, operation_problems(o, convs.get(o.conversation_id), stored, all_ids))
                             for o in operations), problems)
    return MemoryLog(conversations=convs, writes=kept, warnings=_id_warnings(convs, kept), reads=read_ok,
                     operations=ops)


def operation_problems(op: Operation, conv: Conversation | None, stored: Mapping[str, tuple[str, int]],
                       all_ids: set[str]) -> list[Problem]:
    """An operation's point is a turn of its conversation and its citations come no later; its
    target (and successor) is an accepted write of the same conversation written no later than
    that point. `stored`: write id -> (conversation, order of its write point), accepted writes;
    `all_ids`: every write id read, accepted or not (to say "was rejected")."""
    if conv is None:
        return [_problem(op, "conversation_id", "conversation_without_turns",
                         f"conversation {op.conversation_id!r} has no turns in the loaded files")]
    point = conv.position.get(op.last_seen_turn)
    if point is None:
        return [_problem(op, "last_seen_turn", "unknown_operation_point",
                         f"turn {op.last_seen_turn!r} is not a turn of conversation {op.conversation_id!r}")]
    at = conv.turns[point].order
    out = _citation_problems(op, conv, point, "operation")
    for fld, wid in (("target", op.target), ("successor", op.successor)):
        if wid is None:
            continue
        where = stored.get(wid)
        if where is None:
            why = "was rejected" if wid in all_ids else "is not a write of the loaded files"
            out.append(_problem(op, fld, f"unknown_{fld}", f"write {wid!r} {why}"))
        elif where[0] != op.conversation_id:
            out.append(_problem(op, fld, f"cross_conversation_{fld}",
                                f"write {wid!r} belongs to conversation {where[0]!r}, not {op.conversation_id!r}: an "
                                "operation is judged against the history of the memory it acts on"))
        elif where[1] > at:
            out.append(_problem(op, fld, "operation_before_target" if fld == "target" else "successor_after_operation",
                                f"write {wid!r} was written at order {where[1]}, after this operation's point "
                                f"(order {at})"))
    if op.successor is not None and op.successor == op.target:
        out.append(_problem(op, "successor", "self_successor", "a write cannot replace itself"))
    return out


def accept_operations(checked: Iterable[tuple[Operation, list[Problem]]], problems: list[Problem]) -> list[Operation]:
    """Operations without problems, in input order, each id claimed once; a write is deleted at
    most once (nothing acts on it after) and invalidated at most once."""
    kept: list[Operation] = []
    done: dict[tuple[str, str], Operation] = {}  # (target, kind) -> the operation that did it
    for op in _claim(checked, problems, lambda o: o.operation_id, "operation"):
        gone = done.get((op.target, "delete"))
        again = done.get((op.target, op.kind))
        if gone is not None or again is not None:
            prev = gone or again
            problems.append(_problem(op, "target", "target_deleted_twice" if gone else f"target_{op.kind}d_twice",
                                     f"write {op.target!r} was already {prev.kind}d by operation "
                                     f"{prev.operation_id!r} at {_where(prev.source)}"))
            continue
        done[(op.target, op.kind)] = op
        kept.append(op)
    return kept


def point_order(rec: Write | Read, conv: Conversation) -> int:
    """The order of the record's last seen turn (which the checks have already found)."""
    return conv.turns[conv.position[rec.last_seen_turn]].order


def read_problems(r: Read, conv: Conversation | None, stored: Mapping[str, tuple[str, int]]) -> list[Problem]:
    """A read's point is a turn of its conversation; each retrieved memory is an accepted write of
    the same conversation stored no later than that point. `stored`: write id -> (conversation,
    order of its write point), accepted writes only."""
    if conv is None:
        return [_problem(r, "conversation_id", "conversation_without_turns",
                         f"conversation {r.conversation_id!r} has no turns in the loaded files")]
    if r.last_seen_turn not in conv.position:
        return [_problem(r, "last_seen_turn", "unknown_read_point",
                         f"turn {r.last_seen_turn!r} is not a turn of conversation {r.conversation_id!r}")]
    at = point_order(r, conv)
    out = []
    for i, wid in enumerate(r.retrieved):
        where = stored.get(wid)
        if where is None:
            out.append(_problem(r, f"retrieved[{i}]", "unknown_memory",
                                f"{wid!r} is not an accepted write of the loaded files"))
        elif where[0] != r.conversation_id:
            out.append(_problem(r, f"retrieved[{i}]", "unknown_memory",
                                f"{wid!r} belongs to conversation {where[0]!r}, not {r.conversation_id!r}"))
        elif where[1] > at:
            out.append(_problem(r, f"retrieved[{i}]", "read_before_write",
                                f"{wid!r} was written at order {where[1]}, after this read's point (order {at})"))
    return out


def accept_reads(checked: Iterable[tuple[Read, list[Problem]]], problems: list[Problem]) -> list[Read]:
    """Reads without problems, in input order; the first accepted read claims its id."""
    return _claim(checked, problems, lambda r: r.read_id, "read")


def conversation(turns: list[Turn], problems: list[Problem]) -> Conversation:
    """One conversation's turns (in input order) as a Conversation: a repeated turn id or order is
    a problem and the later turn is dropped."""
    seen: dict[str, Turn] = {}
    orders: dict[int, Turn] = {}
    for t in turns:
        if t.turn_id in seen:
            problems.append(_problem(t, "turn_id", "duplicate_turn_id",
                                     f"turn {t.turn_id!r} of conversation {t.conversation_id!r} already defined at "
                                     f"{_where(seen[t.turn_id].source)}"))
        elif t.order in orders:
            problems.append(_problem(t, "order", "duplicate_order",
                                     f"order {t.order} of conversation {t.conversation_id!r} already used by turn "
                                     f"{orders[t.order].turn_id!r} at {_where(orders[t.order].source)}"))
        else:
            seen[t.turn_id] = orders[t.order] = t
    return Conversation(turns[0].conversation_id, list(seen.values()))


def write_problems(w: Write, conv: Conversation | None) -> list[Problem]:
    """What is wrong with a write against its conversation (write point, citations); [] when fine.
    Depends on no other write, so a log can be checked one conversation at a time."""
    if conv is None:
        return [_problem(w, "conversation_id", "conversation_without_turns",
                         f"conversation {w.conversation_id!r} has no turns in the loaded files "
                         "(pass the history file too, e.g. --history)")]
    out = []
    point = conv.position.get(w.last_seen_turn)
    if point is None:
        out.append(_problem(w, "last_seen_turn", "unknown_write_point",
                            f"turn {w.last_seen_turn!r} is not a turn of conversation {w.conversation_id!r}"))
    return out + _citation_problems(w, conv, point, "write", ": leakage from the future")


def _citation_problems(rec: Write | Operation, conv: Conversation, point: int | None, what: str,
                       why: str = "") -> list[Problem]:
    """Each citation is a turn of the conversation at or before the record's point (`point`: its
    position; None when the point itself is unknown, then only existence is checked)."""
    out = []
    for i, c in enumerate(rec.citations):
        pos = conv.position.get(c)
        if pos is None:
            out.append(_problem(rec, f"citations[{i}]", "unknown_citation",
                                f"cites turn {c!r}, which is not a turn of conversation {rec.conversation_id!r}"))
        elif point is not None and pos > point:
            out.append(_problem(rec, f"citations[{i}]", f"citation_after_{what}",
                                f"cites turn {c!r} (order {conv.turns[pos].order}), which comes after the {what} "
                                f"point {rec.last_seen_turn!r} (order {conv.turns[point].order}){why}"))
    return out


def accept_writes(checked: Iterable[tuple[Write, list[Problem]]], problems: list[Problem]) -> list[Write]:
    """The writes kept, in input order: a write with problems is dropped (its problems reported);
    only accepted writes claim their id, so a later one with a taken id is a duplicate (and
    --skip-invalid keeps a valid write whose id an earlier rejected write also used); then lineage."""
    all_ids: set[str] = set()

    def seen(w: Write) -> str:
        all_ids.add(w.write_id)
        return w.write_id

    kept = _claim(checked, problems, seen, "write")
    return _check_lineage(kept, all_ids, lambda *a: problems.append(_problem(*a)))


R = TypeVar("R", Write, Read, Operation)


def _claim(checked: Iterable[tuple[R, list[Problem]]], problems: list[Problem], ident: Callable[[R], str],
           kind: str) -> list[R]:
    """Records without problems, in input order; the first accepted record claims its id."""
    kept: list[R] = []
    seen: dict[str, R] = {}
    for rec, probs in checked:
        key = ident(rec)
        if key in seen:
            problems.append(_problem(rec, f"{kind}_id", f"duplicate_{kind}_id",
                                     f"{kind} {key!r} already defined at {_where(seen[key].source)}"))
        elif probs:
            problems.extend(probs)
        else:
            kept.append(rec)
            seen[key] = rec
    return kept


def _check_lineage(writes: list[Write], all_ids: set[str], bad: Any) -> list[Write]:
    """parent_id names another accepted write of the same conversation, not itself, with no cycle; a
    write whose parent is rejected is rejected too (its lineage cannot be read)."""
    while True:
        ids = {w.write_id: w for w in writes}
        drop: set[str] = set()
        for w in writes:
            p = w.parent_id
            if p is None:
                continue
            if p == w.write_id:
                bad(w, "parent_id", "self_parent", "a write cannot rewrite itself")
            elif p not in ids:
                why = "was rejected" if p in all_ids else "is not a write of the loaded files"
                bad(w, "parent_id", "unknown_parent", f"parent write {p!r} {why}")
            elif ids[p].conversation_id != w.conversation_id:
                bad(w, "parent_id", "cross_conversation_parent", f"parent write {p!r} belongs to conversation "
                    f"{ids[p].conversation_id!r}, not {w.conversation_id!r}: a rewrite is judged against "
                    "the history of the memory it rewrites")
            else:
                continue
            drop.add(w.write_id)
        for w in writes:  # cycles: follow parents; a chain that returns to its start is a cycle
            if w.write_id in drop:
                continue
            seen, cur = {w.write_id}, ids[w.write_id].parent_id
            while cur is not None and cur in ids and cur not in drop:
                if cur in seen:
                    if cur == w.write_id:  # every write on the way is in the cycle
                        for x in ids.values():
                            if x.write_id in seen:
                                bad(x, "parent_id", "parent_cycle", "its parent chain comes back to it: "
                                    + " -> ".join(repr(y) for y in _chain(ids, x.write_id)))
                        drop |= seen
                    break
                seen.add(cur)
                cur = ids[cur].parent_id
        if not drop:
            return _check_supersedes(writes, bad)
        writes = [w for w in writes if w.write_id not in drop]


def _check_supersedes(writes: list[Write], bad: Any) -> list[Write]:
    """`supersedes` names families of the write's own conversation (a `source_id`, or the write id
    of a family's first write), never the write's own family, and no two families supersede each
    other, directly or around a longer loop (then neither can be the newer one). A typo here once
    turned a failing echo gate into a passing one, so each is an error, not a warning."""
    fam = families(writes)
    known: dict[str, set[str]] = {}
    for w in writes:
        known.setdefault(w.conversation_id, set()).add(fam[w.write_id])
    drop: set[str] = set()
    edges: dict[tuple[str, str], set[str]] = {}  # (conversation, family) -> families it supersedes
    for w in writes:
        for f in w.supersedes or ():
            if f == fam[w.write_id]:
                bad(w, "supersedes", "self_supersedes", f"family {f!r} is this write's own family: a write cannot "
                    "supersede itself")
            elif f not in known[w.conversation_id]:
                bad(w, "supersedes", "unknown_superseded", f"{f!r} is no family of conversation "
                    f"{w.conversation_id!r} (a family id is a source_id, or the write_id of a family's first write)")
            else:
                edges.setdefault((w.conversation_id, fam[w.write_id]), set()).add(f)
                continue
            drop.add(w.write_id)
    cyclic = _cyclic(edges)
    for w in writes:
        key = (w.conversation_id, fam[w.write_id])
        if w.write_id not in drop and key in cyclic and set(w.supersedes or ()) & cyclic[key]:
            bad(w, "supersedes", "supersedes_cycle", f"family {fam[w.write_id]!r} supersedes "
                f"{', '.join(sorted(repr(x) for x in cyclic[key]))}, which in turn supersede it: neither is the newer")
            drop.add(w.write_id)
    return [w for w in writes if w.write_id not in drop] if drop else writes


def _cyclic(edges: dict[tuple[str, str], set[str]]) -> dict[tuple[str, str], set[str]]:
    """For each (conversation, family) on a supersedes loop, the families it supersedes on that loop."""
    out: dict[tuple[str, str], set[str]] = {}
    for (conv, start), targets in edges.items():
        for t in targets:  # is `start` reachable from t?
            seen, todo = {t}, [t]
            while todo:
                cur = todo.pop()
                if cur == start:
                    out.setdefault((conv, start), set()).add(t)
                    break
                for nxt in edges.get((conv, cur), ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
    return out


def _chain(ids: dict[str, Write], start: str) -> list[str]:
    out, cur = [start], ids[start].parent_id
    while cur is not None and cur != start and len(out) < 10:
        out.append(cur)
        cur = ids[cur].parent_id
    return [*out, start]


_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE")


def _skeleton(s: str) -> str:
    """What a reader sees: NFKC (full-width letters, ligatures), without format (Cf) and control
    characters."""
    return "".join(c for c in unicodedata.normalize("NFKC", s)
                   if unicodedata.category(c) not in ("Cf", "Cc"))


def id_warnings(kind: str, items: Iterable[tuple[str, Source | None]], out: list[Problem]) -> None:
    """Ids a person would misread: invisible characters, letters of two scripts that look alike, or
    two ids of `items` that read the same (NFKC, invisible characters aside)."""
    from .safe import has_controls

    seen: dict[str, str] = {}
    for ident, src in items:
        where = (src.file if src else "?", src.line if src else None)
        if has_controls(ident):
            out.append(Problem(*where, kind, "invisible_in_id", "holds control, bidi or zero-width "
                               "characters (shown escaped)"))
        scripts = {unicodedata.name(c, "").split(" ")[0] for c in ident if c.isalpha()} & set(_SCRIPTS)
        if len(scripts) > 1:
            out.append(Problem(*where, kind, "mixed_script_id", f"mixes {' and '.join(sorted(scripts))} letters, "
                               "which can look identical"))
        key = _skeleton(ident)
        if key in seen and seen[key] != ident:
            out.append(Problem(*where, kind, "confusable_id", f"reads the same as {seen[key]!r} but differs"))
        seen.setdefault(key, ident)


def _id_warnings(convs: dict[str, Conversation], writes: list[Write]) -> list[Problem]:
    out: list[Problem] = []
    id_warnings("conversation_id", [(c, (cv.turns[0].source if cv.turns else None)) for c, cv in convs.items()], out)
    for cv in convs.values():
        id_warnings("turn_id", [(t.turn_id, t.source) for t in cv.turns], out)
    id_warnings("write_id", [(w.write_id, w.source) for w in writes], out)
    return out


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


# ---------------------------------------------------------------- output


class OutputError(ValueError):
    """An output path that must not or cannot be written (the message names it and why)."""


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def check_output(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """Before any work: the path an output will really be written to (a symlink is written through
    to its target), refusing one that is also an input, a directory, or in a folder that cannot
    be written. Raises OutputError."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(path)  # follows links, also those realpath cannot name (/proc/self/fd/1 -> pipe:[…])
    except OSError:
        st = None
    for i in inputs:
        if os.path.exists(i) and (os.path.realpath(i) == str(real)
                                  or st is not None and os.path.samefile(i, path) and stat.S_ISREG(st.st_mode)):
            raise OutputError(f"{path}: this output is also an input ({i}); it would be overwritten. "
                              "Write the output elsewhere")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a directory; name a file to write")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return path  # a FIFO, a device, a socket: written in place, as a stream
    folder = real.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write in {folder} (read-only or permission denied)")
    return real


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path` and rename it into place only if the block succeeds.

    Nothing an output path points at is destroyed: a symlink is written through to its target
    (the link stays); a FIFO, a character device or a socket is written in place, as a stream,
    never replaced by a file; a directory is refused. A new file gets the usual mode (0666 less
    the umask), an existing one keeps its own. A write that fails (disk full, read-only) leaves
    no temp file and raises OutputError naming the path and the cause."""
    shown = Path(path)
    target = check_output(shown)
    if target.exists() and not target.is_file():  # also a link to one: opened through the link
        try:
            with open(target, mode) as fh:
                yield fh
                fh.flush()
        except OSError as e:
            raise OutputError(f"{shown}: cannot write: {e.strerror or e}") from None
        return
    perms = (target.stat().st_mode & 0o7777) if target.exists() else (0o666 & ~_umask())
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise OutputError(f"{shown}: cannot write in {target.parent}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, perms)
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp, str(target)):  # not the caller's own read
            raise OutputError(f"{shown}: cannot write: {e.strerror or e}") from None
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temp folder beside `path`, renamed to `path` only if the block succeeds (removed if not).
    Where another process put `path` in place first, its folder is kept and ours removed: two
    processes building the same thing (a converted model) agree on one."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as e:
        raise OutputError(f"{target}: cannot write in {target.parent}: {e.strerror or e}") from None
    try:
        yield tmp
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically write rows as JSONL; returns the number written."""
    n = 0
    with atomic_writer(path) as fh:
        for row in rows:
            fh.write(json_dumps(row))
            fh.write(b"\n")
            n += 1
    return n


def turn_to_dict(t: Turn) -> dict[str, Any]:
    d: dict[str, Any] = {
        "type": "turn", "conversation_id": t.conversation_id, "turn_id": t.turn_id,
        "order": t.order, "speaker": t.speaker, "text": t.text,
    }
    if t.time is not None:
        d["time"] = t.time
    if t.session is not None:
        d["session"] = t.session
    return d


def write_to_dict(w: Write) -> dict[str, Any]:
    d: dict[str, Any] = {
        "type": "write", "write_id": w.write_id, "conversation_id": w.conversation_id, "text": w.text,
        "citations": list(w.citations), "last_seen_turn": w.last_seen_turn,
    }
    for k in ("time", "source_id", "parent_id", "operation", "round", "valid", "verified_correction", "supersedes",
              "meta"):
        v = getattr(w, k)
        if v is not None:
            d[k] = list(v) if isinstance(v, tuple) else v
    return d


def read_to_dict(r: Read) -> dict[str, Any]:
    retrieved: list[Any] = list(r.retrieved)
    if r.scores:
        retrieved = [{"write_id": w, "score": s} for w, s in zip(r.retrieved, r.scores, strict=True)]
    d: dict[str, Any] = {"type": "read", "read_id": r.read_id, "conversation_id": r.conversation_id,
                         "last_seen_turn": r.last_seen_turn, "query": r.query, "retrieved": retrieved}
    for k in ("time", "answer", "expected", "meta"):
        v = getattr(r, k)
        if v is not None:
            d[k] = v
    return d


def operation_to_dict(o: Operation) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "operation", "operation_id": o.operation_id, "conversation_id": o.conversation_id,
                         "kind": o.kind, "target": o.target, "last_seen_turn": o.last_seen_turn}
    if o.citations:
        d["citations"] = list(o.citations)
    for k in ("time", "successor", "origin", "meta"):
        v = getattr(o, k)
        if v is not None:
            d[k] = v
    return d


def header(producer: str) -> dict[str, Any]:
    return {"type": "header", "schema_version": SCHEMA_VERSION, "producer": producer}
