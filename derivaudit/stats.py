"""Rates over writes: conversation-balanced (each conversation counts equally) beside
write-weighted, as seed 004 App. D reports them. Aggregation with polars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

# metric -> (numerator condition, denominator condition), both over labeled writes
SCOPE_METRICS: dict[str, tuple[pl.Expr, pl.Expr]] = {
    "citation_supported": (pl.col("citation_label") == "supported", pl.lit(True)),
    "expanded_supported": (pl.col("expanded_label") == "supported", pl.lit(True)),
    "provenance_repaired": (pl.col("expanded_label") == "supported", pl.col("citation_label") == "unsupported"),
    "unsupported": ((pl.col("expanded_label") == "unsupported") & ~pl.col("search_limited"), pl.lit(True)),
    "unresolved": ((pl.col("expanded_label") == "unsupported") & pl.col("search_limited"), pl.lit(True)),
    "contradicted": (pl.col("expanded_label") == "contradicted", pl.lit(True)),
    "ambiguous": (pl.col("expanded_label") == "ambiguous", pl.lit(True)),
    "multi_passage": (pl.col("multi_passage"), pl.col("expanded_label") == "supported"),
}
SCOPE_HELP = {
    "citation_supported": "supported by its citations alone",
    "expanded_supported": "supported with the BM25-expanded history",
    "provenance_repaired": "share of citation-unsupported writes that expansion supports",
    "unsupported": "unsupported after expansion (search not at its cap)",
    "unresolved": "insufficient after expansion on a search-limited write",
    "contradicted": "contradicted in the expanded view",
    "ambiguous": "ambiguous in the expanded view",
    "multi_passage": "share of expanded-supported writes whose minimal subsets span > 1 passage",
}


def rates(rows: Sequence[dict[str, Any]], metrics: dict[str, tuple[pl.Expr, pl.Expr]] = SCOPE_METRICS,
          group: str = "conversation_id") -> dict[str, dict[str, Any]]:
    """For each metric: conversation-balanced and write-weighted rates, their difference, and the
    number of writes and conversations in the denominator."""
    df = pl.DataFrame(rows)
    out: dict[str, dict[str, Any]] = {}
    for name, (num, den) in metrics.items():
        sub = df.filter(den) if len(df) else df
        if len(sub) == 0:
            out[name] = {"balanced": None, "weighted": None, "difference": None, "n_writes": 0,
                         "n_conversations": 0}
            continue
        sub = sub.with_columns(num.cast(pl.Float64).alias("_hit"))
        per = sub.group_by(group).agg(pl.col("_hit").mean().alias("rate"))
        balanced = float(per["rate"].mean())
        weighted = float(sub["_hit"].mean())
        out[name] = {"balanced": balanced, "weighted": weighted, "difference": weighted - balanced,
                     "n_writes": len(sub), "n_conversations": per.height}
    return out


def cluster_bootstrap_ci(rows: Sequence[dict[str, Any]], metrics: dict[str, tuple[pl.Expr, pl.Expr]] = SCOPE_METRICS,
                         group: str = "conversation_id", reps: int = 1000, seed: int = 0
                         ) -> dict[str, tuple[float | None, float | None]]:
    """95% percentile intervals of each conversation-balanced rate, resampling conversations with
    replacement. One seeded draw of conversations serves every metric, so the same run always gives
    the same intervals."""
    import numpy as np

    df = pl.DataFrame(rows)
    out: dict[str, tuple[float | None, float | None]] = {name: (None, None) for name in metrics}
    if not len(df):
        return out
    convs = df[group].unique().sort().to_list()
    if len(convs) < 2:
        return out
    draws = np.random.default_rng(seed).integers(0, len(convs), size=(reps, len(convs)))
    for name, (num, den) in metrics.items():
        per = (df.with_columns(num.cast(pl.Float64).alias("_hit"), den.cast(pl.Float64).alias("_den"))
               .group_by(group).agg((pl.col("_hit") * pl.col("_den")).sum().alias("hits"), pl.col("_den").sum()
                                    .alias("n")))
        per = pl.DataFrame({group: convs}).join(per, on=group, how="left").fill_null(0.0)
        hits, n = per["hits"].to_numpy()[draws], per["n"].to_numpy()[draws]
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(n > 0, hits / np.where(n > 0, n, 1), np.nan)
            counted = (n > 0).sum(axis=1)
            balanced = np.where(counted > 0, np.nansum(rate, axis=1) / np.maximum(counted, 1), np.nan)
        balanced = balanced[~np.isnan(balanced)]
        if len(balanced):
            out[name] = (float(np.quantile(balanced, 0.025)), float(np.quantile(balanced, 0.975)))
    return out
