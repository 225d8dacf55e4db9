"""The history rules across records: a conversation's turns, citations no later than the write
point, lineage and supersedes without cycles, operations and reads that name stored writes, and ids
a person would misread. Bad records are dropped with their problems; `spill.py` applies the same
rules one conversation at a time."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .records import (
    Conversation,
    MemoryLog,
    Operation,
    Problem,
    Read,
    Source,
    Turn,
    Write,
    lineage_families,
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
                             for o in operations), problems, lambda o: op_point(o, convs[o.conversation_id]))
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


def accept_operations(checked: Iterable[tuple[Operation, list[Problem]]], problems: list[Problem],
                      point: Callable[[Operation], int] = lambda op: 0) -> list[Operation]:
    """Operations without problems, in input order, each id claimed once; a write is deleted at
    most once (nothing acts on it after) and invalidated at most once, in the order of the
    operations' points (`point`: the order of an accepted operation's point), not of the file's
    lines: what came first in the conversation is the one that stands."""
    claimed = _claim(checked, problems, lambda o: o.operation_id, "operation")
    refused: set[int] = set()
    done: dict[tuple[str, str], Operation] = {}  # (target, kind) -> the operation that did it
    for op in sorted(claimed, key=point):  # stable: one point keeps the input order
        gone = done.get((op.target, "delete"))
        again = done.get((op.target, op.kind))
        if gone is not None or again is not None:
            prev = gone or again
            problems.append(_problem(op, "target", "target_deleted_twice" if gone else f"target_{op.kind}d_twice",
                                     f"write {op.target!r} was already {prev.kind}d by operation "
                                     f"{prev.operation_id!r} at {_where(prev.source)}"))
            refused.add(id(op))
            continue
        done[(op.target, op.kind)] = op
    return [op for op in claimed if id(op) not in refused]


def op_point(op: Operation, conv: Conversation) -> int:
    """The order of an accepted operation's point in its conversation."""
    return conv.turns[conv.position[op.last_seen_turn]].order


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
        for cycle in _cycles(writes, ids, drop):
            for x in writes:
                if x.write_id in cycle:
                    bad(x, "parent_id", "parent_cycle", "its parent chain comes back to it: "
                        + " -> ".join(repr(y) for y in _chain(ids, x.write_id)))
            drop |= cycle
        if not drop:
            return _check_supersedes(writes, bad)
        writes = [w for w in writes if w.write_id not in drop]


def _check_supersedes(writes: list[Write], bad: Any) -> list[Write]:
    """`supersedes` names families of the write's own conversation (a `source_id`, or the write id
    of a family's first write), never the write's own family, and no two families supersede each
    other, directly or around a longer loop (then neither can be the newer one). A typo here once
    turned a failing echo gate into a passing one, so each is an error, not a warning."""
    fam = lineage_families(writes)
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


def _cycles(writes: list[Write], ids: dict[str, Write], drop: set[str]) -> list[set[str]]:
    """The parent cycles among `writes` (those not dropped), in the order of their first member:
    each write's chain is followed once, so a chain of n rewrites costs n steps, not n^2."""
    done: set[str] = set()
    found: list[tuple[int, set[str]]] = []
    index = {w.write_id: i for i, w in enumerate(writes)}
    for w in writes:
        path: list[str] = []
        on_path: dict[str, int] = {}
        cur: str | None = w.write_id
        while cur is not None and cur in ids and cur not in drop and cur not in done:
            if cur in on_path:
                cycle = set(path[on_path[cur]:])
                found.append((min(index[x] for x in cycle), cycle))
                break
            on_path[cur] = len(path)
            path.append(cur)
            cur = ids[cur].parent_id
        done.update(path)
    return [c for _, c in sorted(found, key=lambda x: x[0])]


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
    from ..safe import has_controls

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
