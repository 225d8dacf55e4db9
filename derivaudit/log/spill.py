"""A memory log larger than memory: records on disk, checked and read one conversation at a time.

`io.load_log` holds every record in memory, which `scan` needs and which suits any log a model can
audit in reasonable time. `validate` and `views` also meet multi-gigabyte exports; for them,
`SpilledLog` streams the files once into a temporary SQLite file and applies the same checks, with
the same functions (`history.conversation`, `write_problems`, `accept_writes`, `id_warnings`),
conversation by conversation. Memory then holds the largest conversation plus one small entry per
write (id, parent, position; no text), whatever the file size.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import fields
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

from .history import (
    accept_operations,
    accept_reads,
    accept_writes,
    conversation,
    id_warnings,
    op_point,
    operation_problems,
    point_order,
    read_problems,
    write_problems,
)
from .io import LogError, read_records
from .records import Conversation, Operation, Problem, Read, Source, Turn, Write

T = TypeVar("T")
_TABLES = {Write: "writes", Read: "reads", Operation: "operations"}
_BATCH = 10_000
# records travel as plain tuples (pickling a slotted dataclass goes through dataclasses' slow path)
_FIELDS = {kind: attrgetter(*(f.name for f in fields(kind) if f.name != "source"))
           for kind in (Turn, Write, Read, Operation)}


def _pack(r: Turn | Write | Read | Operation) -> bytes:
    src = r.source
    return pickle.dumps((*_FIELDS[type(r)](r), src.file if src else None, src.line if src else 0),
                        pickle.HIGHEST_PROTOCOL)


def _unpack(kind: type[T], blob: bytes) -> T:
    *vals, file, line = pickle.loads(blob)
    return kind(*vals, source=Source(file, line) if file is not None else None)  # type: ignore[call-arg]


PREFIX = "derivaudit-log-"
STALE_S = 24 * 3600  # a spill folder without a process id (older versions) is stale after a day


def remove_stale(folder: str | None = None) -> list[str]:
    """Delete the spill folders of processes that are gone (killed before they could clean up);
    returns their names. A folder's name carries its process id; one that does not is removed
    when older than STALE_S."""
    root = Path(folder or tempfile.gettempdir())
    gone = []
    try:
        entries = list(root.glob(f"{PREFIX}*"))
    except OSError:
        return gone
    for d in entries:
        pid_text = d.name[len(PREFIX):].split("-", 1)[0]
        try:
            if pid_text.isdigit():
                if _alive(int(pid_text)):
                    continue
            elif time.time() - d.stat().st_mtime < STALE_S:
                continue
            shutil.rmtree(d)
            gone.append(d.name)
        except OSError:
            continue  # another user's, or already gone
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


class SpilledLog:
    """The checked log. `problems` and `warnings` as `io.check_log` gives them; the accepted records
    are read back with `each`. Close it (or use `with`) to delete the temporary file."""

    def __init__(self, paths: Sequence[str | Path], *, keep_text: bool = True) -> None:
        remove_stale()
        self._dir = tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-")
        self._db = sqlite3.connect(Path(self._dir.name) / "log.sqlite")
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=FILE"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE turns (conv TEXT, rec BLOB)")
        self._db.execute("CREATE TABLE writes (seq INTEGER PRIMARY KEY, conv TEXT, rec BLOB)")
        self._db.execute("CREATE TABLE reads (seq INTEGER PRIMARY KEY, conv TEXT, rec BLOB)")
        self._db.execute("CREATE TABLE operations (seq INTEGER PRIMARY KEY, conv TEXT, rec BLOB)")
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        try:
            self._load(paths, keep_text)
            self._check()
        except BaseException:
            self.close()
            raise

    def _load(self, paths: Sequence[str | Path], keep_text: bool) -> None:
        turns: list[tuple[str, bytes]] = []
        rows: dict[type, list[tuple[int, str, bytes]]] = {Write: [], Read: [], Operation: []}
        seq = 0
        for p in paths:
            for r in read_records(p, self.problems, keep_text=keep_text):
                blob = _pack(r)
                if isinstance(r, Turn):
                    turns.append((r.conversation_id, blob))
                else:
                    rows[type(r)].append((seq, r.conversation_id, blob))
                    seq += 1
                if len(turns) + sum(map(len, rows.values())) >= _BATCH:
                    self._insert(turns, rows)
        self._insert(turns, rows)
        for table in ("turns", *_TABLES.values()):
            self._db.execute(f"CREATE INDEX {table}_conv ON {table} (conv)")

    def _insert(self, turns: list[tuple[str, bytes]], rows: dict[type, list[tuple[int, str, bytes]]]) -> None:
        self._db.executemany("INSERT INTO turns VALUES (?, ?)", turns)
        turns.clear()
        for kind, batch in rows.items():
            self._db.executemany(f"INSERT INTO {_TABLES[kind]} VALUES (?, ?, ?)", batch)
            batch.clear()

    def _turns(self, conv: str) -> list[Turn]:
        return [_unpack(Turn, b) for (b,) in self._db.execute(
            "SELECT rec FROM turns WHERE conv = ? ORDER BY rowid", (conv,))]

    def _rows(self, conv: str | None, table: str = "writes") -> list[tuple[int, Any]]:
        """(seq, record) of a conversation's writes (or reads); of conversations without turns when
        `conv` is None."""
        kind = next(k for k, t in _TABLES.items() if t == table)
        sql = (f"SELECT seq, rec FROM {table} WHERE conv = ? ORDER BY seq" if conv is not None else
               f"SELECT seq, rec FROM {table} WHERE conv NOT IN (SELECT conv FROM turns) ORDER BY seq")
        return [(s, _unpack(kind, b)) for s, b in self._db.execute(sql, (conv,) if conv is not None else ())]

    def _check(self) -> None:
        # conversations in the order their first turn appears, as io.check_log orders them
        self._convs = [c for (c,) in self._db.execute("SELECT conv FROM turns GROUP BY conv ORDER BY MIN(rowid)")]
        self._conv_set = set(self._convs)
        checked: list[tuple[int, Write, list[Problem]]] = []
        group: dict[int, int] = {}  # write seq -> index of its conversation
        points: dict[int, int] = {}  # write seq -> order of its write point
        firsts, turn_warnings = [], []
        self.n_turns = 0
        files: dict[str, str] = {}

        def lean(w: Write, cid: str) -> Write:  # what acceptance and lineage read, strings shared
            src = w.source and Source(files.setdefault(w.source.file, w.source.file), w.source.line)
            return Write(w.write_id, cid, "", (), "", parent_id=w.parent_id, source_id=w.source_id,
                         supersedes=w.supersedes, source=src)

        for i, cid in enumerate(self._convs):
            conv = conversation(self._turns(cid), self.problems)
            self.n_turns += len(conv.turns)
            firsts.append((cid, conv.turns[0].source))
            id_warnings("turn_id", ((t.turn_id, t.source) for t in conv.turns), turn_warnings)
            for seq, w in self._rows(cid):
                probs = write_problems(w, conv)
                checked.append((seq, lean(w, cid), probs))
                group[seq] = i
                if not probs:
                    points[seq] = point_order(w, conv)
        for seq, w in self._rows(None):
            checked.append((seq, lean(w, w.conversation_id), write_problems(w, None)))
        checked.sort(key=lambda x: x[0])
        kept = accept_writes(((w, p) for _, w, p in checked), self.problems)
        ids = {id(w) for w in kept}
        self._seq = {w.write_id: s for s, w, _ in checked if id(w) in ids}  # accepted writes, input order
        self._group = {s: group[s] for s in self._seq.values()}
        stored = {w: (self._convs[self._group[s]], points[s]) for w, s in self._seq.items()}
        self.n_reads = self._check_at_points("reads", lambda r, conv: read_problems(r, conv, stored), accept_reads)
        all_ids = {w.write_id for _, w, _ in checked}
        points_of: dict[int, int] = {}  # id(operation) -> the order of its point, for the accepted ones

        def op_problems(o: Any, conv: Conversation | None) -> list[Problem]:
            probs = operation_problems(o, conv, stored, all_ids)
            if not probs and conv is not None:
                points_of[id(o)] = op_point(o, conv)
            return probs

        self.n_operations = self._check_at_points("operations", op_problems, lambda checked, problems: (
            accept_operations(checked, problems, lambda o: points_of[id(o)])))
        del checked
        self.problems.sort(key=lambda p: (p.file, p.line or 0))
        id_warnings("conversation_id", firsts, self.warnings)
        self.warnings += turn_warnings
        id_warnings("write_id", [(w.write_id, w.source) for w in kept], self.warnings)

    def _check_at_points(self, table: str, problems_of: Callable[[Any, Conversation | None], list[Problem]],
                         accept: Callable[..., list[Any]]) -> int:
        """Check the reads (or operations) one conversation at a time against the accepted writes,
        then accept them in input order; returns how many were accepted."""
        checked: list[tuple[int, Any, list[Problem]]] = []
        for cid in [c for (c,) in self._db.execute(f"SELECT DISTINCT conv FROM {table}")]:
            conv = conversation(self._turns(cid), []) if cid in self._conv_set else None
            checked += [(s, r, problems_of(r, conv)) for s, r in self._rows(cid, table)]
        checked.sort(key=lambda x: x[0])
        return len(accept(((r, p) for _, r, p in checked), self.problems))

    @property
    def n_conversations(self) -> int:
        return len(self._convs)

    @property
    def write_ids(self) -> list[str]:
        """The accepted writes' ids, in input order."""
        return list(self._seq)

    @property
    def skipped(self) -> list[Problem]:
        """What `skip_invalid` leaves out (as `MemoryLog.skipped`)."""
        return self.problems

    def raise_problems(self, *, skip_invalid: bool = False) -> None:
        """As `io.load_log`: any problem raises LogError unless `skip_invalid`."""
        if self.problems and not skip_invalid:
            raise LogError(self.problems)

    def each(self, make: Callable[[Conversation], Callable[[Write], T]],
             write_ids: Iterable[str] | None = None) -> Iterator[T]:
        """`make(conversation)(write)` for every accepted write (or those of `write_ids`), yielded in
        input order. One conversation is in memory at a time; when the log interleaves conversations,
        results wait in the temporary file until their turn."""
        seqs = set(self._seq.values()) if write_ids is None else {self._seq[i] for i in write_ids if i in self._seq}
        in_order = sorted(seqs) == sorted(seqs, key=lambda s: (self._group[s], s))
        results = self._results(make, seqs)
        if in_order:
            yield from (r for _, r in results)
            return
        self._db.execute("CREATE TABLE IF NOT EXISTS results (seq INTEGER PRIMARY KEY, rec BLOB)")
        self._db.execute("DELETE FROM results")
        batch: list[tuple[int, bytes]] = []
        for s, r in results:
            batch.append((s, pickle.dumps(r, pickle.HIGHEST_PROTOCOL)))
            if len(batch) >= _BATCH:
                self._db.executemany("INSERT INTO results VALUES (?, ?)", batch)
                batch.clear()
        self._db.executemany("INSERT INTO results VALUES (?, ?)", batch)
        for (b,) in self._db.execute("SELECT rec FROM results ORDER BY seq"):
            yield pickle.loads(b)

    def _results(self, make: Callable[[Conversation], Callable[[Write], T]],
                 seqs: set[int]) -> Iterator[tuple[int, T]]:
        for cid in self._convs:
            ws = [(s, w) for s, w in self._rows(cid) if s in seqs]
            if not ws:
                continue
            fn = make(conversation(self._turns(cid), []))
            for s, w in ws:
                yield s, fn(w)

    def close(self) -> None:
        self._db.close()
        self._dir.cleanup()

    def __enter__(self) -> SpilledLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
