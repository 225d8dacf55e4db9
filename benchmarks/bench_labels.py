"""Label accuracy against gold on the two gold sets, for each model given.

Usage:
    python benchmarks/bench_labels.py                                   # the default model
    python benchmarks/bench_labels.py --model transformers:smollm2 --model llamacpp:qwen2.5-coder-1.5b
    python benchmarks/bench_labels.py --set fixtures --limit 8

Gold sets:
- fixtures: fixtures/memories.jsonl (24 hand-written writes, 3 conversations);
- locomo: fixtures/locomo_dev.jsonl (144 hand-written writes, 36 per category: 48 on LoCoMo conv-26 and
  conv-43, 24 on conv-42 and conv-44, 24 on conv-47 and conv-48 (the earlier final set, scored once
  before it joined), 24 on conv-49, 24 on conv-50 (the second final set, read before a rule was
  written, so development data since)), joined with the turns of
  `derivaudit import locomo ../shared/datasets/locomo/locomo10.json`
  (skipped when ../shared is absent; LoCoMo's own text is never stored in the repository);
- final (`--set final` only): fixtures/locomo_final.jsonl (24 writes on conv-48's sessions 4-5, which
  no dev write cites, 6 per category),
  written by reading the turns before any model saw them; scored once, at the end of a change,
  never tuned on.
Each (model, set) is scanned into its own run folder under --out (resumable; the result cache makes
reruns cheap) and reported: 4-way accuracy, per-category recall, ambiguous share, kappa, the
majority-class baseline, and seconds per write (of that invocation; cached work is not re-timed).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit import load_log  # noqa: E402
from derivaudit.audit.gold import CATEGORIES  # noqa: E402
from derivaudit.audit.scan import ScanConfig, scan  # noqa: E402
from derivaudit.importers import run_import  # noqa: E402
from derivaudit.log.io import write_jsonl  # noqa: E402
from derivaudit.models import ModelRoles, ModelSpec, default_backend, default_model  # noqa: E402
from derivaudit.runs.folder import load_meta, read_jsonl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"


def locomo_dev_log(locomo: Path, work: Path, per_group: int | None = None, name: str = "locomo_dev",
                   conversations: set[str] | None = None) -> Path | None:
    """The dev writes and operations (fixtures/NAME.jsonl) joined with their conversations' turns, written to `work`;
    with `per_group`, only the first that many writes of each (conversation, gold category)."""
    if not locomo.exists():
        return None
    dev = ROOT / "fixtures" / f"{name}.jsonl"
    import orjson

    writes = [orjson.loads(x) for x in dev.read_bytes().splitlines() if x.strip()]
    if conversations:
        writes = [w for w in writes if w.get("type") != "write" or w["conversation_id"] in conversations]
    if per_group:
        seen: dict[tuple[str, str], int] = {}
        keep = []
        for w in writes:
            g = (w.get("conversation_id"), (w.get("meta") or {}).get("gold"))
            seen[g] = seen.get(g, 0) + 1
            if w.get("type") != "write" or seen[g] <= per_group:
                keep.append(w)
        writes = keep
    convs = {w["conversation_id"] for w in writes if w.get("type") == "write"}
    full = work / "locomo.jsonl"
    if not full.exists():
        run_import("locomo", locomo, full)
    turns = [r for r in (orjson.loads(x) for x in full.read_bytes().splitlines() if x.strip())
             if r.get("type") == "turn" and r["conversation_id"] in convs]
    tag = "_".join(sorted(conversations)) + "_" if conversations else ""
    out = work / (f"{name}_{tag}{per_group}_per_group.jsonl" if per_group else f"{name}_{tag}joined.jsonl")
    write_jsonl(out, [*turns, *(w for w in writes if w.get("type") in ("write", "operation"))])
    return out


def parse_model(text: str) -> ModelSpec:
    backend, sep, model = text.partition(":")
    return ModelSpec(backend, model) if sep else ModelSpec(default_backend(), text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", help="BACKEND:MODEL or MODEL (repeatable; default: the default model)")
    ap.add_argument("--set", choices=("fixtures", "locomo", "both", "final"), default="both",
                    help="final: fixtures/locomo_final.jsonl, the part scored once, at the end of a change")
    ap.add_argument("--limit", type=int, default=None, help="only the first N writes of each set")
    ap.add_argument("--out", type=Path, default=None, help="run folders go here (default: a temporary folder)")
    ap.add_argument("--per-group", type=int, default=None,
                    help="LoCoMo set: only the first N writes per (conversation, gold category)")
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    ap.add_argument("--conversations", default=None, help="LoCoMo sets: only these conversations (comma-separated)")
    ap.add_argument("--calibrate-on", default="log",
                    help="log (default: the log's own turns), packaged (the packaged corpus) or a memory-log path")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_labels."))
    out.mkdir(parents=True, exist_ok=True)
    sets = {}
    if args.set in ("fixtures", "both"):
        sets["fixtures"] = ROOT / "fixtures" / "memories.jsonl"
    if args.set in ("locomo", "both"):
        convs = set(args.conversations.split(",")) if args.conversations else None
        p = locomo_dev_log(args.locomo, out, args.per_group, conversations=convs)
        if p is None:
            print(f"LoCoMo not found at {args.locomo}: the locomo set is skipped")
        else:
            sets["locomo"] = p
    if args.set == "final":
        p = locomo_dev_log(args.locomo, out, args.per_group, name="locomo_final")
        if p is not None:
            sets["final"] = p
    specs = [parse_model(m) for m in args.model] if args.model else [ModelSpec(default_backend(), default_model())]
    rows = []
    for spec in specs:
        for name, path in sets.items():
            log = load_log(path)
            run = out / f"{name}-{spec.backend}-{Path(spec.model).name}-{Path(args.calibrate_on).stem}"
            cfg = ScanConfig(limit=args.limit, models=ModelRoles(spec), files=[str(path)],
                             calibrate_on=args.calibrate_on)
            t0 = time.perf_counter()
            rep = scan(log, run, cfg=cfg, input_files=[path],
                       progress=lambda stage, adv, total: None)
            secs = time.perf_counter() - t0
            g = rep.get("gold") or {}
            n = len(read_jsonl(run / "labels.jsonl"))
            cal = (load_meta(run).get("timings") or {}).get("calibration", 0.0)
            rows.append((str(spec), name, n, g, secs / max(1, n)))
            print(f"done {spec} {name}: {n} writes, {secs:.0f} s ({secs / max(1, n):.1f} s/write), of which "
                  f"calibration {cal:.0f} s (calibrate-on {args.calibrate_on}); without it "
                  f"{(secs - cal) / max(1, n):.1f} s/write", file=sys.stderr)
    print(f"{'model':34} {'set':9} {'n':>3} {'acc':>6} {'base':>6} {'ambig':>6} {'kappa':>6} "
          + " ".join(f"{c[:11]:>11}" for c in CATEGORIES) + f" {'s/write':>8}")
    for model, name, n, g, spw in rows:
        if not g:
            print(f"{model:34} {name:9} {n:3d}  (no gold)")
            continue
        k = "-" if g["kappa"] is None else f"{g['kappa']:.2f}"
        rec = " ".join(f"{'-' if g['recall'][c] is None else format(g['recall'][c], '.2f'):>11}" for c in CATEGORIES)
        fs = g.get("false_supported") or {}
        print(f"{model:34} {name:9} {g['n']:3d} {g['accuracy']:6.2f} {g['baseline']['accuracy']:6.2f} "
              f"{g['ambiguous']:6.2f} {k:>6} {rec} {spw:8.1f}  false-supported {fs.get('count')}/{fs.get('n')}")
        for conv, v in (g.get("per_conversation") or {}).items():
            print(f"    {conv:30} {v['correct']:3d}/{v['n']:<3d} {v['accuracy']:.2f}")
    print(f"run folders: {out}")


if __name__ == "__main__":
    main()
