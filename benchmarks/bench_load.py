"""A scan's model work beside other work: prompts scored per minute on the embedded model, quiet and
with busy processes (`yes > /dev/null`) beside it, for several thread settings, as ratios against
the quiet run of the default setting, all in one process run.

Usage: python benchmarks/bench_load.py [--threads 2,1,auto] [--busy 1] [--reps 2] [--writes 2]
                                       [--model qwen2.5-coder-1.5b] [--wait-policies default,passive]

--wait-policies runs the whole comparison once per OpenMP wait policy (llama.cpp's threads wait
at every barrier: ACTIVE spins, PASSIVE sleeps; "default" leaves OMP_WAIT_POLICY as it is), each
in a child process (the policy is read when the library loads), with every ratio against the
quiet run of the first policy's first thread setting.

The workload is what `scan` asks of the judge for the first --writes writes of the fixture log:
the E and R questions of every obligation in the expanded view, over the passages and over null
passages (a fixed list of prompts, decomposed once up front). Every measurement loads a fresh
backend with no result cache and no saved prefix states, so each computes the same tokens.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit import build_views, load_log  # noqa: E402
from derivaudit.audit import annotate as ann  # noqa: E402
from derivaudit.models import load_backend  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "memories.jsonl"


def workload(model: str, writes: int) -> list:
    log = load_log(FIXTURES)
    chosen = log.writes[:writes]
    be = load_backend("llamacpp", model, cache=False)
    decs = ann.decompose(be, chosen)
    views = {v.write.write_id: v for v in build_views(log, write_ids={w.write_id for w in chosen})}
    prompts = []
    for w, d in zip(chosen, decs, strict=True):
        passages = views[w.write_id].expanded
        for o in d.obligations:
            it = ann.Item(o, w, "expanded", passages)
            for which in ("e", "r"):
                task = ann.ask(ann.question(which, "a"), obligation=o.text)
                prompts += [ann._prompt(it.shared, task), ann._prompt(it.null_shared, task)]
    return prompts


def measure(model: str, threads: str, prompts: list, busy: int) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) to score `prompts` on a fresh backend."""
    opts = {} if threads == "auto" else {"n_threads": int(threads)}
    be = load_backend("llamacpp", model, cache=False, **opts)
    be.score(prompts[:1])  # load the weights outside the clock
    be._states.clear()
    be.llm.n_tokens = 0
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(busy)]  # killed below, itself
    try:
        time.sleep(0.5 if busy else 0)
        c0, t0 = os.times(), time.perf_counter()
        be.score(prompts)
        t1, c1 = time.perf_counter(), os.times()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return t1 - t0, (c1.user - c0.user) + (c1.system - c0.system)


def run_policies(args: argparse.Namespace) -> None:
    import json

    rows = []
    for policy in args.wait_policies.split(","):
        env = dict(os.environ)
        if policy != "default":
            env["OMP_WAIT_POLICY"] = policy.upper()
        cmd = [sys.executable, __file__, "--threads", args.threads, "--busy", str(args.busy), "--reps", str(args.reps),
               "--writes", str(args.writes), "--model", args.model, "--json"]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        rows += [{**r, "policy": policy} for r in json.loads(out.strip().splitlines()[-1])]
    base = rows[0]["s"]
    print(f"{'policy':>8} {'threads':>8} {'load':>5} {'s (median)':>11} {'CPU s':>7} {'vs first quiet':>15} "
          f"{'loaded/quiet':>13}")
    for r in rows:
        quiet = next(q["s"] for q in rows if q["policy"] == r["policy"] and q["threads"] == r["threads"]
                     and q["busy"] == 0)
        print(f"{r['policy']:>8} {r['threads']:>8} {r['busy']:>5} {r['s']:>11.1f} {r['cpu']:>7.1f} "
              f"{base / r['s']:>14.2f}x {quiet / r['s']:>12.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="2,1,auto", help="thread settings to compare (the first is the baseline)")
    ap.add_argument("--busy", type=int, default=1, help="busy processes beside the loaded runs")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--writes", type=int, default=2)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--wait-policies", default=None, help="e.g. default,passive (one child process each)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.wait_policies:
        return run_policies(args)
    settings = args.threads.split(",")
    prompts = workload(args.model, args.writes)
    print(f"{len(prompts)} prompts; {os.cpu_count()} cores; {args.busy} busy process(es) beside the loaded runs",
          file=sys.stderr if args.json else sys.stdout)
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.reps):  # interleaved, so a drift of the machine hits every setting alike
        for th in settings:
            for busy in (0, args.busy):
                results.setdefault((th, busy), []).append(measure(args.model, th, prompts, busy))
    if args.json:
        import json

        print(json.dumps([{"threads": th, "busy": busy, "s": sorted(s for s, _ in runs)[len(runs) // 2],
                           "cpu": sorted(c for _, c in runs)[len(runs) // 2]} for (th, busy), runs in results.items()]))
        return
    base = sorted(s for s, _ in results[(settings[0], 0)])[len(results[(settings[0], 0)]) // 2]
    head = f"vs quiet {settings[0]}"
    print(f"{'threads':>8} {'load':>5} {'s (median)':>11} {'derivaudit/prompts/min':>12} {'CPU s':>7} {head:>14}")
    for (th, busy), runs in results.items():
        secs = sorted(s for s, _ in runs)[len(runs) // 2]
        cpu = sorted(c for _, c in runs)[len(runs) // 2]
        print(f"{th:>8} {busy:>5} {secs:>11.1f} {60 * len(prompts) / secs:>12.1f} {cpu:>7.1f} {base / secs:>13.2f}x")


if __name__ == "__main__":
    main()
