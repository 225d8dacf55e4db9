"""What the decomposition's reading rules leave out, on every gold write (fixtures and the LoCoMo
gold files): the generated lines each rule drops, per gold file, and the writes a rule touches.
A reading rule changes a label only through the writes it touches, so this is how far a new rule
reaches before any audit is re-run: the gold writes it does not touch keep their labels.

    DERIVAUDIT_HOME=$(mktemp -d) python benchmarks/bench_parse_rules.py [--model M] [--show RULE]

Only the decomposition is asked (about 8 s per write on a 2-core CPU with the embedded default, cold;
the result cache makes a rerun free). The gold files hold writes without their turns, so nothing
from ../shared is needed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_labels import parse_model  # noqa: E402

from derivaudit.audit.decompose import decompose  # noqa: E402
from derivaudit.log.records import Write  # noqa: E402
from derivaudit.models import load_backend  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SETS = ("memories", "lifecycle", "locomo_dev", "locomo_final", "locomo_lifecycle")
# The tag each rule appends to the line it drops (annotate.parse_obligations and its helpers).
RULES = {"unsaid-modality": "a hedge the record does not make", "undrawn-relation": "a link the record does not draw",
         "one-sided-relation": "links one claim to nothing"}


def rule_of(line: str) -> str:
    return next((name for name, tag in RULES.items() if tag in line), "not-about-the-record")


def gold_writes() -> list[tuple[str, Write]]:
    """Each distinct write text once, with the first gold file that holds it."""
    out: list[tuple[str, Write]] = []
    seen: set[str] = set()
    for name in SETS:
        for raw in (ROOT / "fixtures" / f"{name}.jsonl").read_bytes().splitlines():
            r = orjson.loads(raw) if raw.strip() else {}
            if r.get("type") != "write" or r["text"] in seen:
                continue
            seen.add(r["text"])
            out.append((name, Write(r["write_id"], r["conversation_id"], r["text"], tuple(r.get("citations") or ()),
                                    r.get("last_seen_turn") or "")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="BACKEND:MODEL or MODEL (default: the default model)")
    ap.add_argument("--show", default="unsaid-modality", help="list the lines this rule drops (default: %(default)s)")
    args = ap.parse_args()
    spec = parse_model(args.model) if args.model else None
    backend = load_backend(spec.backend, spec.model) if spec else load_backend()
    writes = gold_writes()
    t0 = time.time()
    found = decompose(backend, [w for _, w in writes])
    took = time.time() - t0
    per: dict[str, Counter[str]] = {name: Counter() for name in SETS}
    shown = []
    for (name, w), d in zip(writes, found, strict=True):
        per[name]["writes"] += 1
        per[name]["fallback"] += d.status == "fallback"
        rules = {rule_of(x) for x in d.dropped}
        for r in rules:
            per[name][r] += 1
        if args.show in rules:
            shown.append((name, w, [x for x in d.dropped if rule_of(x) == args.show]))
    print(f"{len(writes)} gold writes, decomposed in {took:.0f} s ({took / max(1, len(writes)):.1f} s/write)")
    cols = ["writes", "fallback", *RULES, "not-about-the-record"]
    print("writes touched per rule\n" + "set".ljust(18) + "".join(c.rjust(22) for c in cols))
    for name in SETS:
        print(name.ljust(18) + "".join(str(per[name][c]).rjust(22) for c in cols))
    print(f"\n{args.show}: {len(shown)} writes")
    for name, w, lines in shown:
        print(f"  {name}  {w.write_id}  {w.text!r}")
        for x in lines:
            print(f"      {x}")


if __name__ == "__main__":
    main()
