"""What does re-auditing a store that grew cost? A LoCoMo conversation's first `--first` writes
(with the turns up to the last one's write point) are scanned into a run folder; then the same log
with `--more` writes appended (and the turns up to their write point) is scanned into that folder
again. The second scan should judge only the new writes (derivaudit/audit/incremental.py) and keep the
old writes' labels.

Measured, each in its own DERIVAUDIT_HOME (fresh result cache, so "cold" means cold):

    first           the first log into an empty folder, result cache empty (it fills it)
    second, warm    the grown log into that folder, result cache warm
    second, cold    the grown log into a copy of the first run, --no-cache (the run folder alone)
    full, warm      (--full) the grown log into a fresh folder, with the cache the scans above filled:
                    what the result cache alone saves when CI carries it; its calibration is new work
                    (the grown log gives other calibration items), so it costs nearly a first scan

For each: wall seconds (the whole command: start, model load, scan), the scan's own seconds
(scope.json), prompts scored and tokens computed (meta.json usage), writes reused; and whether the
old writes' labels are identical to the first scan's.

    python benchmarks/bench_incremental.py [--model qwen2.5-coder-1.5b --backend llamacpp]
        [--conversation conv-26 --first 24 --more 3] [--full] [--out /tmp/bench-incremental]

Needs ../shared/datasets/locomo/locomo10.json. On the embedded model about 40 minutes on 2 cores
(the first scan is nearly all of it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from derivaudit.importers.locomo import convert  # noqa: E402
from derivaudit.log.io import write_jsonl  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"


def logs(conversation: str, first: int, more: int, out: Path) -> tuple[Path, Path]:
    """The first `first` writes of the conversation with the turns up to the last one's point, and
    the same grown by `more` writes (and the turns up to their point): an append-only growth."""
    res = convert(LOCOMO)
    turns = [t for t in res.turns if t["conversation_id"] == conversation]
    writes = [w for w in res.writes if w["conversation_id"] == conversation]
    order = {t["turn_id"]: i for i, t in enumerate(turns)}
    paths = []
    for n, name in ((first, "first.jsonl"), (first + more, "grown.jsonl")):
        ws = writes[:n]
        upto = max(order[w["last_seen_turn"]] for w in ws)
        p = out / name
        write_jsonl(p, [*turns[: upto + 1], *ws])
        paths.append(p)
    return paths[0], paths[1]


def scan(log: Path, run: Path, home: Path, model: list[str], *extra: str) -> dict:
    env = {**os.environ, "DERIVAUDIT_HOME": str(home)}
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "derivaudit", "scan", str(log), "-o", str(run), "--format", "json",
                        *model, *extra], env=env, capture_output=True, text=True)
    seconds = time.time() - t0
    if r.returncode != 0:
        sys.exit(f"scan {log} -> {run} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    meta = json.loads((run / "meta.json").read_text())
    usage = meta.get("usage", [])
    labels = {row["write_id"]: (row["citation_label"], row["expanded_label"])
              for row in map(json.loads, (run / "labels.jsonl").read_text().splitlines())}
    scan_s = json.loads((run / "scope.json").read_text())["run"]["seconds"]
    return {"seconds": seconds, "scan_seconds": scan_s, "prompts": sum(u.get("prompts", 0) for u in usage),
            "tokens": sum(u.get("computed_tokens", 0) for u in usage), "reused": meta.get("reused", {}),
            "labels": labels, "writes": meta["selection"]["writes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--first", type=int, default=24)
    ap.add_argument("--more", type=int, default=3)
    ap.add_argument("--model", default=None, help="default: derivaudit's default model")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-incremental"))
    ap.add_argument("--full", action="store_true", help="also the grown log into a fresh folder, cache warm")
    a = ap.parse_args()
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo not found at {LOCOMO}")
    model = [*(["--model", a.model] if a.model else []), *(["--backend", a.backend] if a.backend else [])]
    shutil.rmtree(a.out, ignore_errors=True)
    a.out.mkdir(parents=True)
    first, grown = logs(a.conversation, a.first, a.more, a.out)
    home, cold_home = a.out / "home", a.out / "home-cold"
    rows = {}
    rows["first"] = scan(first, a.out / "run", home, model)
    shutil.copytree(a.out / "run", a.out / "run-cold")
    rows["second, warm"] = scan(grown, a.out / "run", home, model)
    rows["second, cold"] = scan(grown, a.out / "run-cold", cold_home, model, "--no-cache")
    if a.full:
        rows["full, warm"] = scan(grown, a.out / "run-full", home, model)
    base = rows["first"]
    old = base["labels"]
    print(f"{a.conversation}: first {a.first} writes, then {a.more} more; model {a.model or 'default'}\n")
    print("| scan | writes | reused | wall s | scan s | prompts scored | tokens computed | vs first (scan s) | "
          "vs first (tokens) | old labels identical |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        same = all(r["labels"].get(w) == lab for w, lab in old.items())
        print(f"| {name} | {r['writes']} | {r['reused'].get('primitives', 0)} | {r['seconds']:.0f} | "
              f"{r['scan_seconds']:.0f} | {r['prompts']} | {r['tokens']} | "
              f"{r['scan_seconds'] / base['scan_seconds']:.2f} | {r['tokens'] / max(1, base['tokens']):.2f} | "
              f"{'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
