"""Parsed JSON objects to records: the JSON Schema of the memory log (v1), checked per record,
each violation explained by field path; ranks and duplicates of a read's retrieved list."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from .lines import _JSON_TYPES
from .records import (
    LOG_SCHEMA_VERSION,
    MAX_PASSAGES,
    Operation,
    Problem,
    Read,
    Source,
    Turn,
    Write,
)

SCHEMA_FILE = f"memory-log.v{LOG_SCHEMA_VERSION}.schema.json"
MAX_ORDER = 2**53 - 1  # integers every JSON reader keeps exact
RECORD_TYPES = ("turn", "write", "read", "operation", "header")
ID_FIELDS = ("conversation_id", "turn_id", "write_id", "last_seen_turn", "parent_id", "source_id", "read_id",
             "operation_id", "target", "successor")



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
            (x, "unknown_field", f"not a field of a {kind} in schema v{LOG_SCHEMA_VERSION} "
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
                 f"schema_version {_short(inst)} is not supported; this derivaudit reads version {LOG_SCHEMA_VERSION}")]
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


def _record_problems(f: str, n: int, obj: dict[str, Any], kind: str, first: int) -> list[Problem]:
    """Everything wrong with one record on its own: the schema, integers written as floats, a read's
    ranks, a header after the first line."""
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
    return errs


def normalise_ids(obj: dict[str, Any], kind: str) -> None:
    """Ids compare after NFC: a decomposed é cites the same turn as a composed one. In place; a
    value of the wrong type is left for the schema check to name."""
    for fld in ID_FIELDS:
        v = obj.get(fld)
        if isinstance(v, str) and not v.isascii():
            obj[fld] = unicodedata.normalize("NFC", v)
    for fld in ("citations", "supersedes"):
        v = obj.get(fld)
        if kind in ("write", "operation") and isinstance(v, list):
            obj[fld] = [unicodedata.normalize("NFC", c) if isinstance(c, str) else c for c in v]


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
        if kind not in RECORD_TYPES:
            msg = "missing" if kind is None else f"{_short(kind)} is not one of {', '.join(RECORD_TYPES)}"
            problems.append(Problem(f, n, "type", "missing_field" if kind is None else "bad_value", msg))
            continue
        if errs := _record_problems(f, n, obj, kind, first):
            problems.extend(errs)
            continue
        normalise_ids(obj, kind)
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
