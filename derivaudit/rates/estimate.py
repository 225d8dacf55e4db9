"""Rates a user can trust from a judge that is often wrong: the store's rate estimated from the
judge's label on every audited write, corrected by reference labels (human review, `meta.gold`) on
a random few of them, with a 95% interval that holds whatever the judge's accuracy.

What is estimated. A rate of the *store*: the share of its writes with some property (citation-
supported, unsupported, ...), conversation-balanced (each conversation weighs the same) or
write-weighted, as the truth would give it. Two random draws stand between the audit and that
number, and both are made by derivaudit itself, so both are known:

- phase 1, `scan --sample N`: which writes were audited (stratified by conversation, simple random
  within each; a full scan audits every write and adds no error);
- phase 2, `review sample` or `meta.gold`: which audited writes carry a reference label (stratified
  by whatever the sample file records, simple random within each stratum).

The estimator is prediction-powered inference (Angelopoulos et al., Science 2023) in its
finite-population form, the difference estimator of survey sampling: the judge's rate over the
audited writes plus the judge's mean error on the labelled ones, each labelled write weighted by
the inverse of its chance of being labelled. It is unbiased for the store's rate whatever the
judge does. A rate over a subset (provenance-repaired: among the writes their citations do not
support) is a ratio of two such estimates, its variance by linearisation.

Why the interval holds when writes of one conversation are alike. The randomness the interval
accounts for is the draw of writes, which derivaudit makes write by write within strata; it does
not assume that writes are independent of each other, and conversation-balanced weights are fixed
numbers, so alike writes need no cluster correction. What it does not cover: other conversations
than the store's (for the writer's rate in general, the conversations would have to be the sample).
Gold labels that came with the log are taken as a simple random sample of the audited writes: when
they were chosen otherwise (only the hard cases), the correction is biased and the report says to
draw a review sample instead.

The interval. Normal, with a t quantile (degrees of freedom: labelled writes minus strata), the
finite-population correction (a store that is all labelled has no error left), and in every
stratum one pseudo-observation of each kind of disagreement and two of agreement (after Agresti and
Min, 2005, for paired proportions) in the variance estimate, so that 20 labels on which the judge
happened to be right do not give an interval of zero width; the variance of the mean still divides
by the real number of labels, since dividing by the pseudo-observations too made the interval too
narrow on small strata. Its coverage is measured by benchmarks/bench_ppi.py (docs/benchmarks.md).

`ppi_iid` is the textbook version (independent draws from an infinite population, normal
quantile, optional power tuning), computed as the reference implementation `ppi_py.ppi_mean_ci`
computes it; the tests hold the two to each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _stats

LEVEL = 0.95
PSEUDO = 1.0  # pseudo-observations per kind of disagreement, per stratum (twice that of agreement)


@dataclass(frozen=True)
class Estimate:
    """One rate: the judge's own, the corrected estimate with its interval, and what went into it."""

    judge: float | None
    value: float | None
    low: float | None
    high: float | None
    labels: int = 0  # reference labels used (in the rate's denominator or not)
    audited: int = 0  # writes the judge labelled
    method: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "corrected": self.value, "low": self.low, "high": self.high,
                "labels": self.labels, "audited": self.audited, "method": self.method}

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low


@dataclass
class Sample:
    """Everything about how the audited writes stand for the store and the labelled ones for the
    audited, per audited write (arrays of equal length, in one order).

    `weight`: the write's weight in the store's rate (conversation-balanced 1 / (C * M_c), or
    write-weighted 1 / M; M_c the store's writes in the write's conversation). `conversation`:
    phase-1 stratum; `store_size`: M_c per conversation (the audited count when not sampled).
    `labelled`: has a reference label; `stratum`: the phase-2 stratum of every audited write."""

    weight: np.ndarray
    conversation: np.ndarray
    store_size: Mapping[Any, int]
    labelled: np.ndarray
    stratum: np.ndarray
    sampled: bool = False  # phase 1 drew a sample (else every write of the store was audited)
    pseudo: float = PSEUDO

    @property
    def expansion(self) -> np.ndarray:
        """Each audited write's weight in the store: its own weight over its conversation's
        sampling fraction."""
        audited = Counter(self.conversation.tolist())
        return self.weight * np.array([self.store_size[c] / audited[c] for c in self.conversation])


def balanced_design(conversations: Sequence[Any], labelled: Sequence[bool], strata: Sequence[Any] | None = None,
                    store: Mapping[Any, int] | None = None, sampled: bool = False) -> Sample:
    """The conversation-balanced design of audited items (writes, operations) given each item's
    conversation: weight 1 / (C * M_c), M_c from `store` (the store's items per conversation; by
    default the audited ones, every item of the store audited), one phase-2 stratum unless given."""
    conv = np.array(list(conversations), dtype=object)
    sizes = dict(store) if store is not None else {}
    for c, n in Counter(conv.tolist()).items():  # an audited conversation the store does not list: its own count
        sizes.setdefault(c, n)
    weight = np.array([1.0 / (len(sizes) * sizes[c]) for c in conv.tolist()])
    st = np.array(list(strata) if strata is not None else ["all"] * len(conv), dtype=object)
    return Sample(weight, conv, sizes, np.asarray(labelled, dtype=bool), st, sampled=sampled)


def _stratum_var(values: np.ndarray, extra_values: Sequence[float], extra_weights: Sequence[float]) -> float:
    """The variance (ddof 1) of one draw from a stratum, estimated from its values and the
    pseudo-observations (`extra_values` with frequency `extra_weights`) that keep it off zero."""
    vals = np.concatenate([values, np.asarray(extra_values, dtype=float)])
    wts = np.concatenate([np.ones(len(values)), np.asarray(extra_weights, dtype=float)])
    total = float(wts.sum())
    if total <= 1:
        return 0.0
    m = float((vals * wts).sum() / total)
    return float((wts * (vals - m) ** 2).sum() / (total - 1))


def estimate(f_num: np.ndarray, f_den: np.ndarray, y_num: np.ndarray, y_den: np.ndarray, sample: Sample,
             level: float = LEVEL, judge: bool = True, lam: float | None = 1.0) -> Estimate:
    """The store's rate sum(w * num) / sum(w * den) from the judge's indicators (`f_*`, every
    audited write) and the reference indicators (`y_*`, read where `sample.labelled`). With
    `judge=False` the judge is left out: the classical estimate from the labelled writes alone
    (the same design, the same interval), the baseline PPI must beat."""
    f_num = np.asarray(f_num, dtype=float) if judge else np.zeros(len(sample.weight))
    f_den = np.asarray(f_den, dtype=float) if judge else np.zeros(len(sample.weight))
    a = sample.expansion
    f_rate = float((a * f_num).sum() / (a * f_den).sum()) if (a * f_den).sum() > 0 else None
    if judge and lam is None:
        lam = tuned_lambda(f_num, f_den, y_num, y_den, sample)
    if judge and lam != 1.0:
        scaled = estimate(lam * f_num, lam * f_den, y_num, y_den, sample, level, True, 1.0)
        return Estimate(f_rate, scaled.value, scaled.low, scaled.high, scaled.labels, scaled.audited,
                        f"{scaled.method}, power-tuned (lambda {lam:.2f})")
    y_num, y_den = np.nan_to_num(np.asarray(y_num, dtype=float)), np.nan_to_num(np.asarray(y_den, dtype=float))
    lab = np.asarray(sample.labelled, dtype=bool)
    n_lab = int(lab.sum())
    if not judge and n_lab == 0:
        return Estimate(None, None, None, None, 0, len(a), "no reference label")
    if n_lab == 0 and not sample.sampled:
        return Estimate(f_rate, None, None, None, 0, len(a), "uncorrected: every write audited, none labelled")
    strata = sample.stratum
    size = Counter(strata.tolist())
    lab_size = Counter(strata[lab].tolist())
    # rectifiers: the judge's error on the labelled writes, inverse-probability weighted (none: all zero)
    infl = np.array([size[h] / lab_size[h] if lab[i] else 0.0 for i, h in enumerate(strata.tolist())])
    big_a = (a * f_num).sum() + (infl * a * (y_num - f_num)).sum()
    big_b = (a * f_den).sum() + (infl * a * (y_den - f_den)).sum()
    if big_b <= 0:
        return Estimate(f_rate, None, None, None, n_lab, len(a), "no write in the rate's denominator")
    theta = float(big_a / big_b)
    z_f = a * (f_num - theta * f_den) / big_b  # linearised: the ratio's error is the mean error of z
    z_y = a * (y_num - theta * y_den) / big_b
    var2 = 0.0
    df_parts = []
    for h, n_h in lab_size.items():
        idx = lab & (strata == h)
        scale = float(a[idx].mean() / big_b)
        p = sample.pseudo
        v = _stratum_var((z_y - z_f)[idx], (scale, -scale, 0.0), (p, p, 2 * p))
        big_n = size[h]
        var2 += big_n**2 * (1 - n_h / big_n) * v / n_h
        df_parts.append(n_h - 1)
    var1 = 0.0
    if sample.sampled:
        # phase 1: the truth where it is known, the judge elsewhere (its error is phase 2's term)
        x = np.where(lab, z_y, z_f) / np.where(a > 0, a, 1) * sample.weight
        for c, n_c in Counter(sample.conversation.tolist()).items():
            idx = sample.conversation == c
            m_c = sample.store_size[c]
            scale = float(sample.weight[idx].mean() / big_b)
            p = sample.pseudo
            v = _stratum_var(x[idx], (scale * (1 - theta), -scale * theta), (p, p))
            var1 += m_c**2 * (1 - n_c / m_c) * v / n_c
            if not n_lab:
                df_parts.append(n_c - 1)
    df = max(1, sum(df_parts)) if df_parts else 1
    half = float(_stats.t.ppf(0.5 + level / 2, df)) * (var1 + var2) ** 0.5
    method = ("PPI difference estimator" if judge and n_lab else "labelled writes alone" if n_lab
              else "judge's rate on a random sample")
    return Estimate(f_rate, min(1.0, max(0.0, theta)), max(0.0, theta - half), min(1.0, theta + half), n_lab,
                    len(a), method)


def tuned_lambda(f_num: np.ndarray, f_den: np.ndarray, y_num: np.ndarray, y_den: np.ndarray,
                 sample: Sample) -> float:
    """The weight on the judge that minimises the rectifier's variance (PPI++, Angelopoulos, Duchi and
    Zrnic 2023): cov(truth, judge) / var(judge) over the labelled writes, on the linearised rate,
    clipped to [0, 1]; 1 where the labelled writes cannot tell (fewer than 3, or the judge constant
    on them)."""
    lab = np.asarray(sample.labelled, dtype=bool)
    if lab.sum() < 3:
        return 1.0
    a = sample.expansion
    first = estimate(f_num, f_den, y_num, y_den, sample)
    theta = first.value if first.value is not None else 0.0
    zf = (a * (np.asarray(f_num, float) - theta * np.asarray(f_den, float)))[lab]
    zy = (a * (np.nan_to_num(np.asarray(y_num, float)) - theta * np.nan_to_num(np.asarray(y_den, float))))[lab]
    var_f = float(np.var(zf, ddof=1))
    if var_f <= 0:
        return 1.0
    return float(np.clip(np.cov(zy, zf, ddof=1)[0, 1] / var_f, 0.0, 1.0))


def labels_to_halve(labelled: int, audited: int) -> int | None:
    """About how many labelled writes in all would halve an interval that `labelled` of `audited`
    writes give: the phase-2 variance goes as (1/n - 1/N), so halving the width asks
    1/n' = (1/n - 1/N) / 4 + 1/N. None when even labelling every audited write would not (the
    remaining width is the sample's) or nothing is labelled."""
    if labelled <= 0 or audited <= labelled:
        return None
    need = 1 / ((1 / labelled - 1 / audited) / 4 + 1 / audited)
    return min(audited, int(np.ceil(need)))


def ppi_iid(y: Sequence[float], yhat: Sequence[float], yhat_unlabeled: Sequence[float], level: float = LEVEL,
            lam: float | None = 1.0, w: Sequence[float] | None = None,
            w_unlabeled: Sequence[float] | None = None) -> tuple[float, float, float]:
    """The textbook prediction-powered mean with its normal interval, for independent draws from an
    infinite population, computed as `ppi_py.ppi_mean_ci` (version 0.2) computes it: weights scaled
    to their count, population standard deviations, `lam` = None for its power tuning (clipped to
    [0, 1]). Returns (estimate, low, high)."""
    y, yh, yu = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_unlabeled))
    n, big_n = len(y), len(yu)
    w_l = np.ones(n) if w is None else np.asarray(w, dtype=float) / np.sum(w) * n
    w_u = np.ones(big_n) if w_unlabeled is None else np.asarray(w_unlabeled, dtype=float) / np.sum(w_unlabeled) * big_n
    if lam is None:
        first = (w_u * yu).mean() + (w_l * (y - yh)).mean()
        g, gh, ghu = w_l * (y - first), w_l * (yh - first), w_u * (yu - first)
        cov = 2 * ((g - g.mean()) * (gh - gh.mean())).sum() / n
        var_hat = np.var(np.concatenate([gh, ghu]), ddof=1)
        lam = float(np.clip(cov / (2 * (1 + n / big_n) * var_hat), 0, 1)) if var_hat > 0 else 0.0
    est = float((w_u * lam * yu).mean() + (w_l * (y - lam * yh)).mean())
    imputed = (w_u * lam * yu).std() / np.sqrt(big_n)
    rectifier = (w_l * (y - lam * yh)).std() / np.sqrt(n)
    se = float(np.sqrt(imputed**2 + rectifier**2))
    z = float(_stats.norm.ppf(0.5 + level / 2))
    return est, est - z * se, est + z * se
