"""The label rule (DerivAudit, App. B), whole table, and the memory precedence."""

from __future__ import annotations

import itertools

import pytest

from derivaudit.labels import memory_label, obligation_label


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
