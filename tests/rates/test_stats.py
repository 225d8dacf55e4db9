"""Conversation-balanced and write-weighted rates and their intervals, checked by hand."""

import math

import numpy as np
import pytest
from scipy import stats as st

from derivaudit.rates.stats import (
    balanced_interval,
    balanced_resamples,
    cohen_kappa,
    paired_interval,
    percentile_interval,
    rates,
)


def _row(conv, cit, exp, limited=False, multi=False):
    return {"conversation_id": conv, "citation_label": cit, "expanded_label": exp, "search_limited": limited,
            "multi_passage": multi}


ROWS = [_row("a", "supported", "supported"), _row("a", "unsupported", "supported", multi=True),
        _row("a", "unsupported", "unsupported"), _row("a", "unsupported", "unsupported", limited=True),
        _row("b", "supported", "supported"), _row("b", "ambiguous", "contradicted")]


def test_balanced_and_weighted_by_hand():
    r = rates(ROWS)
    # expanded_supported: a 2/4, b 1/2 -> balanced 0.5, weighted 3/6
    assert r["expanded_supported"]["balanced"] == 0.5 and r["expanded_supported"]["weighted"] == 0.5
    # citation_supported: a 1/4, b 1/2 -> balanced 0.375, weighted 2/6
    assert math.isclose(r["citation_supported"]["balanced"], 0.375)
    assert math.isclose(r["citation_supported"]["weighted"], 2 / 6)
    assert math.isclose(r["citation_supported"]["difference"], 2 / 6 - 0.375)
    # provenance_repaired (DerivAudit §3.1): denominator = writes their citations leave insufficient
    # (citation-only unsupported): a 1 of 3; b has none (its citation-only label is ambiguous)
    assert math.isclose(r["provenance_repaired"]["balanced"], 1 / 3)
    assert r["provenance_repaired"]["n_conversations"] == 1 and r["provenance_repaired"]["n_writes"] == 3
    # the other citation labels are counted apart: b 0 of 1
    assert r["provenance_repaired_other"]["balanced"] == 0.0 and r["provenance_repaired_other"]["n_writes"] == 1
    # unsupported vs unresolved split by search_limited
    assert r["unsupported"]["weighted"] == 1 / 6 and r["unresolved"]["weighted"] == 1 / 6
    assert r["multi_passage"]["weighted"] == 1 / 3
    assert r["contradicted"]["balanced"] == 0.25


def test_no_rows_gives_none():
    assert rates([])["expanded_supported"] == {"balanced": None, "weighted": None, "difference": None,
                                               "n_writes": 0, "n_conversations": 0}


def test_two_conversations_that_agree_do_not_give_a_zero_width_interval():
    # both conversations at 2 of 4: the between-conversation variance is 0, the within one is not
    lo, hi = balanced_interval([2, 2], [4, 4])
    adj = 3 / 6
    within = 2 * adj * (1 - adj) / 6 / 4
    half = st.t.ppf(0.975, 1) * within**0.5
    assert (lo, hi) == (pytest.approx(max(0.0, 0.5 - half)), pytest.approx(min(1.0, 0.5 + half)))
    assert hi - lo > 0.5


def test_balanced_interval_by_hand():
    hits, n = [1, 3, 5, 0], [10, 10, 10, 5]
    rate = np.array([0.1, 0.3, 0.5, 0.0])
    between = rate.var(ddof=1) / 4
    lo, hi = balanced_interval(hits, n)
    half = st.t.ppf(0.975, 3) * between**0.5
    assert lo == pytest.approx(max(0.0, rate.mean() - half)) and hi == pytest.approx(rate.mean() + half)
    assert balanced_interval([0, 1], [0, 0]) == (None, None)
    one = balanced_interval([3], [10])
    assert one[0] < 0.3 < one[1]


def test_paired_interval_by_hand():
    # two conversations: differences +0.2 (10 pairs, 2 discordant) and +0.4 (5 pairs, 2 discordant)
    lo, hi = paired_interval([0.2, 0.4], [10, 5], [2, 2])
    between = np.var([0.2, 0.4], ddof=1) / 2
    within = (((3 / 12) - 0.04) / 12 + ((3 / 7) - 0.16) / 7) / 4
    half = st.t.ppf(0.975, 1) * max(between, within) ** 0.5
    assert lo == pytest.approx(max(-1.0, 0.3 - half)) and hi == pytest.approx(min(1.0, 0.3 + half))


def test_resamples_skip_groups_without_a_denominator():
    hits, n = np.array([1.0, 0.0]), np.array([2.0, 0.0])
    draws = np.array([[0, 0], [1, 1], [0, 1]])
    out = balanced_resamples(hits, n, draws)
    assert out[0] == 0.5 and np.isnan(out[1]) and out[2] == 0.5
    assert percentile_interval(out) == (0.5, 0.5)
    assert percentile_interval(np.array([np.nan])) == (None, None)


def test_kappa():
    assert cohen_kappa([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(0.5)
    assert cohen_kappa([], []) is None
