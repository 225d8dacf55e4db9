"""The label rule (DerivAudit, App. B), whole table, and the memory precedence."""

from __future__ import annotations

import itertools

import pytest

from derivaudit.audit.labels import carry_across_views, memory_label, obligation_label


@pytest.mark.parametrize(("d", "e", "r", "label"), [
    (False, e, r, "ambiguous") for e, r in itertools.product([True, False], repeat=2)
] + [
    (True, True, False, "supported"),
    (True, False, True, "contradicted"),
    (True, False, False, "insufficient"),
    (True, True, True, "ambiguous"),
    (None, True, False, "ambiguous"),
    (True, None, False, "ambiguous"),
    (True, True, None, "ambiguous"),
])
def test_obligation_label_table(d, e, r, label):
    assert obligation_label(d, e, r) == label


@pytest.mark.parametrize(("labels", "memory"), [
    (["supported", "supported"], "supported"),
    (["supported", "ambiguous"], "ambiguous"),
    (["supported", "ambiguous", "insufficient"], "unsupported"),
    (["insufficient", "contradicted", "ambiguous"], "contradicted"),
    (["contradicted"], "contradicted"),
    (["insufficient"], "unsupported"),
    (["ambiguous", "insufficient"], "unsupported"),
])
def test_memory_label_precedence(labels, memory):
    assert memory_label(labels) == memory


def test_memory_label_needs_obligations():
    with pytest.raises(ValueError):
        memory_label([])


def _row(view, passages, e=False, r=False, e_subset=(), r_subset=(), adjudicated=False):
    prim = {"d": True, "e": e, "r": r, "e_subset": list(e_subset), "r_subset": list(r_subset)}
    other = {**prim, "e": not e}  # A's answer differs where the adjudicator decided
    return {"obligation_id": "w1#o1", "view": view, "passages": list(passages),
            "A": other if adjudicated else prim, "adjudicator": prim if adjudicated else None,
            "label": obligation_label(True, e, r)}


def test_a_checked_citation_subset_answers_the_expanded_view_when_e_is_carried_too():
    cit = _row("citation_only", ["t3"], e=True, e_subset=[1])
    exp = _row("expanded", ["t1", "t3", "t5"])  # the judge lost t3 among more passages
    assert carry_across_views([cit, exp]) == [cit, exp]  # by default only refutations are carried
    out = carry_across_views([cit, exp], which=("e", "r"))
    assert out[0] == cit  # nothing to take
    assert out[1]["label"] == "supported" and out[1]["label_own"] == "insufficient"
    assert out[1]["carried"] == {"e": {"from": "citation_only", "passages": ["t3"]}}
    assert carry_across_views(out, which=("e", "r")) == out  # idempotent: label_own stays the view's own


def test_an_expanded_subset_of_cited_turns_answers_the_citation_view_but_an_uncited_one_does_not():
    exp = _row("expanded", ["t1", "t3", "t5"], r=True, r_subset=[2], adjudicated=True)
    cit = _row("citation_only", ["t3"])
    assert carry_across_views([cit, exp])[0]["label"] == "contradicted"  # t3 is cited
    exp_uncited = _row("expanded", ["t1", "t3", "t5"], e=True, e_subset=[1, 2])
    out = carry_across_views([cit, exp_uncited], which=("e", "r"))
    assert out[0]["label"] == "insufficient" and "carried" not in out[0]  # t1 is not in the citation view


def test_a_yes_without_a_checked_subset_is_not_carried_and_a_yes_is_never_taken_away():
    cit = _row("citation_only", ["t3"], e=True)  # no subset recorded
    exp = _row("expanded", ["t1", "t3"])
    assert carry_across_views([cit, exp], which=("e", "r"))[1]["label"] == "insufficient"
    both = carry_across_views([_row("citation_only", ["t3"], r=True, r_subset=[1]),
                               _row("expanded", ["t1", "t3"], e=True, e_subset=[1])], which=("e", "r"))
    assert [x["label"] for x in both] == ["contradicted", "ambiguous"]  # E yes (t1 alone) and R yes (t3)
