"""What a scan's calibration costs, scoring every role's slot-check items at once (the earlier path)
against scoring them role by role, stopping at the first moot one (`calibrate.add_slots`, the
default), on the same log: tokens computed, seconds, and whether both give the same thresholds and
the same slot-check decision.

Usage:
    python benchmarks/bench_calibration.py [--log FILE | --conversations conv-42,conv-44] [--model M]

Each path runs on its own freshly loaded backend with an empty result cache, the staged path first
(a later run on a warm machine only flatters the second), and the ratios are staged / all.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit import load_log  # noqa: E402
from derivaudit.audit import calibrate as cal  # noqa: E402
from derivaudit.importers import run_import  # noqa: E402
from derivaudit.log.records import MemoryLog  # noqa: E402
from derivaudit.models import default_backend, default_model, load_backend  # noqa: E402

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo10.json"


def roles(be):
    return [(be, "a", None), (be, "b", None), (be, "a", cal.adjudicator_task())]


def all_at_once(be, log: MemoryLog):
    """The earlier path: A's and B's S items scored with E and R, the adjudicator's once both separate."""
    cals = cal.calibrate_many(roles(be), log, with_slots=(True, True, False))
    why = cal.slot_check_off(cals[:2])
    if not why and (t := cal.calibrate_slots(be, "a", log, task=cal.adjudicator_task())) is not None:
        cals[2]["thresholds"]["s"] = t
    return cals, why


def staged(be, log: MemoryLog):
    cals = cal.calibrate_many(roles(be), log, with_slots=(True, False, False))
    return cals, cal.add_slots(cals, roles(be)[1:], log)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", type=Path, default=None, help="a memory log (default: LoCoMo conversations)")
    ap.add_argument("--conversations", default="conv-42,conv-44")
    ap.add_argument("--model", default=None, help="BACKEND:MODEL (default: the embedded default)")
    args = ap.parse_args()
    backend, _, model = (args.model or "").rpartition(":")
    backend, model = backend or default_backend(), model or default_model()
    work = Path(tempfile.mkdtemp(prefix="bench_calibration."))
    if args.log is None:
        if not LOCOMO.exists():
            sys.exit(f"LoCoMo not found at {LOCOMO}; pass --log FILE")
        run_import("locomo", LOCOMO, work / "locomo.jsonl")
        full, keep = load_log(work / "locomo.jsonl"), args.conversations.split(",")
        log = dataclasses.replace(full, conversations={c: full.conversations[c] for c in keep},
                                  writes=[w for w in full.writes if w.conversation_id in keep])
        name = args.conversations
    else:
        log, name = load_log(args.log), args.log.name
    rows = []
    for label, fn in (("staged (default)", staged), ("all at once (before)", all_at_once)):
        be = load_backend(backend, model, cache=str(work / f"{label.split()[0]}.sqlite"))
        t0 = time.perf_counter()
        cals, why = fn(be, log)
        rows.append((label, be.usage.computed_tokens, be.usage.prompts, time.perf_counter() - t0, cals, why))
        be.close()
    print(f"{model} ({backend}) on {name}: {sum(len(c.turns) for c in log.conversations.values())} turns")
    print(f"{'path':22} {'prompts':>8} {'tokens computed':>16} {'seconds':>8}  slot check")
    for label, tok, n, secs, _, why in rows:
        print(f"{label:22} {n:8d} {tok:16d} {secs:8.1f}  {'on' if why is None else 'off: ' + why[:60]}")
    (_, t1, _, s1, c1, w1), (_, t0, _, s0, c0, w0) = rows
    same = [a["thresholds"] for a in c1] == [b["thresholds"] for b in c0] if w1 is None else \
        [{k: v for k, v in a["thresholds"].items() if k != "s"} for a in c1] == \
        [{k: v for k, v in b["thresholds"].items() if k != "s"} for b in c0] and \
        c1[0]["thresholds"].get("s") == c0[0]["thresholds"].get("s")
    print(f"staged / all: tokens {t1 / max(1, t0):.2f}x, seconds {s1 / max(1e-9, s0):.2f}x; "
          f"same E/R thresholds and A's S: {same}; same decision: {(w1 is None) == (w0 is None)}")
    for role, a, b in zip(("A", "B", "adjudicator"), c1, c0, strict=True):
        for k in sorted(set(a["thresholds"]) & set(b["thresholds"])):
            x, y = a["thresholds"][k], b["thresholds"][k]
            if x != y:
                print(f"  {role} {k}: staged {x.value:.4f} (AUC {x.auc}, TPR {x.tpr}) vs all {y.value:.4f} "
                      f"(AUC {y.auc}, TPR {y.tpr}): |diff| {abs(x.value - y.value):.2e}")


if __name__ == "__main__":
    main()
