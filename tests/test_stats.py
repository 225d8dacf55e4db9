"""Conversation-balanced and write-weighted rates and the cluster bootstrap, checked by hand."""

import math

import numpy as np
import pytest

from derivaudit.stats import balanced_resamples, cluster_bootstrap_ci, cohen_kappa, percentile_interval, rates


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
    # provenance_repaired: denominator = writes their citations do not support (gold.provenance_repaired):
    # a 1 of 3, b 0 of 1 (citation-only ambiguous) -> balanced (1/3 + 0) / 2
    assert math.isclose(r["provenance_repaired"]["balanced"], 1 / 6)
    assert r["provenance_repaired"]["n_conversations"] == 2 and r["provenance_repaired"]["n_writes"] == 4
    # unsupported vs unresolved split by search_limited
    assert r["unsupported"]["weighted"] == 1 / 6 and r["unresolved"]["weighted"] == 1 / 6
    assert r["multi_passage"]["weighted"] == 1 / 3
    assert r["contradicted"]["balanced"] == 0.25


def test_no_rows_gives_none():
    assert rates([])["expanded_supported"] == {"balanced": None, "weighted": None, "difference": None,
                                               "n_writes": 0, "n_conversations": 0}


def test_bootstrap_is_seeded_and_needs_two_conversations():
    a = cluster_bootstrap_ci(ROWS, reps=200, seed=1)
    assert a == cluster_bootstrap_ci(ROWS, reps=200, seed=1)
    lo, hi = a["expanded_supported"]
    assert 0.5 <= lo <= hi <= 0.5  # both conversations have rate 0.5: every resample says 0.5
    one = cluster_bootstrap_ci([r for r in ROWS if r["conversation_id"] == "a"])
    assert one["expanded_supported"] == (None, None)


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
