"""Does a write's decomposition depend on the writes decomposed beside it?

Greedy decoding is deterministic for one evaluation order, but a backend that reuses shared
prefixes (llama.cpp's saved states, the neighbour's shared tokens) evaluates the same prompt in
different pieces depending on what it was batched with, and float sums in another order can flip a
near-tie. This decomposes N gold writes once as one batch (as `scan` does) and once each from an
empty context, without the result cache, and prints how many first generations differ.

    python benchmarks/bench_determinism.py [--model BACKEND:MODEL] [--n 20] [--out rows.jsonl]

The embedded default on the 2-core development machine, --n 20, when llama.cpp's pieces followed
the batch: 8.5 s per write in the batch, 28 s alone (the instructions are evaluated again each
time); 11 of 20 differed. With the two pieces set by the prompt alone (shared block, then the
rest), --n 10: 7.2 s and 21.7 s; 0 of 10 differ.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from string import Template

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_labels import parse_model  # noqa: E402
from bench_parse_rules import gold_writes  # noqa: E402

from derivaudit import templates  # noqa: E402
from derivaudit.audit.decompose import ANSWER_PREFIX_DECOMPOSE, STOP_DECOMPOSE  # noqa: E402
from derivaudit.models import load_backend  # noqa: E402
from derivaudit.models.base import Prompt  # noqa: E402


def fresh(backend) -> None:
    """Forget every saved or shared prefix, so the next prompt is evaluated from its first token
    (llama.cpp; another backend's "alone" is one prompt per call)."""
    if hasattr(backend, "_states"):  # llama.cpp
        backend._states.clear()
        backend.llm.n_tokens = 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="BACKEND:MODEL or MODEL (default: the default model)")
    ap.add_argument("--n", type=int, default=20, help="gold writes, spread over all gold files (default: %(default)s)")
    ap.add_argument("--out", default=None, help="write each write's two generations here (JSONL)")
    args = ap.parse_args()
    spec = parse_model(args.model) if args.model else None
    backend = load_backend(spec.backend, spec.model, cache=False) if spec else load_backend(cache=False)
    writes = gold_writes()
    writes = writes[:: max(1, len(writes) // args.n)][: args.n]
    head, _, tail = templates.load("decompose").partition("$note")
    prompts = [Prompt(head, Template(tail).substitute(record=templates.quoted(templates.line(w.text))),
                      answer_prefix=ANSWER_PREFIX_DECOMPOSE) for _, w in writes]
    t0 = time.time()
    batch = backend.generate(prompts, max_new_tokens=96, stop=STOP_DECOMPOSE)
    t_batch = time.time() - t0
    t0 = time.time()
    alone = []
    for p in prompts:
        fresh(backend)
        alone.append(backend.generate([p], max_new_tokens=96, stop=STOP_DECOMPOSE)[0])
    t_alone = time.time() - t0
    differ = [i for i, (a, b) in enumerate(zip(alone, batch, strict=True)) if a != b]
    print(f"{len(prompts)} gold writes: batch {t_batch / len(prompts):.1f} s/write, alone {t_alone / len(prompts):.1f} "
          f"s/write; first generations differ for {len(differ)} ({len(differ) / len(prompts):.0%})")
    for i in differ:
        print(f"  {writes[i][0]}:{writes[i][1].write_id} {writes[i][1].text!r}")
    if args.out:
        with open(args.out, "wb") as f:
            for (name, w), a, b in zip(writes, alone, batch, strict=True):
                row = {"set": name, "write_id": w.write_id, "alone": a, "batch": b, "same": a == b}
                f.write(orjson.dumps(row) + b"\n")


if __name__ == "__main__":
    main()
