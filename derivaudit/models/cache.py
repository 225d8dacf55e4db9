"""A persistent result cache (SQLite) and a wrapper that puts it in front of any backend.

Keys hash everything that changes an answer: the backend's identity (model, revision or file
hash, chat template, dtype), the kind of call, the full prompt, k, and generation settings.
Reruns and resumed runs therefore cost nothing for items already answered. SQLite in WAL mode with
a busy timeout lets several processes read and write one cache file without corrupting it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ..paths import cache_path
from .base import DEFAULT_TOP_K, YES_NO, Backend, Prompt, Score

CACHE_VERSION = 1


class ResultCache:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
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
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            q = f"SELECT key, value FROM results WHERE key IN ({','.join('?' * len(chunk))})"
            for k, v in self.db.execute(q, chunk):
                found[k] = orjson.loads(v)
        return found

    def put_many(self, rows: Sequence[tuple[str, str, str, str, Any]]) -> None:
        """rows: (key, kind, backend, model, value)."""
        now = time.time()
        with self.db:  # one transaction
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)",
                [(k, kind, b, m, orjson.dumps(v), now) for k, kind, b, m, v in rows],
            )

    def stats(self) -> dict[str, Any]:
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

    def clear(self, model: str | None = None) -> int:
        with self.db:
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
