"""The label rule (DerivAudit, App. B): D/E/R answers to an obligation label, obligation labels to a
memory label. One module with no imports, so that the report and review layers read the same rule
as the annotation without loading it.
"""

from __future__ import annotations

from collections.abc import Sequence

OBLIGATION_LABELS = ("supported", "insufficient", "contradicted", "ambiguous")
MEMORY_PRECEDENCE = ("contradicted", "unsupported", "ambiguous", "supported")


def obligation_label(d: bool | None, e: bool | None, r: bool | None) -> str:
    """App. B: D=no -> ambiguous; E yes, R no -> supported; E no, R yes -> contradicted;
    E no, R no -> insufficient; E yes, R yes -> ambiguous. A primitive that could not be scored
    (None) leaves the obligation ambiguous."""
    if d is None or e is None or r is None or not d:
        return "ambiguous"
    if e and not r:
        return "supported"
    if r and not e:
        return "contradicted"
    if not e and not r:
        return "insufficient"
    return "ambiguous"


def memory_label(labels: Sequence[str]) -> str:
    """A memory is supported only if every obligation is: contradicted > unsupported (any
    insufficient obligation) > ambiguous > supported."""
    present = {"unsupported" if x == "insufficient" else x for x in labels}
    for lab in MEMORY_PRECEDENCE:
        if lab in present:
            return lab
    raise ValueError("a memory needs at least one obligation label")
