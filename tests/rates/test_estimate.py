"""The corrected-rate estimator: against a hand computation, against ppi_py, and its intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from derivaudit.rates.estimate import Sample, balanced_design, estimate, labels_to_halve, ppi_iid, tuned_lambda


def _design(conv: list[str], labelled: list[bool], strata: list[str] | None = None, store: dict | None = None,
            sampled: bool = False) -> Sample:
    return balanced_design(conv, labelled, strata, store, sampled)


def test_difference_estimator_by_hand():
    # two conversations of 10 writes; the judge's unsupported calls, and gold on 12 of the writes
    conv = ["a"] * 10 + ["b"] * 10
    f = np.array([1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0], dtype=float)
    y = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0], dtype=float)
    lab = [True] * 6 + [False] * 4 + [True] * 6 + [False] * 4
    ones = np.ones(20)
    # lam=1: the plain difference estimator
    est = estimate(f, ones, y, ones, _design(conv, lab), lam=1.0)
    w = 1 / 20  # conversation-balanced: 1 / (2 conversations x 10 writes)
    judge = (2 / 10 + 2 / 10) / 2
    d = 20 * w * (y - f)[np.array(lab)]  # the labelled writes' errors, scaled to the store
    assert est.judge == pytest.approx(judge)
    assert est.value == pytest.approx(judge + d.mean())
    # the variance: the errors with pseudo-observations +1, -1 (one each) and 0 (two), ddof 1, over the
    # 12 real labels, with the finite-population correction 1 - 12/20 and a t quantile with 11 df
    vals = np.concatenate([d, [1.0, -1.0, 0.0]])
    wts = np.concatenate([np.ones(12), [1.0, 1.0, 2.0]])
    m = (vals * wts).sum() / wts.sum()
    var = (wts * (vals - m) ** 2).sum() / (wts.sum() - 1)
    half = stats.t.ppf(0.975, 11) * np.sqrt((1 - 12 / 20) * var / 12)
    assert est.low == pytest.approx(est.value - half) and est.high == pytest.approx(est.value + half)
    assert 0 < est.low < est.value < est.high < 1
    assert est.labels == 12 and est.audited == 20


def test_every_write_labelled_is_exact():
    conv = ["a"] * 3 + ["b"] * 5
    f = np.array([1, 0, 1, 0, 0, 1, 1, 0], dtype=float)
    y = np.array([1, 1, 0, 0, 0, 1, 0, 0], dtype=float)
    ones = np.ones(8)
    est = estimate(f, ones, y, ones, _design(conv, [True] * 8))
    truth = (2 / 3 + 1 / 5) / 2
    assert est.value == pytest.approx(truth)
    assert est.low == pytest.approx(truth) and est.high == pytest.approx(truth)


def test_no_label_and_no_sample_gives_no_interval():
    conv = ["a"] * 4
    f = np.array([1, 0, 0, 0], dtype=float)
    est = estimate(f, np.ones(4), f, np.ones(4), _design(conv, [False] * 4))
    assert est.judge == pytest.approx(0.25)
    assert est.value is None and est.low is None
    assert "uncorrected" in est.method


def test_the_classical_estimate_ignores_the_judge():
    rng = np.random.default_rng(1)
    conv = [f"c{i % 3}" for i in range(30)]
    y = (rng.random(30) < 0.3).astype(float)
    lab = list(rng.random(30) < 0.5)
    ones = np.ones(30)
    a = estimate(rng.random(30).round(), ones, y, ones, _design(conv, lab), judge=False)
    b = estimate(np.zeros(30), ones, y, ones, _design(conv, lab), judge=False)
    assert (a.value, a.low, a.high) == (b.value, b.low, b.high)


def test_fewer_labels_give_wider_intervals():
    rng = np.random.default_rng(2)
    n_all = 120
    conv = [f"c{i % 6}" for i in range(n_all)]
    y = (rng.random(n_all) < 0.3).astype(float)
    f = np.where(rng.random(n_all) < 0.8, y, 1 - y)
    ones = np.ones(n_all)
    mean_width = {}
    for n in (10, 20, 40, 80):
        widths = []
        for _ in range(200):
            lab = np.zeros(n_all, dtype=bool)
            lab[rng.choice(n_all, n, replace=False)] = True
            widths.append(estimate(f, ones, y, ones, _design(conv, list(lab)), lam=None).width)
        mean_width[n] = float(np.mean(widths))
    assert mean_width[10] > mean_width[20] > mean_width[40] > mean_width[80]


def test_an_informative_judge_narrows_the_interval():
    rng = np.random.default_rng(3)
    n_all = 200
    conv = [f"c{i % 4}" for i in range(n_all)]
    y = (rng.random(n_all) < 0.4).astype(float)
    f = np.where(rng.random(n_all) < 0.95, y, 1 - y)
    ones = np.ones(n_all)
    ppi, classical = [], []
    for _ in range(100):
        lab = np.zeros(n_all, dtype=bool)
        lab[rng.choice(n_all, 40, replace=False)] = True
        d = _design(conv, list(lab))
        ppi.append(estimate(f, ones, y, ones, d, lam=None).width)
        classical.append(estimate(f, ones, y, ones, d, judge=False).width)
    assert np.mean(ppi) < 0.8 * np.mean(classical)


def test_a_stratified_design_weights_each_stratum_by_its_inclusion_probability():
    # stratum s1: 6 writes, 2 labelled; s2: 2 writes, both labelled (one conversation)
    conv = ["a"] * 8
    strata = ["s1"] * 6 + ["s2"] * 2
    lab = [True, True, False, False, False, False, True, True]
    f = np.array([0, 0, 0, 0, 0, 0, 1, 1], dtype=float)
    y = np.array([1, 0, 0, 0, 0, 0, 1, 0], dtype=float)
    ones = np.ones(8)
    est = estimate(f, ones, y, ones, _design(conv, lab, strata))
    # judge 2/8; rectifier: s1 expands its labelled error (1 + 0) by 6/2, s2 by 2/2
    assert est.value == pytest.approx(2 / 8 + (3 * 1 + 1 * (0 - 1)) / 8)


def test_a_sampled_scan_has_a_sampling_interval_that_shrinks_with_the_sample():
    rng = np.random.default_rng(4)
    store = {"a": 300, "b": 200}
    widths = []
    for n in (20, 80):
        conv = ["a"] * (n * 3 // 5) + ["b"] * (n * 2 // 5)
        f = (rng.random(len(conv)) < 0.3).astype(float)
        est = estimate(f, np.ones(len(conv)), f, np.ones(len(conv)),
                       _design(conv, [False] * len(conv), store=store, sampled=True))
        assert est.low < est.judge < est.high
        widths.append(est.width)
    assert widths[0] > widths[1]


def test_a_ratio_rate_is_a_ratio_of_estimates():
    conv = ["a"] * 6
    num_f = np.array([1, 0, 1, 0, 0, 0], dtype=float)
    den_f = np.array([1, 1, 1, 0, 0, 1], dtype=float)
    est = estimate(num_f, den_f, num_f, den_f, _design(conv, [True] * 6))
    assert est.value == pytest.approx(2 / 4)


def test_labels_to_halve():
    assert labels_to_halve(20, 60) == 40  # 1/n' = (1/20 - 1/60)/4 + 1/60
    assert labels_to_halve(10, 10_000) == pytest.approx(40, abs=1)
    assert labels_to_halve(0, 100) is None and labels_to_halve(50, 50) is None


def test_power_tuning_is_zero_for_a_judge_that_says_nothing_and_near_one_for_a_perfect_one():
    rng = np.random.default_rng(5)
    conv = [f"c{i % 2}" for i in range(60)]
    y = (rng.random(60) < 0.5).astype(float)
    ones = np.ones(60)
    noise = (rng.random(60) < 0.5).astype(float)
    assert tuned_lambda(noise, ones, y, ones, _design(conv, [True] * 30 + [False] * 30)) < 0.35
    assert tuned_lambda(y, ones, y, ones, _design(conv, [True] * 30 + [False] * 30)) == pytest.approx(1.0)


@pytest.mark.parametrize("lam", [1.0, 0.5, None])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_textbook_interval_is_ppi_py_s(lam, weighted):
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python is in the dev extra")
    rng = np.random.default_rng(6)
    y = (rng.random(40) < 0.3).astype(float)
    yhat = np.where(rng.random(40) < 0.8, y, 1 - y)
    yu = (rng.random(300) < 0.35).astype(float)
    w = rng.random(40) + 0.5 if weighted else None
    wu = rng.random(300) + 0.5 if weighted else None
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yu, alpha=0.05, lam=lam, w=w, w_unlabeled=wu)
    est = ppi_py.ppi_mean_pointestimate(y, yhat, yu, lam=lam, w=w, w_unlabeled=wu)
    mine = ppi_iid(y, yhat, yu, lam=lam, w=w, w_unlabeled=wu)
    assert mine[0] == pytest.approx(float(np.ravel(est)[0]))
    assert mine[1] == pytest.approx(float(np.ravel(lo)[0]))
    assert mine[2] == pytest.approx(float(np.ravel(hi)[0]))
