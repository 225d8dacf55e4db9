"""Time and peak memory of `validate` and `views` on a large synthetic log: the on-disk path the
commands use (`spill.SpilledLog`, one conversation in memory at a time) against the in-memory
loader (`io.check_log` / `load_log`) as the baseline, each in its own child process, same run.

Usage:
    python benchmarks/bench_scale.py                      # 100,000 turns (~35 MB)
    python benchmarks/bench_scale.py --turns 580000       # ~206 MB: 1,450 conversations, 58,000 writes
    python benchmarks/bench_scale.py --turns 580000 --only spilled   # skip the (slow, large) baseline

Prints seconds and peak RSS per job and the ratios spilled / in-memory. Memory of the spilled path
should stay flat as --turns grows (it grows by one small entry per write), the baseline's with
the file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["the", "a", "cat", "dog", "moved", "to", "Porto", "in", "May", "river", "tiles",
         "pottery", "class", "glazing", "sister", "Lisbon", "October", "visit", "work", "painted",
         "kitchen"]

JOBS = {
    ("validate", "in-memory"): "from derivaudit.log.io import check_log; check_log({paths})",
    ("validate", "spilled"): ("from derivaudit.log.spill import SpilledLog; "
                                 "SpilledLog({paths}, keep_text=False).close()"),
    ("views", "in-memory"): "from derivaudit import build_views, load_log\n"
                            "for v in build_views(load_log({paths})): v.to_dict()",
    ("views", "spilled"): "from derivaudit import build_views\nfrom derivaudit.log.spill import SpilledLog\n"
                          "with SpilledLog({paths}) as s:\n    for v in build_views(s): v.to_dict()",
}


def generate(path: Path, n_turns: int, per: int = 400, seed: int = 0) -> None:
    """Conversations of `per` turns, 30 random words each, a write every 10 turns citing two."""
    rng = random.Random(seed)
    with path.open("w") as f:
        f.write(json.dumps({"type": "header", "schema_version": 1, "producer": "bench_scale"}) + "\n")
        for c in range(max(1, n_turns // per)):
            cid = f"conv-{c}"
            for t in range(per):
                f.write(json.dumps({"type": "turn", "conversation_id": cid, "turn_id": f"t{t}", "order": t,
                                    "speaker": "Ana" if t % 2 else "Assistant",
                                    "text": " ".join(rng.choice(WORDS) for _ in range(30)),
                                    "time": "2025-03-01T10:00:00Z", "session": str(t // 40)}) + "\n")
                if t % 10 == 9:
                    f.write(json.dumps({"type": "write", "write_id": f"{cid}-w{t}", "conversation_id": cid,
                                        "text": " ".join(rng.choice(WORDS) for _ in range(12)),
                                        "citations": [f"t{t - 1}", f"t{t}"], "last_seen_turn": f"t{t}",
                                        "operation": "add", "round": 0}) + "\n")


def run(code: str) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of `code` in a fresh interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"job failed ({status}): {code}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--only", choices=("spilled", "in-memory"), default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        generate(log, args.turns)
        print(f"log: {args.turns:,} turns, {args.turns // 10:,} writes, {log.stat().st_size / 1e6:.0f} MB")
        got: dict[tuple[str, str], tuple[float, float]] = {}
        for (command, path), code in JOBS.items():
            if args.only and path != args.only:
                continue
            got[command, path] = run(code.format(paths=repr([str(log)])))
            s, mb = got[command, path]
            print(f"{command:9} {path:10} {s:8.1f} s {mb:8.0f} MB peak")
        for command in ("validate", "views"):
            if (command, "in-memory") in got and (command, "spilled") in got:
                (s0, m0), (s1, m1) = got[command, "in-memory"], got[command, "spilled"]
                print(f"{command:9} spilled / in-memory: time {s1 / s0:.2f}x, peak memory {m1 / m0:.2f}x")


if __name__ == "__main__":
    main()
