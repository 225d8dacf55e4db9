"""Rates over writes: conversation-balanced (each conversation counts equally) beside
write-weighted, as DerivAudit App. D reports them. Aggregation with polars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

# metric -> (numerator condition, denominator condition), both over labeled writes
SCOPE_METRICS: dict[str, tuple[pl.Expr, pl.Expr]] = {
    "citation_supported": (pl.col("citation_label") == "supported", pl.lit(True)),
    "expanded_supported": (pl.col("expanded_label") == "supported", pl.lit(True)),
    # gold.provenance_repaired: supported after expansion, among the writes their citations leave insufficient
    "provenance_repaired": (pl.col("expanded_label") == "supported", pl.col("citation_label") == "unsupported"),
    "provenance_repaired_other": (pl.col("expanded_label") == "supported",
                                  pl.col("citation_label").is_in(["contradicted", "ambiguous"])),
    "unsupported": ((pl.col("expanded_label") == "unsupported") & ~pl.col("search_limited"), pl.lit(True)),
    "unresolved": ((pl.col("expanded_label") == "unsupported") & pl.col("search_limited"), pl.lit(True)),
    "contradicted": (pl.col("expanded_label") == "contradicted", pl.lit(True)),
    "ambiguous": (pl.col("expanded_label") == "ambiguous", pl.lit(True)),
    "multi_passage": (pl.col("multi_passage"), pl.col("expanded_label") == "supported"),
}
SCOPE_HELP = {
    "citation_supported": "supported by its citations alone",
    "expanded_supported": "supported with the BM25-expanded history",
    "provenance_repaired": "share of the writes their citations leave insufficient (unsupported) that expansion "
                           "supports",
    "provenance_repaired_other": "share of the writes whose citations are contradicted or ambiguous that expansion "
                                 "supports (apart from provenance_repaired, as DerivAudit defines it)",
    "unsupported": "unsupported after expansion (search not at its cap)",
    "unresolved": "insufficient after expansion on a search-limited write",
    "contradicted": "contradicted in the expanded view",
    "ambiguous": "ambiguous in the expanded view",
    "multi_passage": "share of expanded-supported writes whose minimal subsets span > 1 passage",
}


def group_counts(rows: Sequence[dict[str, Any]], metrics: dict[str, tuple[pl.Expr, pl.Expr]] = SCOPE_METRICS,
                 group: str = "conversation_id") -> tuple[list[Any], list[int], dict[str, tuple[Any, Any]]]:
    """Per group (sorted): the number of rows, and for each metric the numerator and denominator
    counts as numpy arrays. Every rate, interval and per-conversation table is computed from these."""
    df = pl.DataFrame(rows)
    if not len(df):
        return [], [], {}
    per = (df.with_columns(*[(num & den).cast(pl.Float64).alias(f"{k}__hit") for k, (num, den) in metrics.items()],
                           *[den.cast(pl.Float64).alias(f"{k}__den") for k, (_, den) in metrics.items()])
           .group_by(group).agg(pl.len().alias("__rows"), pl.col("^.*__(hit|den)$").sum()).sort(group))
    return (per[group].to_list(), per["__rows"].to_list(),
            {k: (per[f"{k}__hit"].to_numpy(), per[f"{k}__den"].to_numpy()) for k in metrics})


def rates(rows: Sequence[dict[str, Any]], metrics: dict[str, tuple[pl.Expr, pl.Expr]] = SCOPE_METRICS,
          group: str = "conversation_id") -> dict[str, dict[str, Any]]:
    """For each metric: conversation-balanced and write-weighted rates, their difference, and the
    number of writes and conversations in the denominator."""
    _, _, counts = group_counts(rows, metrics, group)
    out: dict[str, dict[str, Any]] = {}
    for name in metrics:
        hits, n = counts.get(name, ((), ()))
        has = [(h, d) for h, d in zip(hits, n, strict=True) if d > 0]
        if not has:
            out[name] = {"balanced": None, "weighted": None, "difference": None, "n_writes": 0,
                         "n_conversations": 0}
            continue
        balanced = float(sum(h / d for h, d in has) / len(has))
        weighted = float(sum(h for h, _ in has) / sum(d for _, d in has))
        out[name] = {"balanced": balanced, "weighted": weighted, "difference": weighted - balanced,
                     "n_writes": int(sum(d for _, d in has)), "n_conversations": len(has)}
    return out


def conversation_draws(n_groups: int, reps: int = 1000, seed: int = 0) -> Any:
    """`reps` resamples of group indices with replacement: one seeded draw shared by every statistic."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, n_groups, size=(reps, n_groups))


def balanced_resamples(hits: Any, n: Any, draws: Any) -> Any:
    """The balanced rate (mean over drawn groups that have a denominator, each drawn copy counting
    as its own group) for every resample; NaN where a resample has no such group."""
    import numpy as np

    rate = np.where(n > 0, hits / np.maximum(n, 1), 0.0)[draws]
    counted = (n > 0)[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, rate.sum(axis=1) / counted, np.nan)


def percentile_interval(vals: Any) -> tuple[float | None, float | None]:
    """The 2.5th and 97.5th order statistics of the defined bootstrap values."""
    import numpy as np

    vals = np.sort(vals[~np.isnan(vals)])
    if not len(vals):
        return (None, None)
    return (float(vals[int(0.025 * (len(vals) - 1))]), float(vals[int(0.975 * (len(vals) - 1))]))


def balanced_interval(hits: Any, n: Any, level: float = 0.95) -> tuple[float | None, float | None]:
    """95% interval of a conversation-balanced rate (the mean of the conversations' rates) for
    conversations like these: a t interval over the conversations' rates (C - 1 degrees of
    freedom), its variance never below what the writes within each conversation alone would give
    (each rate with one pseudo-success and one pseudo-failure), so two conversations that happen to
    agree do not give a zero-width interval, where a percentile bootstrap over few conversations is
    far too narrow (coverage: `benchmarks/bench_ppi.py --conversations`). None without a
    conversation that has a denominator."""
    import numpy as np
    from scipy import stats as st

    hits, n = np.asarray(hits, dtype=float), np.asarray(n, dtype=float)
    keep = n > 0
    hits, n = hits[keep], n[keep]
    c = len(n)
    if not c:
        return (None, None)
    rate = hits / n
    est = float(rate.mean())
    between = float(rate.var(ddof=1)) / c if c > 1 else 0.0
    adj = (hits + 1) / (n + 2)
    within = float((adj * (1 - adj) / (n + 2)).sum()) / c**2
    half = float(st.t.ppf(0.5 + level / 2, max(1, c - 1))) * max(between, within) ** 0.5
    return (max(0.0, est - half), min(1.0, est + half))


def paired_interval(diffs: Any, n: Any, discordant: Any, level: float = 0.95) -> tuple[float | None, float | None]:
    """95% interval of the mean over conversations of a paired difference of rates (`diffs`: each
    conversation's difference, over `n` pairs with `discordant` pairs that differ): a t interval
    over conversations, its variance never below the within-conversation variance of a paired
    difference (Agresti and Min: half a pseudo-pair in each discordant cell)."""
    import numpy as np
    from scipy import stats as st

    diffs, n, disc = (np.asarray(x, dtype=float) for x in (diffs, n, discordant))
    keep = n > 0
    diffs, n, disc = diffs[keep], n[keep], disc[keep]
    c = len(n)
    if not c:
        return (None, None)
    est = float(diffs.mean())
    between = float(diffs.var(ddof=1)) / c if c > 1 else 0.0
    discordant_share = (disc + 1) / (n + 2)  # half a pseudo-pair in each discordant cell
    within = float((np.clip(discordant_share - diffs**2, 0, None) / (n + 2)).sum()) / c**2
    half = float(st.t.ppf(0.5 + level / 2, max(1, c - 1))) * max(between, within) ** 0.5
    return (max(-1.0, est - half), min(1.0, est + half))


def wilson_upper(k: int, n: int, z: float = 1.6449) -> float | None:
    """One-sided upper confidence bound (95% by default) on a binomial share k/n, Wilson's score
    interval: unlike k/n it is above 0 when k = 0, so a small clean sample is not read as proof."""
    if n <= 0:
        return None
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)
    return min(1.0, (centre + half) / (1 + z * z / n))


def cohen_kappa(x: Sequence[Any], y: Sequence[Any]) -> float | None:
    """Cohen's kappa between two raters' categorical answers (None when undefined)."""
    n = len(x)
    if n == 0:
        return None
    cats = set(x) | set(y)
    po = sum(i == j for i, j in zip(x, y, strict=True)) / n
    pe = sum((list(x).count(c) / n) * (list(y).count(c) / n) for c in cats)
    if pe == 1:
        return 1.0 if po == 1 else None
    return (po - pe) / (1 - pe)


def clears(score: float, threshold: float) -> bool:
    """The accept rule everywhere a score meets a threshold: at or above a fitted threshold; at the
    argmax default (0) a tie is not a yes (log p(yes) = log p(no) says nothing)."""
    return score > threshold if threshold == 0.0 else score >= threshold


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """Probability that a random valid memory outscores a random unsupported one (ties count half)."""
    import numpy as np

    if not pos or not neg:
        return None
    ns = np.sort(np.asarray(neg, dtype=float))
    ps = np.asarray(pos, dtype=float)
    below, upto = np.searchsorted(ns, ps, "left"), np.searchsorted(ns, ps, "right")
    return float((below + 0.5 * (upto - below)).sum() / (len(pos) * len(neg)))
