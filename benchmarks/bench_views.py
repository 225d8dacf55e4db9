"""Expanded-view building over all LoCoMo writes: indexed-once vs a per-write index baseline.

Usage: python benchmarks/bench_views.py [PATH/locomo10.json]
Prints writes/second for the product path (one BM25 index per conversation, masked by write
point) and for a naive baseline run in the same process (a fresh BM25 index over each write's
pre-write history, quadratic in history length), their ratio, and how time per write grows when
the history is made 2x and 4x longer.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from rank_bm25 import BM25Okapi

from derivaudit import EvidenceSettings, build_views, load_log
from derivaudit.audit.evidence import tokenize
from derivaudit.importers import run_import
from derivaudit.log.io import check_rows, turn_to_dict, write_to_dict

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo10.json"


def naive(log) -> int:
    n = 0
    for w in log.writes:
        conv = log.conversations[w.conversation_id]
        point = conv.position[w.last_seen_turn]
        docs = [tokenize(t.text) for t in conv.turns[: point + 1]]
        bm = BM25Okapi(docs)
        scores = bm.get_scores(tokenize(w.text))
        sorted(range(len(scores)), key=lambda i: -scores[i])[:12]
        n += 1
    return n


def stretched(log, factor: int):
    """The first conversation with its history repeated `factor` times, writes at the end."""
    cid = next(iter(log.conversations))
    conv = log.conversations[cid]
    rows, k = [], 0
    for r in range(factor):
        for t in conv.turns:
            d = turn_to_dict(t)
            d.update(turn_id=f"{t.turn_id}#{r}", order=k)
            rows.append(d)
            k += 1
    last = rows[-1]["turn_id"]
    for w in log.writes:
        if w.conversation_id == cid:
            d = write_to_dict(w)
            d.update(citations=[f"{c}#{factor - 1}" for c in w.citations], last_seen_turn=last)
            rows.append(d)
    out, problems = check_rows("stretched", rows)
    assert not problems, problems[:3]
    return out


def timed(fn, *a) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn(*a)
    return time.perf_counter() - t0, n


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    with tempfile.TemporaryDirectory() as d:
        t_imp, _ = timed(lambda: run_import("locomo", src, Path(d) / "l.jsonl") and 0)
        log = load_log(Path(d) / "l.jsonl")
    s = EvidenceSettings()
    t_fast, n = timed(lambda: sum(1 for _ in build_views(log, s)))
    limited = sum(v.search_limited for v in build_views(log, s))
    t_naive, _ = timed(naive, log)
    print(f"import: {t_imp:.2f}s for {len(log.writes)} writes, {log.n_turns} turns")
    print(f"indexed once: {n / t_fast:,.0f} writes/s ({t_fast:.2f}s)")
    print(f"naive per-write index (baseline): {n / t_naive:,.0f} writes/s ({t_naive:.2f}s)")
    print(f"ratio indexed/naive: {t_naive / t_fast:.1f}x")
    print(f"search-limited: {limited}/{n} = {limited / n:.1%} (floor {s.limit_floor})")
    per = {}
    for f in (1, 2, 4):
        lg = stretched(log, f)
        t, m = timed(lambda lg=lg: sum(1 for _ in build_views(lg, s)))
        per[f] = t / m
        print(f"history x{f}: {lg.n_turns} turns, {per[f] * 1e3:.2f} ms/write ({per[f] / per[1]:.2f}x of x1)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
