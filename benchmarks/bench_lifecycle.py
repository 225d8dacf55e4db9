"""Lifecycle-audit quality and cost on a gold set: operation-label accuracy, unjustified
recall, ambiguous share and the confusion table against `meta.gold`, and the cost per operation
beside the cost per write of the same run (same process, same model).

    DERIVAUDIT_HOME=$(mktemp -d) python benchmarks/bench_lifecycle.py [--model M] [--log FILE | --set locomo]

Default: fixtures/lifecycle.jsonl on the embedded default model, cold cache when DERIVAUDIT_HOME is
fresh. `--set locomo`: fixtures/locomo_lifecycle.jsonl (hand-written writes and operations on LoCoMo
conv-49) joined with LoCoMo's turns (skipped when ../shared is absent).
Targets: accuracy >= 0.75, unjustified recall >= 0.80, ambiguous <= 15%.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_labels import LOCOMO, locomo_dev_log, parse_model  # noqa: E402

from derivaudit import load_log  # noqa: E402
from derivaudit.audit.scan import ScanConfig, scan  # noqa: E402
from derivaudit.models import ModelRoles, ModelSpec, default_backend, default_model  # noqa: E402
from derivaudit.report.lifecycle import OPERATION_LABELS as LABELS  # noqa: E402
from derivaudit.runs.folder import load_meta, read_jsonl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="BACKEND:MODEL or MODEL (default: the default model)")
    ap.add_argument("--log", type=Path, default=ROOT / "fixtures" / "lifecycle.jsonl")
    ap.add_argument("--set", choices=("fixtures", "locomo"), default="fixtures")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    spec = parse_model(args.model) if args.model else ModelSpec(default_backend(), default_model())
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_lifecycle."))
    out.mkdir(parents=True, exist_ok=True)
    if args.set == "locomo":
        args.log = locomo_dev_log(LOCOMO, out, name="locomo_lifecycle")
        if args.log is None:
            print(f"LoCoMo not found at {LOCOMO}: nothing to do")
            return
    run = out / "run"
    t0 = time.perf_counter()
    rep = scan(load_log(args.log), run, cfg=ScanConfig(models=ModelRoles(spec), files=[str(args.log)]),
               input_files=[args.log])
    secs = time.perf_counter() - t0
    t = load_meta(run).get("timings", {})
    rows = read_jsonl(run / "lifecycle.jsonl")
    n_w, n_o = len(read_jsonl(run / "labels.jsonl")), len(rows)
    life = t.get("lifecycle", 0.0)
    print(f"model {spec}  log {args.log.name}  run {run}")
    print(f"writes {n_w}: {(secs - life) / max(1, n_w):.1f} s/write (calibration {t.get('calibration', 0):.0f} s "
          f"included); operations {n_o}: {life / max(1, n_o):.1f} s/operation (its calibration included); "
          f"ratio per operation / per write {life / max(1, n_o) / max(1e-9, (secs - life) / max(1, n_w)):.2f}")
    g = (rep.get("lifecycle") or {}).get("gold")
    if not g:
        print("no gold on the operations")
        return
    rec = "-" if g["unjustified_recall"] is None else f"{g['unjustified_recall']:.2f}"
    print(f"accuracy {g['accuracy']:.2f} ({sum(r['label'] == r['gold'] for r in rows if r['gold'])}/{g['n']})  "
          f"unjustified recall {rec}  ambiguous {g['ambiguous_share']:.2f}")
    print("gold \\ audit " + " ".join(f"{x:>11}" for x in LABELS))
    for gl in LABELS:
        print(f"{gl:12} " + " ".join(f"{g['confusion'][gl][x]:>11}" for x in LABELS))
    for r in rows:
        mark = "ok " if r["label"] == r["gold"] else "MISS"
        print(f"  {mark} {r['case_id']:18} {r['kind']:10} gold {r['gold'] or '-':11} got {r['label']:11} {r['why']}")


if __name__ == "__main__":
    main()
