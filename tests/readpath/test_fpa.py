"""FPA's rules (the Memory Echo paper §5.1, App. E) on crafted pools, one test per rule."""

from __future__ import annotations

import pytest

from derivaudit import load_log
from derivaudit.log.records import Write
from derivaudit.readpath.fpa import conflicting, depths, relevance, serve_fpa, served_by_fpa


def w(wid: str, text: str = "", **kw) -> Write:
    return Write(write_id=wid, conversation_id="c", text=text or wid, citations=(), last_seen_turn="t0", **kw)


def ids(ws):
    return [x.write_id for x in ws]


def test_the_family_position_goes_to_its_highest_scoring_eligible_record():
    a, b, other = w("a"), w("b"), w("x")
    fam = {"a": "f", "b": "f", "x": "g"}
    # a ranks first but was served by three earlier reads: 1/(1+3) = 0.25 < b's relevance(2) = 0.5
    assert relevance(0) / 4 < relevance(2)
    assert ids(serve_fpa([a, other, b], fam, set(), exposures={"a": 3})) == ["b", "x"]  # b takes f's first slot
    assert ids(serve_fpa([a, other, b], fam, set())) == ["a", "x"]  # no exposure: the better rank wins


def test_repeated_writes_lower_a_records_score():
    root, d1, d2, d3 = w("r"), w("d1", parent_id="r"), w("d2", parent_id="d1"), w("d3", parent_id="d2")
    depth = depths([root, d1, d2, d3])
    assert depth == {"r": 0, "d1": 1, "d2": 2, "d3": 3}
    fam = dict.fromkeys(depth, "f")
    # the third rewrite ranks first, the original second: relevance(0)/4 = 0.25 < relevance(1) = 0.63
    assert ids(serve_fpa([d3, root], fam, set(), depth=depth)) == ["r"]
    assert ids(serve_fpa([d1, root], fam, set(), depth=depth)) == ["r"]  # 1/2 < 0.63 too
    assert ids(serve_fpa([root, d1], fam, set(), depth=depth)) == ["r"]


def test_verified_corrections_are_served_first_and_invalid_records_never():
    old, cor, x, bad = w("o"), w("c", verified_correction=True), w("x"), w("v", valid=False)
    fam = {"o": "f", "c": "new", "x": "g", "v": "h"}
    assert ids(serve_fpa([bad, x, old, cor], fam, set())) == ["c", "x", "o"]
    assert ids(serve_fpa([bad, x, old, cor], fam, {"o"}, k=1)) == ["c"]


def test_only_records_that_conflict_with_a_correction_lose_eligibility(fixtures):
    log = load_log(fixtures / "echo_answers.jsonl")
    by_id = {x.write_id: x for x in log.writes}
    keto = lambda rec, cor: "keto" in rec.text  # noqa: E731 - a judge that reads the claim's words
    lost = conflicting([by_id[i] for i in ("w1", "w2", "w3", "w4", "w7")], by_id["c1"], keto)
    assert lost == {"w1", "w2", "w3", "w7"}  # w4 (the marathon, same source) does not conflict
    served = {r: ids(v) for r, v in served_by_fpa(log, conflicts=keto).items()}
    # r3 asks about the marathon: the source's nonconflicting record keeps the family's slot
    assert served["r3"] == ["c1", "w4", "w5"]
    # without a judge every record of the superseded family is taken as conflicting
    assert ids(served_by_fpa(log)["r3"]) == ["c1", "w5"]
    # before the correction nothing is ineligible: w2 ranks first but is a rewrite (0.5), the original
    # w1 scores relevance(1) = 0.63 and takes the keto family's first slot
    assert served["r1"] == ["w1", "w5"]


def test_exposures_count_earlier_reads_of_the_conversation(fixtures):
    from derivaudit.readpath.provenance import exposures

    log = load_log(fixtures / "echo_answers.jsonl")
    seen = exposures(log, k=5)
    assert seen["r1"] == {}
    assert seen["r2"]["w2"] == 1 and seen["r2"]["w4"] == 1  # r1 served w2, w1, w3, w5, w4
    assert seen["r3"]["w7"] == 1  # r2 (same point, earlier in the log) served w7


@pytest.mark.parametrize("k", [1, 2])
def test_at_most_k_records(k):
    ws = [w(f"x{i}") for i in range(4)]
    assert len(serve_fpa(ws, {x.write_id: x.write_id for x in ws}, set(), k=k)) == k
