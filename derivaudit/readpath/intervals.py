"""Intervals for answer-level read-path metrics, over reads as the papers resample them (Memory Echo,
App. C: "intervals resample the question-level differences"): a Wilson interval for an accuracy, a
percentile bootstrap over reads for a mean of paired per-read differences (ΔAccuracy, DCE)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95
RESAMPLES = 2000


def wilson(hits: int, n: int, level: float = LEVEL) -> tuple[float | None, float | None]:
    if n <= 0:
        return (None, None)
    ci = stats.binomtest(hits, n).proportion_ci(confidence_level=level, method="wilson")
    return (float(ci.low), float(ci.high))


def mean_interval(values: Sequence[float], level: float = LEVEL, seed: int = 0) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of the mean of per-read values (paired differences), reads
    resampled; one value gives no interval, identical values a point."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return (None, None)
    if np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    res = stats.bootstrap((x,), np.mean, n_resamples=RESAMPLES, confidence_level=level, method="percentile",
                          random_state=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))
