"""Verdict throughput on the embedded model: naive generate-and-parse vs batched log-odds vs
batched log-odds with the shared evidence prefix computed once.

Usage: python benchmarks/bench_scoring.py [--memories 50] [--locomo PATH]
For each memory (LoCoMo writes, expanded view): 7 prompts that share one evidence block and end
with the view-specific question (the seven App. J view questions, with the record as its own
single claim). Prints judgments/s for (a) a naive loop of one generate() call per prompt that
samples a word and parses it, (b) batched log-odds scoring, (c) (b) plus prefix reuse; the ratios
b/a and c/a, tokens computed in (c) vs (b), how far (c) is from the unique-token limit, and peak
memory. All three run in this process on the same prompts.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from derivaudit import build_views, load_log
from derivaudit.importers import run_import
from derivaudit.models.base import Prompt
from derivaudit.models.hf import TransformersBackend
from derivaudit.views import evidence_block

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


def prompts_for(views) -> list[Prompt]:
    out = []
    for v in views:
        shared = evidence_block(v.write.text, v.expanded)
        out += [Prompt(shared, t.replace("$record", v.write.text)) for t in TASKS]
    return out


def naive(be: TransformersBackend, prompts: list[Prompt]) -> list[str | None]:
    words = []
    for p in prompts:
        text = be.generate([p], max_new_tokens=3)[0].strip().lower()
        words.append("yes" if text.startswith("yes") else "no" if text.startswith("no") else None)
    return words


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=50)
    ap.add_argument("--locomo", type=Path, default=DEFAULT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run_import("locomo", args.locomo, Path(d) / "l.jsonl")
        log = load_log(Path(d) / "l.jsonl")
    views = list(build_views(log))
    step = max(1, len(views) // args.memories)
    chosen = views[::step][: args.memories]
    prompts = prompts_for(chosen)
    be = TransformersBackend("smollm2")
    be.score(prompts[:2])  # load weights and warm up outside the timings
    n = len(prompts)

    t0 = time.perf_counter()
    words = naive(be, prompts)
    ta = time.perf_counter() - t0

    be.prefix_reuse = False
    c0 = be.usage.computed_tokens
    t0 = time.perf_counter()
    sb = be.score(prompts)
    tb = time.perf_counter() - t0
    comp_b = be.usage.computed_tokens - c0

    be.prefix_reuse = True
    c0 = be.usage.computed_tokens
    t0 = time.perf_counter()
    sc = be.score(prompts)
    tc = time.perf_counter() - t0
    comp_c = be.usage.computed_tokens - c0

    diff = max(abs(x.logodds - y.logodds) for x, y in zip(sb, sc, strict=True) if x.ok and y.ok)
    agree = sum((w == "yes") == (s.logodds is not None and s.logodds > 0) for w, s in zip(words, sc, strict=True)
                if w is not None)
    parsed = sum(w is not None for w in words)
    print(f"{len(chosen)} memories x {len(TASKS)} views = {n} prompts, "
          f"mean {comp_b / n:.0f} tokens/prompt, shared prefix mean {(comp_b - comp_c) / (n - len(chosen)):.0f}")
    print(f"(a) naive generate+parse: {n / ta:6.2f} judgments/s  ({ta:.1f}s; {parsed}/{n} parsed as yes/no)")
    print(f"(b) batched log-odds:     {n / tb:6.2f} judgments/s  ({tb:.1f}s)")
    print(f"(c) + prefix reuse:       {n / tc:6.2f} judgments/s  ({tc:.1f}s)")
    print(f"ratio b/a = {ta / tb:.2f}, c/a = {ta / tc:.2f}, c/b = {tb / tc:.2f}")
    print(f"tokens computed (c)/(b) = {comp_c}/{comp_b} = {comp_c / comp_b:.1%}; unique-token limit for c/b = "
          f"{comp_b / comp_c:.2f}x, reached {tb / tc:.2f}x ({(tb / tc) / (comp_b / comp_c):.0%} of it)")
    print(f"max |(b)-(c)| log-odds = {diff:.2e}; sampled word agrees with argmax on {agree}/{parsed}")
    print(f"errors: {sum(not s.ok for s in sc)}, bounded: {sum(s.bounded for s in sc)}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
