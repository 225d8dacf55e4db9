"""The memory effect by overlap band and the tests of a dip in the middle (quadratic, two lines),
against scipy's own fits computed another way."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from derivaudit.readpath.bands import by_band, peak_test, quadratic, two_lines


def dip(n=60, seed=1):
    """Memory hurts most at middle overlap: P(y = -1) peaks at 0.45."""
    rng = np.random.default_rng(seed)
    xs = rng.uniform(0, 0.9, n)
    ys = [-1 if rng.random() < 0.9 * np.exp(-((x - 0.45) / 0.15) ** 2) else 0 for x in xs]
    return xs.tolist(), ys


def test_the_quadratic_term_and_its_p_value_match_a_least_squares_fit():
    xs, ys = dip()
    q = quadratic(xs, ys)
    popt, pcov = optimize.curve_fit(lambda x, a, b, c: a * x**2 + b * x + c, np.array(xs), np.array(ys, float))
    assert q["b2"] == pytest.approx(popt[0], rel=1e-6) and q["se"] == pytest.approx(np.sqrt(pcov[0, 0]), rel=1e-4)
    assert q["p"] == pytest.approx(2 * stats.t.sf(abs(popt[0] / np.sqrt(pcov[0, 0])), len(xs) - 3), rel=1e-3)
    assert q["b2"] > 0 and q["p"] < 0.05 and 0.3 < q["vertex"] < 0.6


def test_two_lines_finds_the_dip_and_not_a_straight_trend():
    xs, ys = dip()
    t = two_lines(xs, ys)
    assert t["dip"] and t["low"]["slope"] < 0 < t["high"]["slope"]
    below = [(x, y) for x, y in zip(xs, ys, strict=True) if x < t["break"]]
    r = stats.linregress(*zip(*below, strict=True))
    assert t["low"]["slope"] == pytest.approx(r.slope) and t["low"]["p"] == pytest.approx(r.pvalue)
    rng = np.random.default_rng(2)
    xs2 = rng.uniform(0, 1, 60).tolist()
    ys2 = [-1 if rng.random() < x else 0 for x in xs2]  # harm grows with overlap: no dip
    assert not two_lines(xs2, ys2)["dip"]


def test_bands_count_reads_and_give_wilson_intervals():
    xs = [0.1, 0.3, 0.4, 0.5, 0.7]
    mem = [True, False, False, True, True]
    none = [True, True, True, True, False]
    b = by_band(xs, mem, none, (0.2, 0.6))
    assert [b[k]["reads"] for k in ("low", "middle", "high")] == [1, 3, 1]
    assert b["middle"]["accuracy"] == pytest.approx(1 / 3) and b["middle"]["delta"] == pytest.approx(-2 / 3)
    ci = stats.binomtest(1, 3).proportion_ci(method="wilson")
    assert b["middle"]["accuracy_ci"] == pytest.approx([ci.low, ci.high])
    assert peak_test(xs, mem, none, (0.2, 0.6))["quadratic"] is not None
    assert quadratic([0.1, 0.2, 0.3], [0, 1, 0]) is None  # too few reads for a t test
