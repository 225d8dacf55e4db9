"""The read path measured to the answer on LoCoMo: read logs built from its question–answer pairs,
then the answer replay (`derivaudit overlap LOG --answers`: no memory, the logged budget, MemTrim)
on the embedded model, with its cost per read.

Usage:
    python benchmarks/bench_answers.py --conversations conv-26,conv-30 --per-category 5 --out /tmp/answers
    python benchmarks/bench_answers.py --build-only --out /tmp/answers     # the read logs, no model

Read logs: for each chosen conversation, `derivaudit import locomo` gives its turns and its 2,541
observation writes' share; each question with an answer (categories 1-4; the adversarial category 5
has none) becomes a `read` at the conversation's last turn, its query the question, its expected
answer LoCoMo's, its pool the conversation's memories ranked by BM25 over the question (top
`--pool`, the product's tokenizer), logged best first. The first `--per-category` questions of
each category are taken, in LoCoMo's order (no choice by outcome). LoCoMo's text is never stored in
the repository (CC BY-NC); the logs are written under --out.

FPA is not replayed here: LoCoMo's observations carry no source, parent or correction, so every
record is its own family and FPA serves exactly the logged budget (`--check-fpa` verifies it on
the built logs); DCE needs a historical claim, which these reads do not have.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402
from rank_bm25 import BM25Okapi  # noqa: E402

from derivaudit import load_log  # noqa: E402
from derivaudit.audit.evidence import tokenize  # noqa: E402
from derivaudit.importers import run_import  # noqa: E402
from derivaudit.log.io import write_jsonl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"


def read_logs(locomo: Path, work: Path, conversations: list[str], per_category: int, pool: int) -> Path:
    """One JSONL log: the chosen conversations' turns and writes, and a read per chosen question."""
    work.mkdir(parents=True, exist_ok=True)
    full = work / "locomo.jsonl"
    if not full.exists():
        run_import("locomo", locomo, full)
    rows = [orjson.loads(x) for x in full.read_bytes().splitlines() if x.strip()]
    keep = [r for r in rows if r.get("type") in ("turn", "write") and r.get("conversation_id") in conversations]
    samples = {s["sample_id"]: s for s in orjson.loads(locomo.read_bytes())}
    reads = []
    for cid in conversations:
        turns = [r for r in keep if r["type"] == "turn" and r["conversation_id"] == cid]
        writes = [r for r in keep if r["type"] == "write" and r["conversation_id"] == cid]
        bm25 = BM25Okapi([tokenize(w["text"]) for w in writes])
        last = max(turns, key=lambda t: t["order"])
        taken: dict[int, int] = {}
        for i, qa in enumerate(samples[cid]["qa"]):
            cat = qa.get("category")
            if cat not in (1, 2, 3, 4) or "answer" not in qa or taken.get(cat, 0) >= per_category:
                continue
            taken[cat] = taken.get(cat, 0) + 1
            scores = bm25.get_scores(tokenize(qa["question"]))
            ranked = sorted(range(len(writes)), key=lambda j: (-scores[j], j))[:pool]
            reads.append({"type": "read", "read_id": f"{cid}-q{i}", "conversation_id": cid,
                          "last_seen_turn": last["turn_id"], "time": last.get("time"), "query": qa["question"],
                          "retrieved": [{"write_id": writes[j]["write_id"], "rank": n + 1,
                                         "score": round(float(scores[j]), 4)} for n, j in enumerate(ranked)],
                          "expected": str(qa["answer"]), "meta": {"locomo_category": cat}})
    out = work / f"reads_{'_'.join(conversations)}_{per_category}.jsonl"
    write_jsonl(out, [*keep, *reads])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--conversations", default="conv-26,conv-30")
    ap.add_argument("--per-category", type=int, default=5)
    ap.add_argument("--pool", type=int, default=10, help="candidates logged per read (the frozen pool)")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--model", default=None, help="BACKEND:MODEL (default: the embedded model)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--check-fpa", action="store_true")
    a = ap.parse_args()
    if not a.locomo.exists():
        print(f"skipped: {a.locomo} is absent", file=sys.stderr)
        return 0
    log_path = read_logs(a.locomo, a.out, a.conversations.split(","), a.per_category, a.pool)
    log = load_log(log_path)
    print(f"{log_path}: {len(log.reads)} reads over {len(log.writes)} writes")
    if a.check_fpa:
        from derivaudit.readpath.fpa import served_by_fpa

        same = sum([w.write_id for w in v] == list(r.retrieved[:a.k])
                   for r, v in zip(log.reads, served_by_fpa(log, k=a.k).values(), strict=True))
        print(f"FPA serves the logged budget on {same} of {len(log.reads)} reads")
    if a.build_only:
        return 0
    from derivaudit.models import ModelPool, ModelSpec
    from derivaudit.readpath.answers import OVERLAP_METHODS, answer_metrics, replay_answers

    spec = ModelSpec(*a.model.split(":", 1)) if a.model else ModelSpec()
    t0 = time.perf_counter()
    with ModelPool() as pool:
        be = pool.get(spec)
        res = replay_answers(log, be, be, k=a.k, methods=OVERLAP_METHODS)
    res["settings"]["model"] = str(spec)
    res["settings"]["wall_s"] = time.perf_counter() - t0
    out = a.out / f"answers_{log_path.stem}.json"
    out.write_bytes(orjson.dumps(res, option=orjson.OPT_INDENT_2))
    for name, v in answer_metrics("overlap", res).items():
        print(f"{name:40s} {v}")
    print(f"cost: {res['cost']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
