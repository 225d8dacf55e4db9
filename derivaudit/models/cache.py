"""A persistent result cache (SQLite) and a wrapper that puts it in front of any backend.

Keys hash everything that changes an answer: the backend's identity (model, revision or file
hash, chat template, dtype), the kind of call, the full prompt, k, and generation settings.
Reruns and resumed runs therefore cost nothing for items already answered. SQLite in WAL mode with
a busy timeout lets several processes read and write one cache file without corrupting it.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..log.lines import read_objects
from ..log.records import LogError
from ..paths import cache_path
from ..safe import dumps
from .base import DEFAULT_TOP_K, YES_NO, Backend, Prompt, Score

CACHE_VERSION = 1
EXPORT_FORMAT = "derivaudit-cache"  # the header's "format" of an exported cache file
_KEY = re.compile(r"[0-9a-f]{64}")
_FIELDS = {"key": str, "kind": str, "backend": str, "model": str, "created": (int, float)}
_SCORE_FIELDS = {"logodds", "logp_yes", "logp_no", "bounded", "error", "k", "top"}


class CacheFileError(ValueError):
    """An exported cache file that cannot be imported, or a damaged cache database (the message
    names the file, and the line and field where there is one)."""


@contextlib.contextmanager
def _guard(path: Path) -> Iterator[None]:
    """A cache file that is not a SQLite database (or a damaged one) is named with what to do; a
    locked or read-only one stays the OperationalError the commands explain."""
    try:
        yield
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as e:
        raise CacheFileError(f"{path}: the result cache is damaged ({e}); it holds only answers that can be "
                             f"computed again: remove it (`rm {path}*`) and run again") from None


def _score_problem(v: Any) -> str | None:
    if not isinstance(v, dict) or not set(v) <= _SCORE_FIELDS or "logodds" not in v:
        return f"a score is an object with logodds and some of {', '.join(sorted(_SCORE_FIELDS - {'logodds'}))}"
    for f in ("logodds", "logp_yes", "logp_no"):
        if v.get(f) is not None and (not isinstance(v[f], int | float) or isinstance(v[f], bool)):
            return f"{f}: a number or null, not {v[f]!r:.40}"
    if (v["logodds"] is None) != isinstance(v.get("error"), str):
        return "logodds is null exactly when error (a string) is set"
    if not isinstance(v.get("bounded", False), bool) or not isinstance(v.get("k", 1), int):
        return "bounded: true or false; k: an integer"
    top = v.get("top", [])
    if not isinstance(top, list) or not all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                                            and isinstance(x[1], int | float) for x in top):
        return "top: a list of [token, log-probability] pairs"
    return None


def value_problem(kind: str, value: Any) -> str | None:
    """What is wrong with a cached value of `kind` (None when it is what that kind of call returns):
    a value read from an export must be usable where a scan will read it."""
    if kind == "generate":
        return None if isinstance(value, str) else "a generated answer is a string"
    if kind == "score":
        return _score_problem(value)
    return "kind: score or generate"


class ResultCache:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _guard(self.path):
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA busy_timeout=60000")
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, kind TEXT NOT NULL, backend TEXT NOT NULL,"
                " model TEXT NOT NULL, value BLOB NOT NULL, created REAL NOT NULL)"
            )

    @staticmethod
    def key(identity: dict[str, Any], kind: str, payload: dict[str, Any]) -> str:
        blob = orjson.dumps({"v": CACHE_VERSION, "id": identity, "kind": kind, **payload},
                            option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(blob).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        with _guard(self.path):
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                q = f"SELECT key, value FROM results WHERE key IN ({','.join('?' * len(chunk))})"
                for k, v in self.db.execute(q, chunk):
                    found[k] = orjson.loads(v)
        return found

    def put_many(self, rows: Sequence[tuple[str, str, str, str, Any]]) -> None:
        """rows: (key, kind, backend, model, value)."""
        now = time.time()
        with _guard(self.path), self.db:  # one transaction
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)",
                [(k, kind, b, m, orjson.dumps(v), now) for k, kind, b, m, v in rows],
            )

    def stats(self) -> dict[str, Any]:
        with _guard(self.path):
            rows = self.db.execute(
                "SELECT backend, model, kind, COUNT(*) FROM results GROUP BY backend, model, kind ORDER BY 4 DESC"
            ).fetchall()
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return {
            "path": str(self.path),
            "entries": sum(r[3] for r in rows),
            "bytes": size,
            "by_model": [{"backend": b, "model": m, "kind": k, "entries": n} for b, m, k, n in rows],
        }

    def export(self, fh: Any, model: str | None = None) -> int:
        """Every entry (or one model's, as `clear` matches it) as JSONL to the binary file `fh`: a
        header line, then one entry per line. Keys are hashes, so no prompt is in it; values are the
        answers, and a generated one (an obligation list) restates a memory's text. It carries a warm
        cache to another machine (a CI runner, a laptop)."""
        fh.write(orjson.dumps({"type": "header", "format": EXPORT_FORMAT, "cache_version": CACHE_VERSION}) + b"\n")
        q = "SELECT key, kind, backend, model, value, created FROM results"
        args: tuple[str, ...] = ()
        if model:
            q, args = q + " WHERE model LIKE ?", (f"%{model}%",)
        n = 0
        with _guard(self.path):
            for k, kind, b, m, v, created in self.db.execute(q + " ORDER BY key", args):
                fh.write(dumps({"key": k, "kind": kind, "backend": b, "model": m, "value": orjson.loads(v),
                                "created": created}) + b"\n")  # generated text made inert, as in every output
                n += 1
        return n

    def import_file(self, path: str | Path) -> tuple[int, int]:
        """Entries of an exported file (`export`; gzip-compressed when its name ends in .gz) added to
        this cache: (read, added). An entry this cache already holds is kept as it is. The whole file
        is checked before anything is written: a bad line raises CacheFileError and adds nothing."""
        path = Path(path)
        rows: list[tuple[str, str, str, str, bytes, float]] = []
        try:  # the log reader's limits: line length, inflated size and ratio (MAX_LINE_BYTES, ...)
            items = read_objects(path)
        except LogError as e:
            raise CacheFileError(str(e.problems[0])) from None
        n = 0
        for i, (n, obj, problem) in enumerate(items):
            where = f"{path}:{n}"
            if problem is not None:
                raise CacheFileError(str(problem))
            assert obj is not None
            if i == 0:
                if obj.get("type") != "header" or obj.get("format") != EXPORT_FORMAT:
                    raise CacheFileError(f"{where}: format: not a derivaudit cache export (its first line "
                                         f"must be the header written by `derivaudit cache export`)")
                if obj.get("cache_version") != CACHE_VERSION:
                    raise CacheFileError(f"{where}: cache_version: {obj.get('cache_version')!r}, this "
                                         f"derivaudit reads {CACHE_VERSION}")
                continue
            for f, t in _FIELDS.items():
                if not isinstance(obj.get(f), t) or isinstance(obj.get(f), bool):
                    raise CacheFileError(f"{where}: {f}: missing or not a {getattr(t, '__name__', 'number')}")
            if not _KEY.fullmatch(obj["key"]):
                raise CacheFileError(f"{where}: key: not a SHA-256 hex digest")
            if "value" not in obj:
                raise CacheFileError(f"{where}: value: missing")
            if why := value_problem(obj["kind"], obj["value"]):
                raise CacheFileError(f"{where}: value: not what a {obj['kind']!r} call returns ({why})")
            rows.append((obj["key"], obj["kind"], obj["backend"], obj["model"], orjson.dumps(obj["value"]),
                         float(obj["created"])))
        if n == 0:
            raise CacheFileError(f"{path}: empty file (not a derivaudit cache export)")
        with _guard(self.path), self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?)", rows)
        return len(rows), cur.rowcount  # rows inserted (an ignored one counts 0)

    def clear(self, model: str | None = None) -> int:
        with _guard(self.path), self.db:
            if model:
                cur = self.db.execute("DELETE FROM results WHERE model LIKE ?", (f"%{model}%",))
            else:
                cur = self.db.execute("DELETE FROM results")
        self.db.execute("VACUUM")
        return cur.rowcount

    def close(self) -> None:
        self.db.close()


class CachedBackend(Backend):
    """Answers from the cache where it can and sends only the misses to the wrapped backend."""

    def __init__(self, inner: Backend, cache: ResultCache):
        super().__init__()
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.usage = inner.usage
        self.hits = 0
        self.misses = 0
        ident = inner.identity()
        self._ident = ident
        self._model = str(ident.get("model"))

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def identity_aliases(self) -> list[dict[str, Any]]:
        return self.inner.identity_aliases()

    def _cached(self, kind: str, payloads: list[dict[str, Any]], compute) -> list[Any]:
        keys = [ResultCache.key(self._ident, kind, p) for p in payloads]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in found:
                first.setdefault(k, i)  # the same prompt twice in one call is computed once
        if first:
            self._from_aliases(kind, payloads, keys, first, found)
        todo = list(first.values())
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        step = self.inner.commit_every or len(todo) or 1
        if step < len(todo):  # prompts of one shared block in one part, as the backend would order them
            first_of: dict[tuple, int] = {}  # (system, shared) -> its first prompt
            for i in todo:
                first_of.setdefault(tuple(payloads[i]["prompt"][:2]), i)
            todo.sort(key=lambda i: (first_of[tuple(payloads[i]["prompt"][:2])], i))
        for s in range(0, len(todo), step):
            part = todo[s:s + step]
            rows = []
            for i, value in zip(part, compute(part), strict=True):
                found[keys[i]] = value
                rows.append((keys[i], kind, self.name, self._model, value))
            self.cache.put_many(rows)  # stored before the next part is computed
        return [found[k] for k in keys]

    def _from_aliases(self, kind: str, payloads: list[dict[str, Any]], keys: list[str], first: dict[str, int],
                      found: dict[str, Any]) -> None:
        """Answers cached under an identity the model had before (see `Backend.identity_aliases`),
        copied under today's key so the next lookup finds them directly."""
        for alias in self.inner.identity_aliases():
            old = {k: ResultCache.key(alias, kind, payloads[i]) for k, i in first.items()}
            hit = self.cache.get_many(list(old.values()))
            rows = [(k, kind, self.name, self._model, hit[o]) for k, o in old.items() if o in hit]
            for k, _, _, _, value in rows:
                found[k] = value
                del first[k]
            if rows:
                self.cache.put_many(rows)
            if not first:
                return

    def score(self, prompts: Sequence[Prompt], k: int = DEFAULT_TOP_K) -> list[Score]:
        payloads = [{"prompt": [p.system, p.shared, p.task, p.answer_prefix], "k": k,
                     **({} if p.verdict == YES_NO else {"verdict": p.verdict})} for p in prompts]
        values = self._cached("score", payloads,
                              lambda todo: [s.to_dict() for s in self.inner.score([prompts[i] for i in todo], k)])
        return [Score.from_dict(v) for v in values]

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 256,
                 json_schema: dict[str, Any] | None = None, stop: Sequence[str] = ()) -> list[str]:
        payloads = [{"prompt": [p.system, p.shared, p.task, p.answer_prefix], "max_new_tokens": max_new_tokens,
                     "json_schema": json_schema, "stop": list(stop), "temperature": 0} for p in prompts]
        return self._cached("generate", payloads, lambda todo: self.inner.generate(
            [prompts[i] for i in todo], max_new_tokens, json_schema, stop))

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
