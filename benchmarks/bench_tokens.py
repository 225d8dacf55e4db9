"""Where a write's model work goes in `scan`: prompt tokens computed, tokens generated and seconds
per phase (decomposition, D, E/R over the passages and over null passages, subsets, the slot check,
adjudication),
for the first N writes of a conversation.

Usage: python benchmarks/bench_tokens.py [--writes 4] [--conversation conv-26] [--backend llamacpp]
                                         [--model qwen2.5-coder-1.5b] [--locomo PATH]
A fresh, empty result cache is used (as in a first scan: identical prompts in one call are computed
once, nothing is answered from earlier runs). Phases are told apart by wrapping the
annotate module's calls; the product is unchanged.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit import build_views, load_log  # noqa: E402
from derivaudit.audit import annotate as ann  # noqa: E402
from derivaudit.importers import run_import  # noqa: E402
from derivaudit.models import load_backend  # noqa: E402
from derivaudit.runs.folder import VIEW_NAMES  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo10.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=4)
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--backend", default="llamacpp")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--locomo", type=Path, default=DEFAULT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run_import("locomo", args.locomo, Path(d) / "l.jsonl")
        log = load_log(Path(d) / "l.jsonl")
    writes = [w for w in log.writes if w.conversation_id == args.conversation][: args.writes]
    views = {v.write.write_id: v for v in build_views(log, write_ids={w.write_id for w in writes})}
    cache_dir = tempfile.mkdtemp()
    be = load_backend(args.backend, args.model, cache=str(Path(cache_dir) / "cache.sqlite"))
    tally: dict[str, list[float]] = {}
    phase = ["other"]

    def wrap(name: str, fn):
        def inner(*a, **k):
            prev, phase[0] = phase[0], name
            c0, g0, t0 = be.usage.computed_tokens, be.usage.generated_tokens, time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                row = tally.setdefault(name, [0, 0, 0.0, 0])
                row[0] += be.usage.computed_tokens - c0
                row[1] += be.usage.generated_tokens - g0
                row[2] += time.perf_counter() - t0
                row[3] += 1
                phase[0] = prev
        return inner

    orig_score_all = ann.score_all

    nulls = {ann.passages_block(ann.null_passages(n)) for n in range(1, 200)}

    def score_all(reqs):
        if phase[0] in ("subsets", "slot check"):  # counted by their own wrappers
            return orig_score_all(reqs)
        kinds: dict[str, list] = {}
        for i, (_b, p) in enumerate(reqs):
            kind = "D" if not p.shared else "E/R over null passages" if p.shared in nulls else "E/R"
            kinds.setdefault(kind, []).append(i)
        out = [None] * len(reqs)
        for kind, ix in kinds.items():
            name = ("adjudication " if phase[0] == "adjudicate" else "") + kind
            res = wrap(name, orig_score_all)([reqs[i] for i in ix])
            for i, r in zip(ix, res, strict=True):
                out[i] = r
        return out

    ann.score_all = score_all
    ann._check_subsets = wrap("subsets", ann._check_subsets)
    ann._slot_checks = wrap("slot check", ann._slot_checks)
    adj = ann.adjudicate

    def adjudicate(*a, **k):
        prev, phase[0] = phase[0], "adjudicate"
        try:
            return adj(*a, **k)
        finally:
            phase[0] = prev

    ann.adjudicate = adjudicate
    a = ann.Annotator("A", be, "a")
    b = ann.Annotator("B", be, "b")
    j = ann.Annotator("adjudicator", be, "a")
    t0 = time.perf_counter()
    decs = wrap("decomposition", ann.decompose)(be, writes)
    items = [ann.Item(o, w, vn, getattr(views[w.write_id], vn)) for w, d in zip(writes, decs, strict=True)
             for vn in VIEW_NAMES for o in d.obligations]
    anns = ann.annotate(items, a, b, j)
    total = time.perf_counter() - t0
    n_obl = sum(len(d.obligations) for d in decs)
    print(f"{args.model} ({args.backend}), {len(writes)} writes of {args.conversation}, {n_obl} obligations, "
          f"{len(items)} obligation x view items, {sum(x.adjudicated is not None for x in anns)} adjudicated")
    print(f"{'phase':24} {'tokens computed':>16} {'generated':>10} {'seconds':>8} {'s/write':>8}")
    for name, (c, g, s, _) in sorted(tally.items(), key=lambda kv: -kv[1][2]):
        print(f"{name:24} {c:16d} {g:10d} {s:8.1f} {s / len(writes):8.1f}")
    print(f"{'total':24} {be.usage.computed_tokens:16d} {be.usage.generated_tokens:10d} {total:8.1f} "
          f"{total / len(writes):8.1f}")
    print(f"prompt tokens rendered {be.usage.prompt_tokens}, computed {be.usage.computed_tokens} "
          f"({be.usage.computed_tokens / max(1, be.usage.prompt_tokens):.0%}); peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
