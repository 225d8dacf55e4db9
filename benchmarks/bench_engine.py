"""Raw speed of llama.cpp builds on the embedded model: prompt tokens/s for a 600-token block and
for 70- and 20-token suffixes after it (the sizes a scan evaluates: an evidence block, then
questions), and decoding tokens/s. Each build runs in its own child process, the builds
alternating for --reps rounds (the machine's speed drifts between runs), and every figure is
printed with its ratio to the first build's median.

Usage: python benchmarks/bench_engine.py [--build installed] [--build avx2=/path/to/site-packages]...
                                         [--reps 2] [--threads 2] [--model qwen2.5-coder-1.5b]
A build is `NAME=DIR`, DIR a folder holding another `llama_cpp` package (e.g. `pip install --target
DIR --no-deps llama_cpp_python-….whl`), or `installed` for the one in this environment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (600, 70, 20)


def child(model: str, threads: int) -> None:
    import contextlib
    import time

    sys.path.insert(0, str(ROOT))
    import llama_cpp

    from derivaudit.models.embedded import resolve_gguf

    path = resolve_gguf(model)[0]
    with open(os.devnull, "w") as dn, contextlib.redirect_stderr(dn):
        llm = llama_cpp.Llama(str(path), n_ctx=4096, n_batch=512, n_ubatch=512, n_threads=threads,
                              n_threads_batch=threads, verbose=False)
    toks = llm.tokenize(("The quick brown fox jumps over the lazy dog. " * 200).encode())[:1024]
    out = {}
    for n in SIZES:
        reps = max(1, 1200 // n)
        if n == SIZES[0]:
            t = time.perf_counter()
            for _ in range(reps):
                llm.n_tokens = 0
                llm.eval(toks[:n])
        else:
            llm.n_tokens = 0
            llm.eval(toks[:600])
            t = time.perf_counter()
            for _ in range(reps):
                llm.n_tokens = 600
                llm.eval(toks[600:600 + n])
        out[f"{n} tokens"] = reps * n / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(20):
        llm.eval([toks[i]])
    out["decoding"] = 20 / (time.perf_counter() - t)
    out["system"] = llama_cpp.llama_cpp.llama_print_system_info().decode().strip()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append", help="NAME=DIR or installed (repeatable; the first is the baseline)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.model, args.threads)
    builds = [(b.partition("=")[0], b.partition("=")[2] or None) for b in (args.build or ["installed"])]
    results: dict[str, list[dict]] = {name: [] for name, _ in builds}
    for _ in range(args.reps):
        for name, site in builds:
            env = dict(os.environ)
            if site:
                env["PYTHONPATH"] = os.pathsep.join([site, str(ROOT), env.get("PYTHONPATH", "")])
            cmd = [sys.executable, __file__, "--child", "--model", args.model, "--threads", str(args.threads)]
            res = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            results[name].append(json.loads(res.strip().splitlines()[-1]))
    keys = [f"{n} tokens" for n in SIZES] + ["decoding"]

    def median(name: str, k: str) -> float:
        xs = sorted(r[k] for r in results[name])
        return xs[len(xs) // 2]

    base = builds[0][0]
    print(f"{args.model}, {args.threads} threads, {args.reps} rounds; tokens/s (median) and x {base}")
    print(f"{'build':<12}" + "".join(f"{k:>22}" for k in keys))
    for name, _ in builds:
        print(f"{name:<12}" + "".join(f"{median(name, k):>12.1f} ({median(name, k) / median(base, k):4.2f}x)  "
                                      for k in keys))
    for name, _ in builds:
        print(f"{name}: {results[name][0]['system']}")


if __name__ == "__main__":
    main()
