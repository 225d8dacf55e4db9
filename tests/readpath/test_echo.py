"""Echo metrics against hand computations on fixtures/echo.jsonl: one family ('keto': w1, its rewrites
w2 -> w3 -> w7, and w4 re-extracted from the same source), two other families, a verified
correction c1 (parent w1, at turn 20) with a consolidation c2, 2 reads before it and 30 after."""

from __future__ import annotations

import math

import pytest

from derivaudit import load_log
from derivaudit.readpath.echo import audit_echo, lineage_families

W = [1 / math.log2(r + 1) for r in range(1, 6)]  # slot weights, ranks 1..5
S = sum(W)
OLD = {"w1", "w2", "w3", "w4", "w7"}
NEW = {"c1", "c2"}
A = ["w2", "c1", "w3", "w5", "w7"]  # the reads at even turns 22..50 (15)
B = ["c1", "w6", "w5", "w1", "w4"]  # at odd turns 21..49 (15)


def share(ids, hit):
    return sum(w for w, i in zip(W, ids, strict=False) if i in hit) / sum(W[: len(ids)])


@pytest.fixture
def log(fixtures):
    return load_log(fixtures / "echo.jsonl")


def test_families_follow_ancestry_not_wording(log):
    fam = lineage_families(log.writes)
    assert {w for w, f in fam.items() if f == "keto"} == OLD | NEW  # c1 and c2 descend from w1
    assert fam["w5"] == "running" and fam["w6"] == "shoes"


def test_echo_metrics_equal_hand_computation(log):
    res = audit_echo(log, serve="fpa")
    m = res.metrics
    ed_a, ed_b = share(A, OLD), share(B, OLD)
    assert ed_a == pytest.approx((W[0] + W[2] + W[4]) / S) and ed_b == pytest.approx((W[3] + W[4]) / S)
    assert m["echo.density"] == pytest.approx((ed_a + ed_b) / 2)
    pre = [share(["w1", "w2", "w5", "w3", "w6"], OLD), share(["w4", "w5", "w1", "w6", "w2"], OLD)]
    assert m["echo.density_pre"] == pytest.approx(sum(pre) / 2)
    rri_a = (W[0] + W[2] + W[4]) / (W[0] + W[2] + W[4] + W[1])
    rri_b = (W[3] + W[4]) / (W[3] + W[4] + W[0])
    assert m["echo.rri"] == pytest.approx((rri_a + rri_b) / 2)
    assert m["echo.wep"] == pytest.approx((ed_a + ed_b) / 2)  # the window holds all 30 reads
    assert m["echo.rri_storage"] == pytest.approx(4 / 6)  # w1 is marked invalid; c1, c2 valid
    # excess: slots whose family already holds a higher slot (c1 is in the keto family)
    ex = {"A": (W[1] + W[2] + W[4]) / S, "B": (W[3] + W[4]) / S,
          "r1": (W[1] + W[3]) / S, "r2": (W[2] + W[4]) / S}
    assert m["echo.excess"] == pytest.approx((15 * ex["A"] + 15 * ex["B"] + ex["r1"] + ex["r2"]) / 32)
    assert (m["echo.families"], m["echo.max_multiplicity"], m["echo.corrections"]) == (3, 7, 1)
    # FPA: old records ineligible after c1, invalid w1/w6 never, the correction first, one per family
    reads = {r["read_id"]: r for r in res.reads}
    assert reads["r3"]["fpa"] == ["c1", "w5"] and reads["r4"]["fpa"] == ["c1", "w5"]
    assert reads["r1"]["fpa"] == ["w2", "w5"] and reads["r2"]["fpa"] == ["w4", "w5"]
    assert m["echo.density.fpa"] == 0 and m["echo.rri.fpa"] == 0 and m["echo.excess.fpa"] == 0
    assert m["echo.density_pre.fpa"] == pytest.approx(1 / (1 + W[1]))
    row = res.corrections[0]
    assert (row["write_id"], row["supersedes"], row["reads_before"], row["reads_after"]) == ("c1", ["keto"], 2, 30)
    assert set(row["old"]) == OLD and set(row["new"]) == NEW


def test_the_window_takes_the_first_reads_after_the_correction(log):
    m = audit_echo(log, window=11).metrics  # turns 21..31: six B reads, five A reads
    assert m["echo.wep"] == pytest.approx((6 * share(B, OLD) + 5 * share(A, OLD)) / 11)
