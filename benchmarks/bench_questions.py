"""How well each E/R question wording separates the gold categories, one statement per write.

Usage:
    python benchmarks/bench_questions.py --model llamacpp:qwen2.5-coder-1.5b
    python benchmarks/bench_questions.py --question der_r_a --question der_r3_a --set locomo

For every write of the gold sets (bench_labels' fixtures and LoCoMo dev), the whole memory text is
the statement and the expanded view's passages are the evidence (no decomposition, no subsets, no
annotator B: this isolates the question). Each question file is scored over the real passages and
over null passages of the same length, and the script prints, per question:
- AUC(real): E questions rank supported writes (citation-supported + repaired) above the rest;
  R questions rank contradicted writes above the rest;
- AUC(real - null): the same on the margin over null evidence;
- share of writes answered yes at argmax (score > 0), per gold category.
Quality is compared between questions run in the same process on the same prompts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_labels import LOCOMO, ROOT, locomo_dev_log, parse_model  # noqa: E402

from derivaudit import load_log  # noqa: E402
from derivaudit.audit.annotate import ask, null_passages, passages_block  # noqa: E402
from derivaudit.audit.evidence import build_views  # noqa: E402
from derivaudit.audit.gold import CATEGORIES  # noqa: E402
from derivaudit.models import ModelPool  # noqa: E402
from derivaudit.models.base import Prompt  # noqa: E402
from derivaudit.rates.stats import auc  # noqa: E402

SUPPORTED = {"citation-supported", "provenance-repaired"}


def rows_of(log_path: Path) -> list[tuple[str, str, str, str]]:
    """(gold, statement, real evidence block, null evidence block) per write with gold."""
    log = load_log(log_path)
    out = []
    for v in build_views(log):
        gold = (v.write.meta or {}).get("gold")
        if gold in CATEGORIES:
            out.append((gold, v.write.text, passages_block(v.expanded), passages_block(null_passages(len(v.expanded)))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llamacpp:qwen2.5-coder-1.5b", help="BACKEND:MODEL")
    ap.add_argument("--question", action="append", help="prompt file name (repeatable; default: E and R, old and new)")
    ap.add_argument("--set", choices=("fixtures", "locomo", "both"), default="both")
    ap.add_argument("--locomo", type=Path, default=LOCOMO)
    args = ap.parse_args()
    questions = args.question or ["der_e_a", "der_r_a", "der_r3_a", "der_r3_b"]
    work = Path(tempfile.mkdtemp(prefix="bench_questions."))
    rows = []
    if args.set in ("fixtures", "both"):
        rows += rows_of(ROOT / "fixtures" / "memories.jsonl")
    if args.set in ("locomo", "both"):
        p = locomo_dev_log(args.locomo, work)
        if p is None:
            print(f"LoCoMo not found at {args.locomo}: the locomo set is skipped")
        else:
            rows += rows_of(p)
    spec = parse_model(args.model)
    with ModelPool() as pool:
        be = pool.get(spec)
        print(f"{len(rows)} writes; model {args.model}")
        print(f"{'question':<14} {'target':<13} {'AUC real':>8} {'AUC -null':>9}  yes at argmax by gold category")
        prompts = []
        for q in questions:  # one call: every question over one write's evidence shares its prefix
            for _, stmt, real, null in rows:
                task, verdict = ask(q, obligation=stmt)
                prompts += [Prompt(real, task, verdict=verdict), Prompt(null, task, verdict=verdict)]
        all_scores = be.score(prompts)
        for qi, q in enumerate(questions):
            scores = all_scores[2 * len(rows) * qi: 2 * len(rows) * (qi + 1)]
            real_s = [s.logodds for s in scores[0::2]]
            null_s = [s.logodds for s in scores[1::2]]
            target = SUPPORTED if "_e" in q else {"contradicted"}
            pos = [i for i, r in enumerate(rows) if r[0] in target and real_s[i] is not None]
            neg = [i for i, r in enumerate(rows) if r[0] not in target and real_s[i] is not None]
            a_real = auc([real_s[i] for i in pos], [real_s[i] for i in neg])
            ok = [i for i in range(len(rows)) if real_s[i] is not None and null_s[i] is not None]
            a_null = auc([real_s[i] - null_s[i] for i in pos if i in ok],
                         [real_s[i] - null_s[i] for i in neg if i in ok])
            yes = []
            for c in CATEGORIES:
                ix = [i for i, r in enumerate(rows) if r[0] == c]
                yes.append(f"{c.split('-')[0][:5]} {sum((real_s[i] or 0) > 0 for i in ix)}/{len(ix)}")
            r3 = [None if a is None else round(a, 3) for a in (a_real, a_null)]
            print(f"{q:<14} {'/'.join(sorted(t.split('-')[0] for t in target)):<13} "
                  f"{r3[0]!s:>8} {r3[1]!s:>9}  {'; '.join(yes)}", flush=True)


if __name__ == "__main__":
    main()
