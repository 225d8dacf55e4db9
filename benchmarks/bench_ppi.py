"""Do the corrected rates' intervals hold? Coverage and width of the 95% intervals of
`derivaudit.rates.estimate` on run folders whose writes carry `meta.gold`, with gold as the truth.

For each run and scope metric: the all-gold rate (conversation-balanced, the truth), the judge's
rate and its bias; then for n = 10, 20, 40 labelled writes (those below the run's size), `--draws`
random labelled subsets (simple random, as `meta.gold` on a random few writes would be), and for
each subset four intervals: the corrected one (power-tuned PPI, the report's), the same with the
judge's weight fixed at 1 (plain PPI), the classical one from the labelled writes alone (same
design, no judge), and the textbook PPI interval (`ppi_iid`: independent draws, no
finite-population correction, normal quantile: what `ppi_py.ppi_mean_ci` gives). Reported:
how often each covers the truth, and its mean width. Then per-write confidence: accuracy of the
more confident half of the writes against the less confident half. Then `scan --sample`: stratified
samples of the run's writes, and how often the sample's interval covers the judge's all-writes rate.

Usage (scan the gold sets first; the result cache makes a second scan free):

    python benchmarks/bench_labels.py --set fixtures --out runs/gold      # then --set final, --set locomo
    python benchmarks/bench_ppi.py runs/gold/fixtures-* runs/gold/final-*  [--draws 2000] [--synthetic]
    python benchmarks/bench_ppi.py --conversations        # the replay's interval across conversations

No model is run: seconds.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit.rates import sampling  # noqa: E402
from derivaudit.rates.estimate import Sample, balanced_design, estimate, ppi_iid  # noqa: E402
from derivaudit.rates.trust import (  # noqa: E402
    CORRECTED,
    REFERENCE_VALUES,
    accuracy_at_coverage,
    judge_indicators,
    reference_indicators,
    write_confidence,
)
from derivaudit.runs import folder as runs

SIZES = (10, 20, 40)


def indicators(rows: list[dict], gold: dict[str, str]) -> dict[str, tuple[np.ndarray, ...]]:
    cats = [gold[r["write_id"]] for r in rows]
    return {name: (*judge_indicators(rows, name), *reference_indicators(cats, name)) for name in CORRECTED}


def design(rows: list[dict], labelled: np.ndarray) -> Sample:
    return balanced_design([r["conversation_id"] for r in rows], labelled)


def coverage(rows: list[dict], gold: dict[str, str], draws: int, seed: int = 0) -> list[dict]:
    ind = indicators(rows, gold)
    n_all = len(rows)
    everything = design(rows, np.ones(n_all, dtype=bool))
    rng = np.random.default_rng(seed)
    out = []
    for name, (fn, fd, yn, yd) in ind.items():
        truth = estimate(fn, fd, yn, yd, everything).value
        judge = estimate(fn, fd, yn, yd, design(rows, np.zeros(n_all, dtype=bool))).judge
        for n in SIZES:
            if n >= n_all:
                continue
            hit = {"ppi": 0, "tuned": 0, "classical": 0, "iid": 0}
            width = {"ppi": [], "tuned": [], "classical": [], "iid": []}
            for _ in range(draws):
                lab = np.zeros(n_all, dtype=bool)
                lab[rng.choice(n_all, n, replace=False)] = True
                d = design(rows, lab)
                for kind, est in (("ppi", estimate(fn, fd, yn, yd, d)),
                                  ("tuned", estimate(fn, fd, yn, yd, d, lam=None)),
                                  ("classical", estimate(fn, fd, yn, yd, d, judge=False))):
                    if est.low is None or truth is None:
                        continue
                    hit[kind] += est.low - 1e-9 <= truth <= est.high + 1e-9
                    width[kind].append(est.high - est.low)
                if name != "provenance_repaired":  # a mean: the textbook interval applies as is
                    w = d.weight * n_all
                    _, lo, hi = ppi_iid(yn[lab], fn[lab], fn[~lab], w=w[lab], w_unlabeled=w[~lab])
                    hit["iid"] += lo - 1e-9 <= truth <= hi + 1e-9
                    width["iid"].append(hi - lo)
            out.append({"metric": name, "n": n, "truth": truth, "judge": judge,
                        **{f"{k}_coverage": (hit[k] / len(width[k]) if width[k] else None) for k in hit},
                        **{f"{k}_width": (float(np.mean(width[k])) if width[k] else None) for k in hit}})
    return out


def sample_coverage(rows: list[dict], draws: int, fraction: float = 1 / 3, seed: int = 0) -> list[dict]:
    """`scan --sample`: stratified samples of a third of the writes; coverage of the judge's
    all-writes rate by the sample's interval."""
    out = []
    conv = {r["write_id"]: r["conversation_id"] for r in rows}
    sizes = dict(Counter(conv.values()))
    n = max(len(sizes), round(fraction * len(rows)))
    full = design(rows, np.zeros(len(rows), dtype=bool))
    for name in CORRECTED:
        f_num, f_den = judge_indicators(rows, name)
        target = estimate(f_num, f_den, f_num, f_den, full).judge
        hit, widths = 0, []
        for k in range(draws):
            ids = set(sampling.stratified([(r["write_id"], conv[r["write_id"]]) for r in rows], n, seed + k))
            idx = np.array([r["write_id"] in ids for r in rows])
            d = balanced_design([r["conversation_id"] for r in rows if r["write_id"] in ids], np.zeros(len(ids), bool),
                                store=sizes, sampled=True)
            e = estimate(f_num[idx], f_den[idx], f_num[idx], f_den[idx], d)
            if e.low is None or target is None:
                continue
            hit += e.low - 1e-9 <= target <= e.high + 1e-9
            widths.append(e.high - e.low)
        out.append({"metric": name, "sample": n, "of": len(rows), "judge_all": target,
                    "coverage": hit / len(widths) if widths else None,
                    "width": float(np.mean(widths)) if widths else None})
    return out


def synthetic(draws: int) -> list[dict]:
    """Coverage on simulated stores (random labels and a judge of given accuracy), for sizes the
    gold sets do not reach."""
    rng = np.random.default_rng(7)
    out = []
    for n_all, convs in ((72, 5), (144, 8), (500, 10)):
        for p, acc in ((0.25, 0.75), (0.1, 0.9), (0.5, 0.7), (0.05, 0.95)):
            conv = np.sort(rng.integers(0, convs, n_all))
            cats = np.where(rng.random(n_all) < p, "unsupported", "citation-supported")
            flip = rng.random(n_all) > acc
            pred = np.where(flip, np.where(cats == "unsupported", "citation-supported", "unsupported"), cats)
            rows = [{"write_id": f"w{i}", "conversation_id": f"c{conv[i]}", "search_limited": False,
                     "citation_label": "supported" if pred[i] == "citation-supported" else "unsupported",
                     "expanded_label": "supported" if pred[i] == "citation-supported" else "unsupported"}
                    for i in range(n_all)]
            gold = {f"w{i}": str(cats[i]) for i in range(n_all)}
            for r in coverage(rows, gold, draws):
                if r["metric"] == "unsupported":
                    out.append({"store": f"N={n_all}, C={convs}, rate {p}, judge accuracy {acc}", **r})
    return out


def across_conversations(draws: int) -> list[dict]:
    """The replay's interval (stats.balanced_interval) against the percentile bootstrap over
    conversations it replaced, on simulated conversations: each conversation's rate from a beta
    distribution of mean mu, 4-30 writes each; coverage of mu."""
    from derivaudit.rates.stats import balanced_interval, balanced_resamples, conversation_draws, percentile_interval

    rng = np.random.default_rng(11)
    out = []
    for convs in (2, 3, 5, 10, 20):
        for mu, kappa in ((0.2, 5), (0.5, 5), (0.1, 20), (0.05, 50)):
            hit = {"t": 0, "boot": 0}
            width = {"t": [], "boot": []}
            for k in range(draws):
                p = rng.beta(mu * kappa, (1 - mu) * kappa, convs)
                n = rng.integers(4, 31, convs)
                h = rng.binomial(n, p).astype(float)
                for kind, (lo, hi) in (("t", balanced_interval(h, n)), ("boot", percentile_interval(
                        balanced_resamples(h, n.astype(float), conversation_draws(convs, 400, k))))):
                    if lo is None:
                        continue
                    hit[kind] += lo <= mu <= hi
                    width[kind].append(hi - lo)
            out.append({"conversations": convs, "mu": mu, "kappa": kappa,
                        **{f"{k}_coverage": hit[k] / max(1, len(width[k])) for k in hit},
                        **{f"{k}_width": float(np.mean(width[k])) if width[k] else None for k in hit}})
    return out


def gold_rows(log: Path) -> list[dict]:
    """labels.jsonl-like rows from a log's writes, the labels read off meta.gold (category -> the two
    view labels that give it)."""
    import orjson

    views = {"citation-supported": ("supported", "supported"), "provenance-repaired": ("unsupported", "supported"),
             "unsupported": ("unsupported", "unsupported"), "contradicted": ("contradicted", "contradicted")}
    out = []
    for line in log.read_bytes().splitlines():
        w = orjson.loads(line) if line.strip() else {}
        g = (w.get("meta") or {}).get("gold")
        if w.get("type") == "write" and g in views:
            cit, exp = views[g]
            out.append({"write_id": w["write_id"], "conversation_id": w["conversation_id"], "citation_label": cit,
                        "expanded_label": exp, "search_limited": False})
    return out


def print_sample_coverage(rows: list[dict]) -> None:
    print("| metric | judge, all writes | sample | interval covers it | mean width |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['metric']} | {pct(r['judge_all'])} | {r['sample']} of {r['of']} | {pct(r['coverage'])} | "
              f"{pct(r['width'])} |")


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, help="run folders whose writes carry meta.gold")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--synthetic", action="store_true", help="also simulated stores of 72-500 writes")
    ap.add_argument("--sample-log", type=Path, action="append", default=[],
                    help="`scan --sample` coverage on a memory log's writes, their meta.gold standing for the "
                         "judge's labels (e.g. fixtures/locomo_dev.jsonl: 144 writes, 8 conversations)")
    ap.add_argument("--conversations", action="store_true",
                    help="also the replay's interval for conversations like these, on simulated conversations")
    args = ap.parse_args()
    for run in args.runs:
        labels = [r for r in runs.read_rows(run, runs.LABELS) if r["citation_label"] and r["expanded_label"]]
        gold = {r["write_id"]: r["gold"] for r in labels if r.get("gold") in REFERENCE_VALUES}
        rows = [r for r in labels if r["write_id"] in gold]
        convs = len({r["conversation_id"] for r in rows})
        print(f"\n## {run.name}: {len(rows)} gold writes, {convs} conversations, {args.draws} draws per n\n")
        print("| metric | all-gold rate | judge | bias | n | corrected coverage | width | lambda=1 coverage | width | "
              "labels alone: coverage | width | corrected / alone | textbook PPI coverage |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in coverage(rows, gold, args.draws):
            ratio = (r["tuned_width"] / r["classical_width"]) if r["tuned_width"] and r["classical_width"] else None
            bias = None if r["judge"] is None or r["truth"] is None else r["judge"] - r["truth"]
            print(f"| {r['metric']} | {pct(r['truth'])} | {pct(r['judge'])} | "
                  f"{'–' if bias is None else f'{100 * bias:+.1f} pt'} | {r['n']} | {pct(r['tuned_coverage'])} | "
                  f"{pct(r['tuned_width'])} | {pct(r['ppi_coverage'])} | {pct(r['ppi_width'])} | "
                  f"{pct(r['classical_coverage'])} | {pct(r['classical_width'])} | "
                  f"{'–' if ratio is None else f'{ratio:.2f}'} | {pct(r['iid_coverage'])} |")
        meta = runs.load_meta(run)
        conf = write_confidence(rows, runs.read_rows(run, runs.PRIMITIVES), meta.get("calibration") or {})
        acc = accuracy_at_coverage(rows, conf, gold)
        if acc:
            print("\nAccuracy at coverage: " + ", ".join(f"top {t['coverage']:.0%} {pct(t['accuracy'])} "
                                                        f"({t['writes']})" for t in acc["table"])
                  + f"; top half {pct(acc['top_half'])} vs bottom half {pct(acc['bottom_half'])}")
        else:
            print("\nAccuracy at coverage: no confidence (the run has no calibration scale)")
        print("\n`scan --sample` (a third of the writes, stratified by conversation):\n")
        print_sample_coverage(sample_coverage(rows, args.draws))
    for log in args.sample_log:
        rows = gold_rows(log)
        convs = len({r["conversation_id"] for r in rows})
        print(f"\n## `scan --sample` on {log.name}: {len(rows)} writes, {convs} conversations (meta.gold as the "
              f"labels), {args.draws} samples each\n")
        print_sample_coverage([r for fraction in (1 / 6, 1 / 3) for r in sample_coverage(rows, args.draws, fraction)])
    if args.synthetic:
        print(f"\n## Simulated stores (unsupported rate), {args.draws} draws per n\n")
        print("| store | n | PPI coverage | PPI width | tuned coverage | tuned width | classical coverage | "
              "classical width | textbook PPI coverage |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in synthetic(args.draws):
            print(f"| {r['store']} | {r['n']} | {pct(r['ppi_coverage'])} | {pct(r['ppi_width'])} | "
                  f"{pct(r['tuned_coverage'])} | {pct(r['tuned_width'])} | "
                  f"{pct(r['classical_coverage'])} | {pct(r['classical_width'])} | {pct(r['iid_coverage'])} |")
    if args.conversations:
        print(f"\n## The replay's interval across conversations, {args.draws} draws each\n")
        print("| conversations | mean rate | beta concentration | t interval coverage | width | "
              "percentile bootstrap coverage | width |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in across_conversations(args.draws):
            print(f"| {r['conversations']} | {r['mu']} | {r['kappa']} | {pct(r['t_coverage'])} | {pct(r['t_width'])} | "
                  f"{pct(r['boot_coverage'])} | {pct(r['boot_width'])} |")


if __name__ == "__main__":
    main()
