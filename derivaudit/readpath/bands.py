"""Is memory most harmful at partial query–memory overlap? The MemTrim paper's test (§2, Fig. 3):
the memory effect ΔAcc = Acc(with memory) − Acc(without), read by overlap, tested for a
non-monotonic trend with a quadratic term and with Simonsohn's (2018) two-lines test.

Per read, y = correct(with memory) − correct(without) ∈ {−1, 0, 1} at x = the read's overlap.
- bands: accuracy with and without memory (Wilson intervals) and mean y (bootstrap interval) in
  each overlap band;
- quadratic: y = b0 + b1·x + b2·x², b2's t test (a dip in the middle is b2 > 0);
- two lines: split at the fitted quadratic's vertex (kept inside the observed range), a separate
  least-squares line on each side (`scipy.stats.linregress`); a dip in the middle when the low
  side's slope is negative and the high side's positive, both significant at `alpha` (two-sided).
  Simonsohn chooses the break by his Robin Hood rule; the vertex is the simpler rule he starts from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from .intervals import mean_interval, wilson

ALPHA = 0.05
MIN_SIDE = 3  # points a side needs for its line's test


def band_of(x: float, band: tuple[float, float]) -> str:
    return "low" if x < band[0] else "middle" if x < band[1] else "high"


def by_band(xs: Sequence[float], mem: Sequence[bool], none: Sequence[bool], band: tuple[float, float]
            ) -> dict[str, dict[str, Any]]:
    out = {}
    for b in ("low", "middle", "high"):
        ix = [i for i, x in enumerate(xs) if band_of(x, band) == b]
        n = len(ix)
        hm, hn = sum(bool(mem[i]) for i in ix), sum(bool(none[i]) for i in ix)
        y = [int(mem[i]) - int(none[i]) for i in ix]
        out[b] = {"reads": n, "accuracy": hm / n if n else None, "accuracy_ci": list(wilson(hm, n)),
                  "accuracy_without": hn / n if n else None, "accuracy_without_ci": list(wilson(hn, n)),
                  "delta": float(np.mean(y)) if n else None, "delta_ci": list(mean_interval(y))}
    return out


def quadratic(xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any] | None:
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if len(x) < 4 or len(set(x.tolist())) < 3:
        return None
    coef, cov = np.polyfit(x, y, 2, cov="unscaled")
    resid = y - np.polyval(coef, x)
    dof = len(x) - 3
    s2 = float(resid @ resid) / dof
    se = float(np.sqrt(cov[0, 0] * s2))
    b2 = float(coef[0])
    if se == 0:
        return {"b2": b2, "se": 0.0, "t": None, "p": None, "vertex": None}
    t = b2 / se
    vertex = float(-coef[1] / (2 * coef[0])) if coef[0] else None
    return {"b2": b2, "se": se, "t": t, "p": float(2 * stats.t.sf(abs(t), dof)), "vertex": vertex}


def two_lines(xs: Sequence[float], ys: Sequence[float], alpha: float = ALPHA) -> dict[str, Any] | None:
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    q = quadratic(xs, ys)
    if q is None:
        return None
    lo, hi = float(x.min()), float(x.max())
    brk = q["vertex"] if q["vertex"] is not None and lo < q["vertex"] < hi else float(np.median(x))
    sides = {}
    for name, keep in (("low", x < brk), ("high", x >= brk)):
        xs_, ys_ = x[keep], y[keep]
        if len(xs_) < MIN_SIDE or len(set(xs_.tolist())) < 2:
            sides[name] = None
            continue
        r = stats.linregress(xs_, ys_)
        sides[name] = {"reads": int(len(xs_)), "slope": float(r.slope),
                       "p": None if np.isnan(r.pvalue) else float(r.pvalue)}
    low, high = sides["low"], sides["high"]
    dip = bool(low and high and low["p"] is not None and high["p"] is not None and low["slope"] < 0 < high["slope"]
               and low["p"] < alpha and high["p"] < alpha)
    return {"break": brk, "low": low, "high": high, "dip": dip, "alpha": alpha}


def peak_test(xs: Sequence[float], mem: Sequence[bool], none: Sequence[bool], band: tuple[float, float]
              ) -> dict[str, Any]:
    """Bands, the quadratic and the two-lines test of the memory effect over overlap."""
    ys = [int(a) - int(b) for a, b in zip(mem, none, strict=True)]
    return {"reads": len(xs), "bands": by_band(xs, mem, none, band), "quadratic": quadratic(xs, ys),
            "two_lines": two_lines(xs, ys)}
