"""Verdict throughput and agreement of scoring engines on the same prompts.

Usage:
    python benchmarks/bench_scoring.py --model qwen2.5-coder-1.5b \
        --engine transformers:float32 --engine transformers:bfloat16 --engine llamacpp
    python benchmarks/bench_scoring.py --model smollm2 --engine transformers:float32 --engine llamacpp

Two prompt sets from LoCoMo (../shared, or --locomo PATH), identical for every engine:
- throughput: for each of --memories writes, the seven App. J view questions over its expanded
  evidence (one shared evidence block per write), scored with prefix reuse;
- agreement: --pairs licensed citation pairs (a write with its own cited turns) and as many
  unlicensed ones (the write with the cited turns of another write of the same conversation),
  holistic question; AUC of each engine's log-odds, and max / mean |log-odds - baseline's|.
Each engine runs in its own child process (so peak RSS is its own); the first engine is the
baseline the ratios are taken against.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo10.json"
A = "Answer with one word, yes or no."
TASKS = [
    "Is the record as a whole licensed by this evidence? A record is licensed only if every claim it makes, "
    f"and every relation it asserts between claims, is supported. {A}",
    "Is this claim licensed by the evidence? Judge only this claim, not the rest of the record.\n"
    f"Claim: $record\n{A}",
    "Claims listed: $record\nAssume each listed claim is licensed. Is everything the record asserts beyond "
    f"the listed claims licensed by the evidence? {A}",
    "The record's structure: claims it makes: $record; plus whatever the record asserts to connect, modify or "
    "bind them. Evidence that supports the claims separately does not by itself license a relation drawn "
    f"between them. Is the record licensed by the evidence? {A}",
    "The record, written out as the claims it makes and the links it draws between them:\n- $record\n"
    f"Every line above must be licensed for the record to be licensed. Is the record licensed? {A}",
    "The record asserts, at minimum, each of these obligations:\n1. $record\nConsidering every obligation "
    f"against the evidence together: is the record licensed by the evidence? {A}",
    f"Question: according to the evidence, is it true that $record {A}",
]


def prompt_sets(locomo: Path, memories: int, pairs: int, seed: int = 0):
    from derivaudit import build_views, load_log
    from derivaudit.admission.views import evidence_block
    from derivaudit.importers import run_import
    from derivaudit.models.base import Prompt

    with tempfile.TemporaryDirectory() as d:
        run_import("locomo", locomo, Path(d) / "l.jsonl")
        log = load_log(Path(d) / "l.jsonl")
    views = [v for v in build_views(log) if v.citation_only]
    step = max(1, len(views) // memories)
    through = []
    for v in views[::step][:memories]:
        shared = evidence_block(v.write.text, v.expanded)
        through += [Prompt(shared, t.replace("$record", v.write.text)) for t in TASKS]
    rng = random.Random(seed)
    chosen = rng.sample(views, min(pairs, len(views)))
    by_conv: dict[str, list] = {}
    for v in views:
        by_conv.setdefault(v.write.conversation_id, []).append(v)
    pos, neg = [], []
    for v in chosen:
        cited = {t.turn_id for t in v.citation_only}
        others = [o for o in by_conv[v.write.conversation_id] if not cited & {t.turn_id for t in o.citation_only}]
        o = rng.choice(others)
        pos.append(Prompt(evidence_block(v.write.text, v.citation_only), TASKS[0]))
        neg.append(Prompt(evidence_block(v.write.text, o.citation_only), TASKS[0]))
    return through, pos + neg, len(pos)


def child(args: argparse.Namespace) -> None:
    """Run one engine and print a JSON line."""
    from derivaudit.models import load_backend

    backend, _, dtype = args.child.partition(":")
    opts = {"dtype": dtype} if dtype else {}
    through, pairs, n_pos = prompt_sets(args.locomo, args.memories, args.pairs)
    t0 = time.perf_counter()
    be = load_backend(backend, args.model, cache=False, **opts)
    be.score(through[:1])  # weights loaded and warm
    load_s = time.perf_counter() - t0
    c0, p0 = be.usage.computed_tokens, be.usage.prompt_tokens
    t0 = time.perf_counter()
    st = be.score(through)
    ts = time.perf_counter() - t0
    comp, tok = be.usage.computed_tokens - c0, be.usage.prompt_tokens - p0
    t0 = time.perf_counter()
    sp = be.score(pairs)
    tp = time.perf_counter() - t0
    print(json.dumps({
        "engine": args.child, "identity": be.identity(), "load_s": load_s,
        "through_s": ts, "through_n": len(through), "computed": comp, "prompt_tokens": tok,
        "pairs_s": tp, "pairs_n": len(pairs), "n_pos": n_pos,
        "through_scores": [s.logodds for s in st], "pair_scores": [s.logodds for s in sp],
        "errors": sum(not s.ok for s in st + sp),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


def main() -> None:
    from derivaudit.rates.stats import auc

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--engine", action="append", help="backend[:dtype], e.g. transformers:float32 (repeatable; "
                    "the first is the baseline)")
    ap.add_argument("--memories", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--locomo", type=Path, default=DEFAULT)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if not args.locomo.exists():
        sys.exit(f"LoCoMo not found at {args.locomo} (pass --locomo)")
    engines = args.engine or ["transformers:float32", "llamacpp"]
    results = []
    for e in engines:
        cmd = [sys.executable, __file__, "--child", e, "--model", args.model, "--memories", str(args.memories),
               "--pairs", str(args.pairs), "--locomo", str(args.locomo)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{e}: failed\n{r.stderr[-2000:]}")
            continue
        results.append(json.loads(r.stdout.strip().splitlines()[-1]))
    if not results:
        return
    base = results[0]
    print(f"model {args.model}; throughput: {base['through_n']} prompts ({args.memories} writes x {len(TASKS)} views, "
          f"shared evidence prefix); agreement: {base['n_pos']} licensed + {base['pairs_n'] - base['n_pos']} "
          f"unlicensed citation pairs; baseline = {base['engine']}")
    head = (f"{'engine':24} {'judg/s':>7} {'x base':>7} {'tokens computed':>16} {'pairs/s':>8} {'AUC':>6} "
            f"{'max|d|':>7} {'mean|d|':>8} {'err':>4} {'peak RSS':>9} {'load s':>7}")
    print(head)
    for r in results:
        n = r["n_pos"]
        ps = r["pair_scores"]
        a = auc([x for x in ps[:n] if x is not None], [x for x in ps[n:] if x is not None])
        d = [abs(x - y) for x, y in zip(r["through_scores"] + ps, base["through_scores"] + base["pair_scores"],
                                         strict=True) if x is not None and y is not None]
        jps = r["through_n"] / r["through_s"]
        print(f"{r['engine']:24} {jps:7.2f} {jps / (base['through_n'] / base['through_s']):6.2f}x "
              f"{r['computed']:>7}/{r['prompt_tokens']:<8} {r['pairs_n'] / r['pairs_s']:8.2f} "
              f"{'-' if a is None else f'{a:.3f}':>6} {max(d):7.3f} {sum(d) / len(d):8.3f} {r['errors']:>4} "
              f"{r['peak_rss_mib']:7.0f}Mi {r['load_s']:7.1f}")


if __name__ == "__main__":
    main()
